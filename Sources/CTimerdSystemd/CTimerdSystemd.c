// libsystemd, loaded on first use under systemd. See include/CTimerdSystemd.h.
#include "CTimerdSystemd.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

static struct {
    __typeof__(sd_notify) *notify;
    __typeof__(sd_watchdog_enabled) *watchdog_enabled;
    __typeof__(sd_listen_fds) *listen_fds;
    __typeof__(sd_is_socket_unix) *is_socket_unix;
    __typeof__(sd_journal_sendv) *journal_sendv;
} api;
static int loaded; /* 1 when every function above was found */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    /* RTLD_LOCAL: its symbols stay out of the way of everything else in the process. */
    void *library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    *(void **)&api.notify = dlsym(library, "sd_notify");
    *(void **)&api.watchdog_enabled = dlsym(library, "sd_watchdog_enabled");
    *(void **)&api.listen_fds = dlsym(library, "sd_listen_fds");
    *(void **)&api.is_socket_unix = dlsym(library, "sd_is_socket_unix");
    *(void **)&api.journal_sendv = dlsym(library, "sd_journal_sendv");
    loaded = api.notify && api.watchdog_enabled && api.listen_fds && api.is_socket_unix && api.journal_sendv;
}

/* Set and not empty: what systemd sets when it wants the call. */
static int set(const char *name) {
    const char *value = getenv(name);
    return value != NULL && value[0] != 0;
}

static int ready(void) {
    pthread_once(&load_once, load);
    return loaded;
}

int tsd_notify(const char *state) {
    if (!set("NOTIFY_SOCKET")) return 0;
    return ready() ? api.notify(0, state) : -ENOSYS;
}

int tsd_watchdog_enabled(uint64_t *usec) {
    if (!set("WATCHDOG_USEC")) return 0;
    return ready() ? api.watchdog_enabled(0, usec) : -ENOSYS;
}

int tsd_listen_fds(void) {
    if (!set("LISTEN_FDS")) {
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDNAMES");
        return 0;
    }
    return ready() ? api.listen_fds(1) : -ENOSYS;
}

int tsd_is_socket_unix(int fd, int type, int listening) {
    return ready() ? api.is_socket_unix(fd, type, listening, NULL, 0) : -ENOSYS;
}

int tsd_journal_sendv(const struct iovec *iov, int n) {
    return ready() ? api.journal_sendv(iov, n) : -ENOSYS;
}
