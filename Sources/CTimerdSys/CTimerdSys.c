// GNU-only and fork/exec-sensitive calls for TimerdSystem. See include/CTimerdSys.h.
#define _GNU_SOURCE

#include "CTimerdSys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

// Kernel headers older than 5.3 lack these numbers; they are the same on every architecture.
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int tsys_pidfd_open(pid_t pid) {
    // pidfds are always close-on-exec; flags must be 0 (PIDFD_NONBLOCK only changes waitid).
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int tsys_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int tsys_accept4_cloexec_nonblock(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int tsys_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return -1;
    }
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int tsys_pipe_cloexec(int fds[2], int nonblocking_read) {
    if (pipe2(fds, O_CLOEXEC) != 0) {
        return -1;
    }
    if (nonblocking_read) {
        int flags = fcntl(fds[0], F_GETFL);
        if (flags < 0 || fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) != 0) {
            int saved = errno;
            close(fds[0]);
            close(fds[1]);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

int tsys_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
               const char *cwd, int output_fd) {
    // If the output descriptor is 0, 1 or 2, the file actions below would clobber it before
    // it is duplicated; move it out of the way first (close-on-exec, closed again below).
    int out = output_fd;
    if (out < 3) {
        out = fcntl(output_fd, F_DUPFD_CLOEXEC, 3);
        if (out < 0) {
            return errno;
        }
    }

    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    int err = posix_spawnattr_init(&attr);
    if (err != 0) {
        goto close_out;
    }
    err = posix_spawn_file_actions_init(&actions);
    if (err != 0) {
        goto destroy_attr;
    }

    // The caller may be a Dispatch thread with (almost) every signal blocked, and the daemon
    // ignores SIGPIPE/SIGTERM/...; the child must start with neither (see LINUX-NOTES.md).
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    short flags = POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if ((err = posix_spawnattr_setflags(&attr, flags)) != 0 ||
        (err = posix_spawnattr_setsigmask(&attr, &empty)) != 0 ||
        (err = posix_spawnattr_setsigdefault(&attr, &all)) != 0) {
        goto destroy_all;
    }

    // Order matters: descriptors first (absolute /dev/null), then closefrom, then chdir, so
    // a relative `path` is resolved in the new working directory, as after a shell `cd`.
    if ((err = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)) != 0 ||
        (err = posix_spawn_file_actions_adddup2(&actions, out, 1)) != 0 ||
        (err = posix_spawn_file_actions_adddup2(&actions, out, 2)) != 0 ||
        (err = posix_spawn_file_actions_addclosefrom_np(&actions, 3)) != 0) {
        goto destroy_all;
    }
    if (cwd != NULL && (err = posix_spawn_file_actions_addchdir_np(&actions, cwd)) != 0) {
        goto destroy_all;
    }

    // glibc runs the file actions and execve in a CLONE_VFORK child and reports their errno
    // here, so a missing program or working directory fails this call with nothing started.
    err = posix_spawn(pid, path, &actions, &attr, argv, envp);

destroy_all:
    posix_spawn_file_actions_destroy(&actions);
destroy_attr:
    posix_spawnattr_destroy(&attr);
close_out:
    if (out != output_fd) {
        close(out);
    }
    return err;
}

int tsys_wait(pid_t pid, int blocking, int *kind, int *value) {
    int status = 0;
    pid_t r = waitpid(pid, &status, blocking ? 0 : WNOHANG);
    if (r <= 0) {
        return (int)r;
    }
    if (WIFEXITED(status)) {
        *kind = TSYS_WAIT_EXITED;
        *value = WEXITSTATUS(status);
    } else {
        // Without WUNTRACED/WCONTINUED, a reaped child either exited or was killed.
        *kind = TSYS_WAIT_SIGNALED;
        *value = WTERMSIG(status);
    }
    return (int)r;
}

static int set_disposition(int sig, void (*handler)(int)) {
    struct sigaction sa = {0};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

int tsys_ignore_signal(int sig) {
    return set_disposition(sig, SIG_IGN);
}

int tsys_default_signal(int sig) {
    return set_disposition(sig, SIG_DFL);
}

int tsys_sigwait(const int *signals, int count) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) {
        if (sigaddset(&set, signals[i]) != 0) return -1;
    }
    int sig = 0;
    int err = sigwait(&set, &sig);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return sig;
}

int tsys_thread_set_mask(const int *signals, int count) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) {
        if (sigaddset(&set, signals[i]) != 0) return -1;
    }
    int err = pthread_sigmask(SIG_SETMASK, &set, NULL);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

int tsys_thread_mask_signal(int sig, int block) {
    sigset_t set;
    sigemptyset(&set);
    if (sigaddset(&set, sig) != 0) {
        return -1;
    }
    int err = pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

int tsys_thread_block_all_signals(void) {
    sigset_t set;
    sigfillset(&set);
    int err = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

const char *tsys_errno_description(int err) {
    return strerrordesc_np(err);
}

const char *tsys_errno_name(int err) {
    return strerrorname_np(err);
}

const char *tsys_signal_abbrev(int sig) {
    return sigabbrev_np(sig);
}

char **tsys_environ(void) {
    return environ;
}

int tsys_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int tsys_epoll_arm(int epfd, int fd, unsigned events, unsigned long long id, int modify) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLONESHOT | ((events & TSYS_EV_READ) ? (EPOLLIN | EPOLLRDHUP) : 0)
        | ((events & TSYS_EV_WRITE) ? EPOLLOUT : 0);
    ev.data.u64 = id;
    return epoll_ctl(epfd, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
}

int tsys_epoll_remove(int epfd, int fd) {
    struct epoll_event ev;  // ignored, but kernels before 2.6.9 required a non-NULL pointer
    memset(&ev, 0, sizeof ev);
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev);
}

int tsys_epoll_wait(int epfd, unsigned long long *ids, unsigned *events, int max, int timeout_ms) {
    struct epoll_event evs[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        unsigned e = evs[i].events, bits = 0;
        if (e & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) bits |= TSYS_EV_READ;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) bits |= TSYS_EV_WRITE;
        ids[i] = evs[i].data.u64;
        events[i] = bits;
    }
    return n;
}

int tsys_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

static int arm_clock_change_fd(int fd) {
    // The far future: the timer never expires, it only gets cancelled when the clock is set.
    struct itimerspec spec = {.it_value = {.tv_sec = (time_t)1 << 40}};
    return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, NULL);
}

int tsys_clock_change_fd(void) {
    int fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0) return -1;
    if (arm_clock_change_fd(fd) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int tsys_clock_change_acknowledge(int fd) {
    unsigned long long expirations;
    ssize_t n = read(fd, &expirations, sizeof expirations);
    if (n >= 0) return 0;
    if (errno == EAGAIN) return 0;
    if (errno != ECANCELED) return -1;
    return arm_clock_change_fd(fd) < 0 ? -1 : 1;
}

// `swift build --sanitize=thread` builds this file with -fsanitize=thread too.
#if defined(__SANITIZE_THREAD__)
#define TSYS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSYS_TSAN 1
#endif
#endif

#ifdef TSYS_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void tsys_tsan_acquire(const void *address) { __tsan_acquire((void *)address); }
void tsys_tsan_release(const void *address) { __tsan_release((void *)address); }
#else
void tsys_tsan_acquire(const void *address) { (void)address; }
void tsys_tsan_release(const void *address) { (void)address; }
#endif
