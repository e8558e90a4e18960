// GNU-only and fork/exec-sensitive calls for TimerdSystem. See include/CTimerdSys.h.
#define _GNU_SOURCE

#include "CTimerdSys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
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

// Spawning, with an optional change of identity between clone and execve.
//
// posix_spawn cannot change credentials, so this does what glibc's posix_spawn does itself: the
// child is made with clone(CLONE_VM | CLONE_VFORK) on a stack of its own. CLONE_VM shares this
// process's memory (no page tables to copy, so it costs the same as posix_spawn whatever the size
// of the daemon); CLONE_VFORK suspends the calling thread until the child has called execve or
// _exit, which is what lets the child report a failure through `struct spawn_args` below.
//
// Why clone with a separate stack rather than vfork(): a vfork child runs on the caller's stack,
// in the caller's frame, and C gives no guarantee about what the compiler spills there after
// vfork() returns a second time; anything the child writes can corrupt the frame the parent
// returns into. With clone the child is an ordinary function on a stack of its own and only
// `struct spawn_args` is shared, explicitly. That stack is a 32 KiB array in tsys_spawn's frame (as
// in musl's posix_spawn): nothing else uses it while the calling thread is suspended, the parent
// never reads it, and it costs nothing. (It was a mapping of its own, an mmap and a munmap per
// spawn; in a process with several threads each munmap also interrupts every CPU running one of
// them to flush its TLB.) Measured use of it on x86_64: 704 bytes, and 3.6 KiB on a process's first
// spawn, when the dynamic linker binds the functions the child calls.
//
// Rules for the child, which shares memory (and the calling thread's TLS, errno included) with a
// suspended parent thread while the parent's other threads keep running:
// - only async-signal-safe calls; no malloc, no locks, no stdio;
// - no glibc wrapper that acts on the whole process: setgroups/setresgid/setresuid in glibc signal
//   every thread of the process (the setxid broadcast) so that all of them change identity, and
//   from here they would signal the parent's threads; the child uses the raw system calls, which
//   change the child alone;
// - open and close by raw system call too: their glibc wrappers are cancellation points that look at
//   the parent thread's cancellation state;
// - signals stay blocked until every disposition is back to SIG_DFL, so no handler of the parent's
//   can run on the child's side of the shared memory;
// - no libc function that a sanitizer intercepts (sigaction, dup2, execve, memset, ...): ThreadSanitizer's
//   and AddressSanitizer's interceptors keep per-thread state, which the child would share with the
//   suspended parent thread (TSan aborts: "CHECK failed: !thr->slot"). So every call is a raw system
//   call through syscall(), which no sanitizer intercepts, and the child's functions are built without
//   sanitizer instrumentation (CHILD_CODE).

// glibc's own name for clone(), the same function. ThreadSanitizer intercepts `clone` as if it were
// fork (it resets its state in the child, which here shares the parent's memory) and not `__clone`.
extern int __clone(int (*fn)(void *), void *stack, int flags, void *arg, ...);

#if defined(__clang__)
#define CHILD_CODE __attribute__((no_sanitize("thread", "address"), disable_sanitizer_instrumentation))
#else
#define CHILD_CODE __attribute__((no_sanitize_thread, no_sanitize_address))
#endif

// The kernel's struct sigaction for rt_sigaction (not glibc's, whose mask is 128 bytes): handler,
// flags, restorer, and a mask of _NSIG bits. x86_64 and aarch64 both have sa_restorer.
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

// The credential system calls taking 32-bit ids. On 32-bit x86 and ARM the plain numbers are the
// old 16-bit calls and glibc uses the *32 ones; 64-bit architectures only have 32-bit ids.
#ifdef SYS_setresuid32
#define TSYS_SYS_setgroups SYS_setgroups32
#define TSYS_SYS_setresgid SYS_setresgid32
#define TSYS_SYS_setresuid SYS_setresuid32
#define TSYS_SYS_getresgid SYS_getresgid32
#define TSYS_SYS_getresuid SYS_getresuid32
#else
#define TSYS_SYS_setgroups SYS_setgroups
#define TSYS_SYS_setresgid SYS_setresgid
#define TSYS_SYS_setresuid SYS_setresuid
#define TSYS_SYS_getresgid SYS_getresgid
#define TSYS_SYS_getresuid SYS_getresuid
#endif

