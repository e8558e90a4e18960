// CTimerdSystemd: the few libsystemd calls timerd makes, with libsystemd loaded (dlopen) only when the
// process runs under systemd, so that a timerd started any other way maps neither libsystemd nor the
// libraries it links (liblz4, libzstd, liblzma, libgcrypt, libgpg-error: about 0.9 MiB resident;
// docs/performance.md, "Binary size and idle memory").
//
// Each function first checks the environment systemd sets for it and returns what libsystemd would
// without it (0) when it is absent or empty; otherwise it loads libsystemd.so.0 once and calls it. When
// libsystemd cannot be loaded the calls return -ENOSYS (tsd_listen_fds, under socket activation, too).
#ifndef CTIMERDSYSTEMD_H
#define CTIMERDSYSTEMD_H

#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/// SD_LISTEN_FDS_START: the first descriptor systemd passes.
#define TSD_LISTEN_FDS_START 3

/// sd_notify(0, state); 0 without NOTIFY_SOCKET (or with it empty).
int tsd_notify(const char *state);

/// sd_watchdog_enabled(0, usec); 0 without WATCHDOG_USEC.
int tsd_watchdog_enabled(uint64_t *usec);

/// sd_listen_fds(1); without LISTEN_FDS, 0 (and LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES removed from the
/// environment, as sd_listen_fds(1) does).
int tsd_listen_fds(void);

/// sd_is_socket_unix(fd, type, listening, NULL, 0).
int tsd_is_socket_unix(int fd, int type, int listening);

/// sd_journal_sendv(iov, n).
int tsd_journal_sendv(const struct iovec *iov, int n);

#ifdef __cplusplus
}
#endif

#endif
