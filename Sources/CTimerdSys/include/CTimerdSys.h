// CTimerdSys: the few Linux calls Swift cannot make directly or safely.
//
// They are GNU extensions hidden by a plain `import Glibc` (accept4, pipe2, struct ucred), raw
// system calls without a glibc wrapper on older systems (pidfd_open, pidfd_send_signal; syscall()
// is variadic and not callable from Swift), code that must run between clone and execve
// (tsys_spawn_start), or function-like macros Swift does not import (WIFEXITED and friends).
//
// Conventions: every function returns -1 and sets errno on failure, except tsys_spawn_start and
// tsys_spawn_finish, which return the error number itself (like posix_spawn). Signatures use only
// plain POSIX types (and one struct of them). Callers own EINTR handling; nothing here retries.
#ifndef CTIMERDSYS_H
#define CTIMERDSYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Opens a pidfd (always close-on-exec) for `pid`. Returns the fd or -1.
int tsys_pidfd_open(pid_t pid);

/// Sends `sig` to the process behind `pidfd`. Returns 0 or -1.
int tsys_pidfd_send_signal(int pidfd, int sig);

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK). Returns the new fd or -1.
int tsys_accept4_cloexec_nonblock(int fd);

/// Reads SO_PEERCRED of a connected Unix socket. Returns 0 or -1.
int tsys_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// pipe2(fds, O_CLOEXEC | (nonblocking_read ? O_NONBLOCK on fds[0] only : 0)). Returns 0 or -1.
int tsys_pipe_cloexec(int fds[2], int nonblocking_read);

/// The identity a spawned child switches to before its working directory and exec
/// (see tsys_spawn_start). `groups` is the complete supplementary group list (`group_count` entries, at
/// most NGROUPS_MAX; NULL when 0), set as is: compute it in the parent with getgrouplist, which is
/// what initgroups would set (initgroups itself is not async-signal-safe).
struct tsys_credentials {
    uid_t uid;
    gid_t gid;
    const gid_t *groups;
    size_t group_count;
};

// Where a spawned child failed (tsys_spawn_finish's `*stage`).
#define TSYS_SPAWN_STAGE_SETUP 1        // before the child ran anything of its own: the stack, clone,
                                        // the session, descriptors, signals
#define TSYS_SPAWN_STAGE_CREDENTIALS 2  // setgroups/setresgid/setresuid, or their verification
#define TSYS_SPAWN_STAGE_CHDIR 3        // chdir(cwd), done with the new identity
#define TSYS_SPAWN_STAGE_EXEC 4         // execve(path)
#define TSYS_SPAWN_STAGE_RESOURCES 5    // a setting of tsys_process_settings (tsys_spawn_finish's `*detail`
                                        // says which: one of TSYS_SPAWN_DETAIL_*, or 100 + an RLIMIT_*)

#define TSYS_SPAWN_DETAIL_NICE 1
#define TSYS_SPAWN_DETAIL_IOPRIO 2
#define TSYS_SPAWN_DETAIL_OOM_SCORE_ADJ 3
#define TSYS_SPAWN_DETAIL_RLIMIT 100

/// One resource limit for a spawned child (prlimit64: `RLIM_INFINITY` is ~0ULL).
struct tsys_rlimit {
    int resource;
    unsigned long long soft;
    unsigned long long hard;
};

/// Settings of a spawned child's own process, made before its change of identity (so as the caller,
/// which may raise what the new identity could not): scheduling priority (setpriority), I/O priority
/// (ioprio_set, the kernel's class << 13 | level), OOM score adjustment (/proc/self/oom_score_adj) and
/// resource limits (prlimit64), at most 16. Each `set_*` 0 leaves that one alone.
struct tsys_process_settings {
    int set_nice;
    int nice;
    int set_ioprio;
    int ioprio;
    int set_oom_score_adj;
    int oom_score_adj;
    size_t limit_count;
    const struct tsys_rlimit *limits;
};