// The child's stack, in tsys_spawn's frame (see above): nine times the most it was measured to use.
#define SPAWN_STACK_SIZE (32 * 1024)

struct spawn_args {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int out;               // the output descriptor, always >= 3
    unsigned fd_limit;     // close every descriptor below this when close_range is missing
    const struct tsys_credentials *credentials;
    // Written by the child only if it fails, read by the parent once clone has returned (the
    // parent is suspended until then). `stage` 0 means the child reached execve successfully.
    volatile int stage;
    volatile int err;
};

CHILD_CODE __attribute__((noreturn)) static void child_fail(struct spawn_args *args, int stage, int err) {
    args->err = err;
    args->stage = stage;
    for (;;) syscall(SYS_exit_group, 127);
}

// stdin from /dev/null, stdout and stderr on the output descriptor, nothing else open.
CHILD_CODE static void child_descriptors(struct spawn_args *args) {
    int in = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY);
    if (in < 0) child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    // `in` stays open where it is: dup2 below replaces it if it is 1 or 2, close_range closes it
    // if it is 3 or more. None of the three standard descriptors is close-on-exec after dup2.
    // dup3 (dup2 does not exist on aarch64) refuses equal descriptors; `in` is not 0 here, `out` is >= 3.
    if (in != 0 && syscall(SYS_dup3, in, 0, 0) < 0) child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    if (syscall(SYS_dup3, args->out, 1, 0) < 0 || syscall(SYS_dup3, args->out, 2, 0) < 0) {
        child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    }
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
    if (errno != ENOSYS) child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    // Kernels before 5.9: one close per possible descriptor (EBADF for most of them).
    for (unsigned fd = 3; fd < args->fd_limit; fd++) {
        syscall(SYS_close, fd);
    }
}

// setgroups, setresgid, setresuid, then checks that the change is complete and cannot be undone.
CHILD_CODE static void child_credentials(struct spawn_args *args, const struct tsys_credentials *c) {
    const int stage = TSYS_SPAWN_STAGE_CREDENTIALS;
    // Groups and gids first: once the uid is not 0 they can no longer be changed.
    if (syscall(TSYS_SYS_setgroups, (long)c->group_count, c->groups) != 0) child_fail(args, stage, errno);
    if (syscall(TSYS_SYS_setresgid, c->gid, c->gid, c->gid) != 0) child_fail(args, stage, errno);
    if (syscall(TSYS_SYS_setresuid, c->uid, c->uid, c->uid) != 0) child_fail(args, stage, errno);

    // Trust, but verify: real, effective and saved ids must all be the target (a uid or gid of -1
    // would have been "leave unchanged" to the calls above).
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (syscall(TSYS_SYS_getresuid, &ruid, &euid, &suid) != 0 ||
        syscall(TSYS_SYS_getresgid, &rgid, &egid, &sgid) != 0) {
        child_fail(args, stage, errno);
    }
    if (ruid != c->uid || euid != c->uid || suid != c->uid ||
        rgid != c->gid || egid != c->gid || sgid != c->gid) {
        child_fail(args, stage, EPERM);
    }
    // Without root's uid, root must be out of reach. This fails unless the child kept CAP_SETUID:
    // a daemon running as root with SECBIT_NO_SETUID_FIXUP, or as another user with CAP_SETUID
    // (which execve could pass on as an ambient capability). If it succeeds, the child is root
    // again and exits at once.
    if (c->uid != 0 && syscall(TSYS_SYS_setresuid, 0, 0, 0) == 0) child_fail(args, stage, EPERM);
}