/// A child started by tsys_spawn_start that may not have reached execve yet: the memory it runs on.
struct tsys_spawn_pending;

/// Starts `path` (used as is: no PATH search) in a new session, with stdin from /dev/null,
/// stdout on `output_fd` and stderr on `error_fd` (on `output_fd` too when `error_fd` is -1), every other descriptor closed, the identity of
/// `credentials` unless it is NULL (then the caller's), the working directory changed to `cwd`
/// when it is not NULL (after the identity change, so with the new identity's rights), every
/// signal at its default action and an empty signal mask. `argv` and `envp` are NULL-terminated.
/// A credential change that returned success but left a real, effective or saved id other than the
/// target, or (for a uid other than 0) that could be undone with setresuid(0, 0, 0), fails with EPERM.
///
/// Does not wait for the child to reach execve: returns 0 as soon as the child exists, storing its
/// pid in `*pid`, its pidfd (close-on-exec, made with the child: clone3's CLONE_PIDFD) in `*pidfd`, and
/// in `*pending` the memory the child runs on, which stays allocated until
/// tsys_spawn_finish. Otherwise returns an errno value and nothing was started. The strings, arrays
/// and credentials are copied: the caller may free them at once. Whether the child then reached
/// execve is known once it has left this process's memory, at its execve or its exit
/// (tsys_spawn_settled; certainly once it has been seen to exit); a child that failed before
/// execve stores why in `*pending` and exits with status 127.
///
/// With `cgroup_fd` >= 0 (a cgroup v2 directory opened O_RDONLY | O_DIRECTORY), the child is created
/// in that cgroup (clone3 with CLONE_INTO_CGROUP, Linux 5.7); -1 leaves it in the caller's.
///
/// With `settings` (NULL: none), the child makes them after its descriptors and before its identity
/// change. With an OOM score adjustment, the caller waits for the child's execve or exit (CLONE_VFORK),
/// as posix_spawn does: a process that shares the caller's memory and is not a vfork child passes an
/// adjustment it makes on to every process sharing that memory (Linux's __set_oom_adj), the caller too.
int tsys_spawn_start(pid_t *pid, int *pidfd, struct tsys_spawn_pending **pending, const char *path, char *const argv[],
                     char *const envp[], const char *cwd, int output_fd, int error_fd,
                     const struct tsys_credentials *credentials, int cgroup_fd,
                     const struct tsys_process_settings *settings);

/// 1 once the child of `pending` has called execve successfully or exited; 0 before. Never blocks.
int tsys_spawn_settled(const struct tsys_spawn_pending *pending);

/// Waits until tsys_spawn_settled (a futex wait, woken by the kernel; at once after the child was seen
/// to exit), then frees `pending`. Returns 0 if the child reached execve, else the errno of its
/// failure with its TSYS_SPAWN_STAGE_* in `*stage` (and for TSYS_SPAWN_STAGE_RESOURCES which setting in
/// `*detail`): the child has then exited with status 127, or is about to, and nothing of `path` ran (the
/// caller reaps it). `*inherited_maxrss_kib`: the peak resident size (KiB) of the memory the child shared
/// with the caller, as the child saw it just before its execve, which Linux carries over into the child's
/// own peak (its wait4 maxrss is no less; 0 if unknown). Any of the three pointers may be NULL.
int tsys_spawn_finish(struct tsys_spawn_pending *pending, int *stage, int *detail, long long *inherited_maxrss_kib);

#define TSYS_WAIT_EXITED 1    // `*value` is the exit code (0...255).
#define TSYS_WAIT_SIGNALED 2  // `*value` is the terminating signal number.

/// What a reaped child and the children it reaped used (wait4's rusage): CPU time (user + system),
/// the largest resident set of any one of them, and blocks read from and written to storage (512-byte
/// units, as the kernel counts them).
struct tsys_usage {
    long long cpu_usec;
    long long max_rss_kib;
    long long in_blocks;
    long long out_blocks;
};

/// wait4(pid, &status, blocking ? 0 : WNOHANG, &rusage), decoded. Returns `pid` and fills `*kind`
/// (a TSYS_WAIT_* value), `*value` and, unless it is NULL, `*usage` when the child was reaped; 0 when
/// it is still running (non-blocking only); -1 on error.
int tsys_wait(pid_t pid, int blocking, int *kind, int *value, struct tsys_usage *usage);

/// Sets the disposition of `sig` to SIG_IGN (sa_flags 0, empty sa_mask). Returns 0 or -1.
int tsys_ignore_signal(int sig);

/// Restores the default disposition of `sig`. Returns 0 or -1.
int tsys_default_signal(int sig);

/// Adds `sig` to (block != 0) or removes it from the calling thread's signal mask.
/// Returns 0 or -1 (pthread_sigmask's error is stored in errno).
int tsys_thread_mask_signal(int sig, int block);

/// Waits for one of `count` signals (which the caller has blocked in every thread) and returns its number,
/// or -1 (sigwait's error in errno).
int tsys_sigwait(const int *signals, int count);

/// Sets the calling thread's signal mask to exactly these `count` signals (SIG_SETMASK). Returns 0 or -1.
int tsys_thread_set_mask(const int *signals, int count);

/// Blocks every signal in the calling thread, as Dispatch worker threads do. Returns 0 or -1.
int tsys_thread_block_all_signals(void);

/// Asks the kernel for a scheduling slice of `nanoseconds` for the calling thread (sched_setattr's
/// sched_runtime under SCHED_OTHER, SCHED_BATCH or SCHED_IDLE; Linux 6.12 and later clamp it to
/// 0.1–100 ms, and a task with a shorter slice preempts one with a longer slice when it wakes; earlier
/// kernels accept and ignore it). Threads created afterwards inherit it, and so would children: from
/// then on tsys_spawn_start gives every command the scheduling the caller had before, ahead of its own
/// settings. Call it once, before the process has other threads. Returns 0, or -1 with errno
/// (ENOTSUP under a realtime or deadline policy, which is left alone).
int tsys_sched_request_slice(uint64_t nanoseconds);

/// The scheduling slice of thread `tid` (0: the caller) as sched_getattr reports it, in nanoseconds (Linux
/// 6.12 and later: the slice asked for, else the kernel's default; earlier kernels: 0), UINT64_MAX if it
/// cannot be read.
uint64_t tsys_sched_slice(pid_t tid);

/// The English description of `err` ("No such file or directory"), or NULL if unknown.
/// MT-safe and never localised (strerrordesc_np).
const char *tsys_errno_description(int err);

/// The symbolic name of `err` ("ENOENT"), or NULL if unknown (strerrorname_np).
const char *tsys_errno_name(int err);

/// The abbreviated name of `sig` without "SIG" ("TERM"), or NULL if unknown (sigabbrev_np).
const char *tsys_signal_abbrev(int sig);

/// The process environment (`environ`, hidden from Swift without _GNU_SOURCE).
char **tsys_environ(void);

// epoll, with the packed `struct epoll_event` kept on the C side (Swift cannot import it faithfully).
#define TSYS_EV_READ 1u   // EPOLLIN; also reported for EPOLLHUP / EPOLLERR / EPOLLRDHUP
#define TSYS_EV_WRITE 2u  // EPOLLOUT; also reported for EPOLLHUP / EPOLLERR

/// epoll_create1(EPOLL_CLOEXEC). Returns the fd or -1.
int tsys_epoll_create(void);

/// epoll_ctl(epfd, EPOLL_CTL_ADD or MOD (modify != 0), fd) with EPOLLONESHOT, interest `events`
/// (TSYS_EV_* bits) and `id` as the event's data. Returns 0 or -1.
int tsys_epoll_arm(int epfd, int fd, unsigned events, unsigned long long id, int modify);