CHILD_CODE static int spawn_child(void *arg) {
    struct spawn_args *args = arg;

    // The order is the contract of tsys_spawn: session, descriptors, identity, working directory
    // (with the new identity's rights), signals, exec. Signals are all blocked until the end.
    if (syscall(SYS_setsid) < 0) child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    child_descriptors(args);
    if (args->credentials != NULL) child_credentials(args, args->credentials);
    if (args->cwd != NULL && syscall(SYS_chdir, args->cwd) != 0) child_fail(args, TSYS_SPAWN_STAGE_CHDIR, errno);

    // The daemon ignores SIGPIPE, SIGTERM, ... and has handlers; none of it may reach the program.
    // The kernel refuses SIGKILL and SIGSTOP with EINVAL; every other signal goes back to SIG_DFL
    // (glibc's internal 32 and 33 too: execve would reset a handler of theirs anyway).
    struct kernel_sigaction dfl;
    dfl.handler = SIG_DFL;
    dfl.flags = 0;
    dfl.restorer = NULL;
    dfl.mask = 0;
    for (int sig = 1; sig <= 64; sig++) {
        if (syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask) != 0 && errno != EINVAL) {
            child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
        }
    }
    unsigned long empty = 0;
    if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, NULL, sizeof empty) != 0) {
        child_fail(args, TSYS_SPAWN_STAGE_SETUP, errno);
    }

    syscall(SYS_execve, args->path, args->argv, args->envp);
    child_fail(args, TSYS_SPAWN_STAGE_EXEC, errno);
}

int tsys_spawn(pid_t *pid, int *stage, const char *path, char *const argv[], char *const envp[],
               const char *cwd, int output_fd, const struct tsys_credentials *credentials) {
    *stage = TSYS_SPAWN_STAGE_SETUP;
    if (credentials != NULL && credentials->group_count > INT_MAX) {
        *stage = TSYS_SPAWN_STAGE_CREDENTIALS;
        return EINVAL;
    }
    // If the output descriptor is 0, 1 or 2, the child would clobber it before duplicating it;
    // duplicate it out of the way first (close-on-exec, closed again below).
    int out = output_fd;
    if (out < 3) {
        out = fcntl(output_fd, F_DUPFD_CLOEXEC, 3);
        if (out < 0) return errno;
    }
    // Only for the close loop on kernels without close_range; no descriptor can be at or above
    // the soft limit unless the limit was lowered after it was opened.
    struct rlimit files;
    unsigned fd_limit = 1u << 20;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < fd_limit) fd_limit = (unsigned)files.rlim_cur;

    int err = 0;
    // Aligned for any ABI's stack pointer; its top is handed to clone.
    _Alignas(64) char stack[SPAWN_STACK_SIZE];

    // Block every signal in this thread for the child's lifetime before exec: a handler running in
    // the child would run on shared memory with the parent's state. (Dispatch threads already block
    // almost everything; the thread might not be one.) glibc keeps its two internal signals out of
    // any mask; see spawn_child.
    sigset_t all, saved;
    sigfillset(&all);
    err = pthread_sigmask(SIG_BLOCK, &all, &saved);
    if (err != 0) goto close_out;

    struct spawn_args args = {
        .path = path, .argv = argv, .envp = envp, .cwd = cwd, .out = out, .fd_limit = fd_limit,
        .credentials = credentials, .stage = 0, .err = 0,
    };
    // The stack grows down on every architecture Swift supports on Linux: pass its top.
    pid_t child = __clone(spawn_child, stack + SPAWN_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
    if (child < 0) err = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);

    if (child > 0) {
        if (args.stage == 0) {
            *stage = 0;
            *pid = child;
        } else {
            *stage = args.stage;
            err = args.err != 0 ? args.err : EINVAL;
            // It has called _exit(127): reap it so no zombie is left behind.
            while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
            }
        }
    }
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

// The Swift runtime's hook for its global executor and its job runner (swift/Runtime/Concurrency.h).
// Both use the Swift calling convention; a SerialExecutorRef (identity, implementation) is passed as two
// words, and the generic executor is (NULL, 0).
typedef __attribute__((swiftcall)) void (*tsys_swift_enqueue_original)(void *job);
extern __attribute__((swiftcall)) void (*swift_task_enqueueGlobal_hook)(void *job, tsys_swift_enqueue_original original);
extern __attribute__((swiftcall)) void swift_job_run(void *job, const void *executor_identity, uintptr_t executor_implementation);

static void (*global_job_sink)(void *job);

static __attribute__((swiftcall)) void enqueue_global(void *job, tsys_swift_enqueue_original original) {
    (void)original;
    global_job_sink(job);
}

void tsys_redirect_global_executor(void (*sink)(void *job)) {
    global_job_sink = sink;
    swift_task_enqueueGlobal_hook = enqueue_global;
}

void tsys_run_global_job(void *job) { swift_job_run(job, NULL, 0); }

int tsys_malloc_trim(void) { return malloc_trim(0); }