/// epoll_ctl(epfd, EPOLL_CTL_DEL, fd). Returns 0 or -1.
int tsys_epoll_remove(int epfd, int fd);

/// epoll_ctl(epfd, EPOLL_CTL_ADD, fd), level-triggered EPOLLIN with `id` as the event's data.
/// Returns 0 or -1.
int tsys_epoll_add_readable(int epfd, int fd, unsigned long long id);

/// The main Dispatch queue's wake-up descriptor (an eventfd that libdispatch writes when work is queued on
/// the main queue while it was empty): `_dispatch_get_main_queue_handle_4CF`, what CoreFoundation's run
/// loop watches on Linux.
int tsys_main_queue_handle(void);

/// Resets the main queue's wake-up descriptor, then runs what the main queue holds (on the main thread
/// only): `_dispatch_main_queue_callback_4CF`.
void tsys_main_queue_drain(void);

/// epoll_wait(epfd, …, max, timeout_ms), storing each ready event's id and TSYS_EV_* bits.
/// Returns the number of events or -1.
int tsys_epoll_wait(int epfd, unsigned long long *ids, unsigned *events, int max, int timeout_ms);

/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK). Returns the fd or -1.
int tsys_eventfd(void);

/// Adds 1 to eventfd `fd`'s counter (eventfd_write), making it readable.
void tsys_eventfd_signal(int fd);

/// Reads (and so zeroes) eventfd `fd`'s counter, if it has one; non-blocking.
void tsys_eventfd_reset(int fd);

/// timerfd_create on CLOCK_MONOTONIC (realtime 0) or CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK.
/// Returns the fd or -1.
int tsys_timer_fd(int realtime);

/// timerfd_settime with TFD_TIMER_ABSTIME: expires at `at_ns` on the fd's clock (an instant already past
/// at once), or never when `at_ns` < 0. Returns 0 or -1.
int tsys_timer_fd_set(int fd, long long at_ns);

/// Reads the expiration count after the fd became readable: 1 when it had expired, 0 when there was
/// nothing to read (EAGAIN), -1 on another error (errno set).
int tsys_timer_fd_drain(int fd);

/// A CLOCK_REALTIME timerfd (TFD_CLOEXEC | TFD_NONBLOCK) armed for the far future with
/// TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, so it becomes readable when the wall clock is set (or
/// stepped, or the system resumes). Returns the fd or -1.
int tsys_clock_change_fd(void);

/// After the fd became readable: drains it and re-arms it. Returns 1 when the clock was set (read failed
/// with ECANCELED), 0 when nothing happened, -1 on another error (errno set).
int tsys_clock_change_acknowledge(int fd);

/// Tell ThreadSanitizer that the calling thread acquired / is about to release the lock identified by
/// `address` (see TimerdSystem's `Locked`). No-ops unless this file is built with -fsanitize=thread.
void tsys_tsan_acquire(const void *address);
void tsys_tsan_release(const void *address);

/// Sends every job Swift concurrency puts on its global concurrent executor (a task resumed by a
/// continuation, a nonisolated async function) to `sink` instead of libdispatch's global concurrent queue,
/// whose first job starts a worker-pool monitor timer that wakes the process every second for the rest
/// of its life. `sink` must arrange for `tsys_run_global_job(job)` to be called once, on any thread. Call
/// once, before the first task starts (the Swift runtime's `swift_task_enqueueGlobal_hook`).
void tsys_redirect_global_executor(void (*sink)(void *job));

/// Runs a job handed to the sink of `tsys_redirect_global_executor` (`swift_job_run` on the generic
/// executor, as the global executor would).
void tsys_run_global_job(void *job);

/// Gives the free memory of every malloc arena back to the kernel (`malloc_trim(0)`: the free pages
/// inside each arena are advised away, and each heap's top is shrunk). Returns 1 if any memory was
/// released, 0 if not.
int tsys_malloc_trim(void);

#ifdef __cplusplus
}
#endif

#endif
