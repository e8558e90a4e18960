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
#include <linux/futex.h>
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
// child is made with clone3(CLONE_VM) on a stack of its own. CLONE_VM shares this process's memory
// (no page tables to copy, so it costs the same as posix_spawn whatever the size of the daemon).
//
// Unlike posix_spawn (CLONE_VFORK), the calling thread does not wait for the child to call execve:
// tsys_spawn_start returns as soon as the child exists. Waiting would hold the caller for the child's
// whole set-up and the start of execve, which on a busy machine includes waiting for a CPU, and for
// as long as the child blocks (a chdir or execve on a hung network file system blocks forever), so
// the daemon could not start runs from the thread that decides them. Instead, everything the child
// reads is copied into one block of its own (`struct spawn_block`: the child's stack, the strings,
// the argument and environment arrays, the identity), which the parent frees only once the child has
// left the shared memory. The kernel says when: with CLONE_CHILD_CLEARTID it writes 0 to
// `block->tid` and wakes any futex waiter there when the child's use of this address space ends, at
// its execve or its exit. A child that fails before execve writes the stage and the errno into its
// block first, then exits with status 127; the parent reads them once `tid` is 0 (tsys_spawn_finish).
//
// Why clone with a separate stack rather than vfork(): a vfork child runs on the caller's stack,
// in the caller's frame, and C gives no guarantee about what the compiler spills there after
// vfork() returns a second time; anything the child writes can corrupt the frame the parent
// returns into. With clone the child is an ordinary function on a stack of its own.
//
// Rules for the child, which shares memory and the calling thread's TLS with the parent's threads,
// the calling one included, all of them running:
// - only raw system calls (`raw_syscall`, inline assembly), never glibc's syscall() or its
//   wrappers: they set errno, which is the calling thread's (shared TLS) and in use by it; some are
//   cancellation points that look at the calling thread's state; glibc's setgroups/setresgid/
//   setresuid signal every thread of the process (the setxid broadcast); and a sanitizer's
//   interceptors keep per-thread state the child would share (TSan aborts: "CHECK failed: !thr->slot");
// - no malloc, no locks, no stdio, and no memory but its own block and read-only data;
// - signals stay blocked until every disposition is back to SIG_DFL, so no handler of the parent's
//   can run on the child's side of the shared memory;
// - the child's functions are built without sanitizer instrumentation (CHILD_CODE).

#if defined(__clang__)
#define CHILD_CODE __attribute__((no_sanitize("thread", "address"), disable_sanitizer_instrumentation))
#else
#define CHILD_CODE __attribute__((no_sanitize_thread, no_sanitize_address))
#endif

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define TSYS_CLONE_INTO_CGROUP 0x200000000ULL
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

// The kernel's struct clone_args (linux/sched.h, CLONE_ARGS_SIZE_VER2: with `cgroup`).
struct tsys_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup;
};

// clone3 that runs `fn(arg)` in the child on the stack `args` names, as glibc's own clone3 wrapper
// does (which it does not export): the child returns from the system call on its new stack with none
// of this function's frame, so it may touch nothing but registers before calling `fn`, which must not
// return (spawn_child ends in execve or exit_group; the exit below is a guard). Returns the child's
// pid, or -errno, in the parent. ThreadSanitizer does not intercept it (it treats glibc's `clone` as
// a fork and would reset its state in a child that shares the parent's memory).
CHILD_CODE __attribute__((noinline)) static long clone3_run(struct tsys_clone_args *args, int (*fn)(void *), void *arg) {
#if defined(__x86_64__)
    register void *function __asm__("r12") = (void *)fn;
    register void *argument __asm__("r13") = arg;
    long ret;
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "mov %%r13, %%rdi\n\t"
                     "call *%%r12\n\t"
                     "mov %%eax, %%edi\n\t"
                     "mov %[exit], %%eax\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:"
                     : "=a"(ret)
                     : "a"((long)SYS_clone3), "D"(args), "S"(sizeof *args), "r"(function), "r"(argument),
                       [exit] "i"(SYS_exit)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_clone3;
    register long x0 __asm__("x0") = (long)args;
    register long x1 __asm__("x1") = (long)sizeof *args;
    register void *function __asm__("x19") = (void *)fn;
    register void *argument __asm__("x20") = arg;
    __asm__ volatile("svc 0\n\t"
                     "cbnz x0, 1f\n\t"
                     "mov x29, xzr\n\t"
                     "mov x0, x20\n\t"
                     "blr x19\n\t"
                     "mov x8, %[exit]\n\t"
                     "svc 0\n"
                     "1:"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(function), "r"(argument), [exit] "i"(SYS_exit)
                     : "x30", "memory");
    return x0;
#else
#error "clone3_run: add this architecture's clone3 sequence"
#endif
}

// A system call without errno: returns the result, or -errno (-4095 ... -1) on failure.
#if defined(__x86_64__)
CHILD_CODE static inline long raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
CHILD_CODE static inline long raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a1;
    register long x1 __asm__("x1") = a2;
    register long x2 __asm__("x2") = a3;
    register long x3 __asm__("x3") = a4;
    register long x4 __asm__("x4") = a5;
    register long x5 __asm__("x5") = a6;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
}
#else
#error "raw_syscall: add this architecture's system call sequence"
#endif

#define RAW0(n) raw_syscall((n), 0, 0, 0, 0, 0, 0)
#define RAW1(n, a) raw_syscall((n), (long)(a), 0, 0, 0, 0, 0)
#define RAW2(n, a, b) raw_syscall((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define RAW3(n, a, b, c) raw_syscall((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define RAW4(n, a, b, c, d) raw_syscall((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define RAW_FAILED(r) ((unsigned long)(r) > -4096UL)

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

// The child's stack: measured use on x86_64 with raw system calls is under 1 KiB. Only the pages it
// touches become resident.
#define SPAWN_STACK_SIZE (16 * 1024)

// The kernel's struct sched_attr up to sched_period (SCHED_ATTR_SIZE_VER0: no utilisation clamps).
struct tsys_sched_attr {
    uint32_t size;
    uint32_t policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime;
    uint64_t deadline;
    uint64_t period;
};

// What the daemon's scheduling was before tsys_sched_request_slice shortened its slice: every command
// gets it back before execve. Written once, before the daemon has other threads (see the header). Since
// Linux 6.12 sched_getattr reports the slice in use, the kernel's default included, so a command gets that
// length back as a slice of its own: the same length, though no longer following a change of the
// kernel's default (sched/base_slice_ns in debugfs) made while it runs.
static struct tsys_sched_attr command_sched;
static int command_sched_saved;

int tsys_sched_request_slice(uint64_t nanoseconds) {
    struct tsys_sched_attr attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return -1;
    // Realtime and deadline policies are the administrator's choice, and have no slice to shorten.
    if (attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH && attr.policy != SCHED_IDLE) {
        errno = ENOTSUP;
        return -1;
    }
    attr.size = sizeof attr;
    struct tsys_sched_attr shorter = attr;
    shorter.runtime = nanoseconds;
    if (syscall(SYS_sched_setattr, 0, &shorter, 0) != 0) return -1;
    command_sched = attr;
    __atomic_store_n(&command_sched_saved, 1, __ATOMIC_RELEASE);
    return 0;
}

uint64_t tsys_sched_slice(pid_t tid) {
    struct tsys_sched_attr attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0) return UINT64_MAX;
    return attr.runtime;
}

// Everything the child reads or writes, in one allocation the parent frees once `tid` is 0.
struct spawn_block {
    // Set to 1 by the parent before clone; the kernel writes 0 (CLONE_CHILD_CLEARTID) when the child
    // has left this address space (execve or exit) and wakes futex waiters.
    volatile int tid;
    // Written by the child only if it fails, before it exits; read by the parent once `tid` is 0.
    // `stage` 0 means the child reached execve successfully.
    volatile int stage;
    volatile int err;
    volatile int detail;
    // The shared memory's peak resident size (KiB) just before execve, which Linux carries over into the
    // child's own (exec_mmap): its rusage maxrss is no less than this.
    volatile long long inherited_maxrss_kib;
    pid_t pid;
    const char *path;
    char **argv;
    char **envp;
    const char *cwd;
    int out;               // the output descriptor, always >= 3 (a duplicate, closed once clone returns)
    int err_out;           // stderr's, the same kind of duplicate, or -1: stderr goes to `out` too
    unsigned fd_limit;     // close every descriptor below this when close_range is missing
    int has_credentials;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    size_t group_count;
    int has_sched;
    struct tsys_sched_attr sched;           // the scheduling the daemon had before its short slice
    int has_settings;
    struct tsys_process_settings settings;  // `limits` points into `rlimits`
    struct tsys_rlimit rlimits[16];
    _Alignas(64) char stack[SPAWN_STACK_SIZE];
    // Then: the argv and envp pointer arrays, the groups, the strings.
};

CHILD_CODE __attribute__((noreturn)) static void child_fail(struct spawn_block *args, int stage, long ret) {
    args->err = (int)-ret;
    args->stage = stage;
    for (;;) RAW1(SYS_exit_group, 127);
}

// stdin from /dev/null, stdout and stderr on the output descriptor, nothing else open.
CHILD_CODE static void child_descriptors(struct spawn_block *args) {
    long in = RAW4(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY, 0);
    if (RAW_FAILED(in)) child_fail(args, TSYS_SPAWN_STAGE_SETUP, in);
    // `in` stays open where it is: dup3 below replaces it if it is 1 or 2, close_range closes it
    // if it is 3 or more. None of the three standard descriptors is close-on-exec after dup3.
    // dup3 (dup2 does not exist on aarch64) refuses equal descriptors; `in` is not 0 here, `out` is >= 3.
    long r;
    if (in != 0 && RAW_FAILED(r = RAW3(SYS_dup3, in, 0, 0))) child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    if (RAW_FAILED(r = RAW3(SYS_dup3, args->out, 1, 0))) child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    if (RAW_FAILED(r = RAW3(SYS_dup3, args->err_out >= 0 ? args->err_out : args->out, 2, 0))) {
        child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    }
    r = RAW3(SYS_close_range, 3u, ~0u, 0u);
    if (r == 0) return;
    if (r != -ENOSYS) child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    // Kernels before 5.9: one close per possible descriptor (EBADF for most of them).
    for (unsigned fd = 3; fd < args->fd_limit; fd++) {
        RAW1(SYS_close, fd);
    }
}

CHILD_CODE __attribute__((noreturn)) static void child_fail_setting(struct spawn_block *args, int detail, long ret) {
    args->detail = detail;
    child_fail(args, TSYS_SPAWN_STAGE_RESOURCES, ret);
}

// Writes `value` in decimal to /proc/self/oom_score_adj. Returns 0 or -errno.
CHILD_CODE static long child_oom_score_adj(int value) {
    char text[12];
    char digits[11];
    int length = 0, count = 0;
    unsigned magnitude = value < 0 ? (unsigned)-value : (unsigned)value;
    do {
        digits[count++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) text[length++] = '-';
    while (count > 0) text[length++] = digits[--count];
    long fd = RAW4(SYS_openat, AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC, 0);
    if (RAW_FAILED(fd)) return fd;
    long r = RAW3(SYS_write, fd, text, length);
    RAW1(SYS_close, fd);
    return RAW_FAILED(r) ? r : 0;
}

// nice, ionice, oom_score_adj, then the resource limits: before the identity change, with the caller's
// rights (a user's run cannot raise them itself; the daemon checked that a user's job only lowers them).
CHILD_CODE static void child_settings(struct spawn_block *args) {
    const struct tsys_process_settings *settings = &args->settings;
    long r;
    if (settings->set_nice && RAW_FAILED(r = RAW3(SYS_setpriority, PRIO_PROCESS, 0, settings->nice))) {
        child_fail_setting(args, TSYS_SPAWN_DETAIL_NICE, r);
    }
    // IOPRIO_WHO_PROCESS is 1.
    if (settings->set_ioprio && RAW_FAILED(r = RAW3(SYS_ioprio_set, 1, 0, settings->ioprio))) {
        child_fail_setting(args, TSYS_SPAWN_DETAIL_IOPRIO, r);
    }
    if (settings->set_oom_score_adj && RAW_FAILED(r = child_oom_score_adj(settings->oom_score_adj))) {
        child_fail_setting(args, TSYS_SPAWN_DETAIL_OOM_SCORE_ADJ, r);
    }
    for (size_t i = 0; i < settings->limit_count; i++) {
        struct { unsigned long long cur, max; } limit = { args->rlimits[i].soft, args->rlimits[i].hard };
        if (RAW_FAILED(r = RAW4(SYS_prlimit64, 0, args->rlimits[i].resource, &limit, NULL))) {
            child_fail_setting(args, TSYS_SPAWN_DETAIL_RLIMIT + args->rlimits[i].resource, r);
        }
    }
}

// setgroups, setresgid, setresuid, then checks that the change is complete and cannot be undone.
CHILD_CODE static void child_credentials(struct spawn_block *args) {
    const int stage = TSYS_SPAWN_STAGE_CREDENTIALS;
    long r;
    // Groups and gids first: once the uid is not 0 they can no longer be changed.
    if (RAW_FAILED(r = RAW2(TSYS_SYS_setgroups, args->group_count, args->groups))) child_fail(args, stage, r);
    if (RAW_FAILED(r = RAW3(TSYS_SYS_setresgid, args->gid, args->gid, args->gid))) child_fail(args, stage, r);
    if (RAW_FAILED(r = RAW3(TSYS_SYS_setresuid, args->uid, args->uid, args->uid))) child_fail(args, stage, r);

    // Trust, but verify: real, effective and saved ids must all be the target (a uid or gid of -1
    // would have been "leave unchanged" to the calls above).
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (RAW_FAILED(r = RAW3(TSYS_SYS_getresuid, &ruid, &euid, &suid))) child_fail(args, stage, r);
    if (RAW_FAILED(r = RAW3(TSYS_SYS_getresgid, &rgid, &egid, &sgid))) child_fail(args, stage, r);
    if (ruid != args->uid || euid != args->uid || suid != args->uid ||
        rgid != args->gid || egid != args->gid || sgid != args->gid) {
        child_fail(args, stage, -EPERM);
    }
    // Without root's uid, root must be out of reach. This fails unless the child kept CAP_SETUID:
    // a daemon running as root with SECBIT_NO_SETUID_FIXUP, or as another user with CAP_SETUID
    // (which execve could pass on as an ambient capability). If it succeeds, the child is root
    // again and exits at once.
    if (args->uid != 0 && RAW3(TSYS_SYS_setresuid, 0, 0, 0) == 0) child_fail(args, stage, -EPERM);
}

CHILD_CODE static int spawn_child(void *arg) {
    struct spawn_block *args = arg;
    long r;

    // The order is the contract of tsys_spawn_start: session, descriptors, identity, working directory
    // (with the new identity's rights), signals, exec. Signals are all blocked until the end.
    if (RAW_FAILED(r = RAW0(SYS_setsid))) child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    child_descriptors(args);
    // The daemon's short slice is for its own threads: the command gets the scheduling the daemon was
    // started with. Not a reason to refuse the run if the kernel says no (the same call that shortened
    // the slice succeeded), so the result is not checked.
    if (args->has_sched) RAW3(SYS_sched_setattr, 0, (long)&args->sched, 0);
    if (args->has_settings) child_settings(args);
    if (args->has_credentials) child_credentials(args);
    if (args->cwd != NULL && RAW_FAILED(r = RAW1(SYS_chdir, args->cwd))) child_fail(args, TSYS_SPAWN_STAGE_CHDIR, r);

    // The daemon ignores SIGPIPE, SIGTERM, ... and has handlers; none of it may reach the program.
    // (Without CLONE_SIGHAND the child has its own copy of the dispositions.) The kernel refuses
    // SIGKILL and SIGSTOP with EINVAL; every other signal goes back to SIG_DFL (glibc's internal 32
    // and 33 too: execve would reset a handler of theirs anyway).
    struct kernel_sigaction dfl;
    dfl.handler = SIG_DFL;
    dfl.flags = 0;
    dfl.restorer = NULL;
    dfl.mask = 0;
    for (int sig = 1; sig <= 64; sig++) {
        r = RAW4(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
        if (RAW_FAILED(r) && r != -EINVAL) child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    }
    unsigned long empty = 0;
    if (RAW_FAILED(r = RAW4(SYS_rt_sigprocmask, SIG_SETMASK, &empty, NULL, sizeof empty))) {
        child_fail(args, TSYS_SPAWN_STAGE_SETUP, r);
    }

    // RUSAGE_SELF's maxrss here is the shared memory's (timerd's) peak so far: what execve passes on.
    struct rusage used;
    if (!RAW_FAILED(RAW2(SYS_getrusage, RUSAGE_SELF, &used))) args->inherited_maxrss_kib = used.ru_maxrss;
    r = RAW3(SYS_execve, args->path, args->argv, args->envp);
    child_fail(args, TSYS_SPAWN_STAGE_EXEC, r);
}

// Copies `text` (with its NUL) to `*cursor` and advances it; returns the copy.
static char *copy_string(char **cursor, const char *text) {
    size_t length = strlen(text) + 1;
    char *copy = *cursor;
    memcpy(copy, text, length);
    *cursor += length;
    return copy;
}

static size_t count_strings(char *const list[], size_t *bytes) {
    size_t count = 0;
    for (; list[count] != NULL; count++) *bytes += strlen(list[count]) + 1;
    return count;
}


int tsys_spawn_start(pid_t *pid, int *pidfd, struct tsys_spawn_pending **pending, const char *path, char *const argv[],
                     char *const envp[], const char *cwd, int output_fd, int error_fd,
                     const struct tsys_credentials *credentials, int cgroup_fd,
                     const struct tsys_process_settings *settings) {
    if (credentials != NULL && credentials->group_count > INT_MAX) return EINVAL;
    if (settings != NULL && settings->limit_count > 16) return EINVAL;

    size_t strings = strlen(path) + 1 + (cwd != NULL ? strlen(cwd) + 1 : 0);
    size_t argc = count_strings(argv, &strings), envc = count_strings(envp, &strings);
    size_t groups = credentials != NULL ? credentials->group_count : 0;
    size_t size = sizeof(struct spawn_block) + (argc + 1 + envc + 1) * sizeof(char *) + groups * sizeof(gid_t) + strings;
    struct spawn_block *block = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (block == NULL) return ENOMEM;

    // A duplicate of the output descriptor that is never 0, 1 or 2 (the child would clobber it before
    // duplicating it). The child gets a copy of this process's descriptor table at clone (no
    // CLONE_FILES), so the duplicate is closed here as soon as clone has returned: the child holds its
    // own, and the pipe's reader sees end of file once the child and what it started have closed theirs.
    block->out = fcntl(output_fd, F_DUPFD_CLOEXEC, 3);
    if (block->out < 0) {
        int err = errno;
        free(block);
        return err;
    }
    block->err_out = error_fd >= 0 ? fcntl(error_fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (error_fd >= 0 && block->err_out < 0) {
        int err = errno;
        close(block->out);
        free(block);
        return err;
    }
    char **pointers = (char **)(block + 1);
    block->argv = pointers;
    block->envp = pointers + argc + 1;
    block->groups = (gid_t *)(pointers + argc + 1 + envc + 1);
    char *cursor = (char *)(block->groups + groups);
    for (size_t i = 0; i < argc; i++) block->argv[i] = copy_string(&cursor, argv[i]);
    block->argv[argc] = NULL;
    for (size_t i = 0; i < envc; i++) block->envp[i] = copy_string(&cursor, envp[i]);
    block->envp[envc] = NULL;
    block->path = copy_string(&cursor, path);
    block->cwd = cwd != NULL ? copy_string(&cursor, cwd) : NULL;
    block->has_credentials = credentials != NULL;
    block->uid = credentials != NULL ? credentials->uid : 0;
    block->gid = credentials != NULL ? credentials->gid : 0;
    block->group_count = groups;
    if (groups > 0) memcpy(block->groups, credentials->groups, groups * sizeof(gid_t));
    // Only for the close loop on kernels without close_range; no descriptor can be at or above
    // the soft limit unless the limit was lowered after it was opened.
    struct rlimit files;
    block->fd_limit = 1u << 20;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < block->fd_limit) block->fd_limit = (unsigned)files.rlim_cur;
    block->has_sched = __atomic_load_n(&command_sched_saved, __ATOMIC_ACQUIRE);
    if (block->has_sched) block->sched = command_sched;
    block->has_settings = settings != NULL;
    if (settings != NULL) {
        block->settings = *settings;
        if (settings->limit_count > 0) memcpy(block->rlimits, settings->limits, settings->limit_count * sizeof(struct tsys_rlimit));
        block->settings.limits = block->rlimits;
    }
    block->tid = 1;
    block->stage = 0;
    block->err = 0;
    block->detail = 0;
    block->inherited_maxrss_kib = 0;

    // Block every signal in this thread around clone: the child starts with this mask, and a
    // handler running in the child would run on shared memory with the parent's state. (Dispatch
    // threads already block almost everything; the thread might not be one.) glibc keeps its two
    // internal signals out of any mask; see spawn_child.
    sigset_t all, saved;
    sigfillset(&all);
    int err = pthread_sigmask(SIG_BLOCK, &all, &saved);
    if (err != 0) {
        close(block->out);
        if (block->err_out >= 0) close(block->err_out);
        free(block);
        return err;
    }
    // clone3 takes the stack's lowest address and size (the kernel starts the child at the top). The
    // release store of everything above happens before clone3 (a system call, a full barrier). With
    // a cgroup, the child is born in it: nothing it does, not even a fork before its execve, runs
    // outside it. CLONE_PIDFD: the kernel opens the child's pidfd (close-on-exec) as it makes the child,
    // in this process's descriptor table only, so there is never a child without one, and no
    // pidfd_open afterwards.
    int child_pidfd = -1;
    struct tsys_clone_args args = {
        .flags = CLONE_VM | CLONE_CHILD_CLEARTID | CLONE_PIDFD | (cgroup_fd >= 0 ? TSYS_CLONE_INTO_CGROUP : 0) |
                 (settings != NULL && settings->set_oom_score_adj ? CLONE_VFORK : 0),
        .pidfd = (uint64_t)(uintptr_t)&child_pidfd,
        .child_tid = (uint64_t)(uintptr_t)&block->tid,
        .exit_signal = SIGCHLD,
        .stack = (uint64_t)(uintptr_t)block->stack,
        .stack_size = SPAWN_STACK_SIZE,
        .cgroup = cgroup_fd >= 0 ? (uint64_t)cgroup_fd : 0,
    };
    long ret = clone3_run(&args, spawn_child, block);
    pid_t child = ret < 0 ? -1 : (pid_t)ret;
    if (ret < 0) err = (int)-ret;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    close(block->out);
    if (block->err_out >= 0) close(block->err_out);
    if (child < 0) {
        free(block);
        return err;
    }
    block->pid = child;
    *pid = child;
    *pidfd = child_pidfd;
    *pending = (struct tsys_spawn_pending *)block;
    return 0;
}

int tsys_spawn_settled(const struct tsys_spawn_pending *pending) {
    const struct spawn_block *block = (const struct spawn_block *)pending;
    return __atomic_load_n(&block->tid, __ATOMIC_ACQUIRE) == 0;
}

static void spawn_wait(const struct tsys_spawn_pending *pending) {
    const struct spawn_block *block = (const struct spawn_block *)pending;
    int tid;
    while ((tid = __atomic_load_n(&block->tid, __ATOMIC_ACQUIRE)) != 0) {
        // Returns at once if `tid` is no longer `tid` (EAGAIN), when woken, or on EINTR.
        syscall(SYS_futex, &block->tid, FUTEX_WAIT, tid, NULL, NULL, 0);
    }
}

int tsys_spawn_finish(struct tsys_spawn_pending *pending, int *stage, int *detail, long long *inherited_maxrss_kib) {
    struct spawn_block *block = (struct spawn_block *)pending;
    spawn_wait(pending);
    if (stage != NULL) *stage = block->stage;
    if (detail != NULL) *detail = block->detail;
    if (inherited_maxrss_kib != NULL) *inherited_maxrss_kib = block->inherited_maxrss_kib;
    int err = block->stage == 0 ? 0 : (block->err != 0 ? block->err : EINVAL);
    free(block);
    return err;
}

int tsys_wait(pid_t pid, int blocking, int *kind, int *value, struct tsys_usage *usage) {
    int status = 0;
    struct rusage used;
    memset(&used, 0, sizeof used);
    pid_t r = wait4(pid, &status, blocking ? 0 : WNOHANG, &used);
    if (r <= 0) {
        return (int)r;
    }
    if (usage != NULL) {
        usage->cpu_usec = (long long)(used.ru_utime.tv_sec + used.ru_stime.tv_sec) * 1000000LL +
                          (long long)(used.ru_utime.tv_usec + used.ru_stime.tv_usec);
        usage->max_rss_kib = used.ru_maxrss;
        usage->in_blocks = used.ru_inblock;
        usage->out_blocks = used.ru_oublock;
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

int tsys_epoll_add_readable(int epfd, int fd, unsigned long long id) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

// libdispatch's run-loop integration, exported for CoreFoundation (swift-corelibs-libdispatch,
// src/queue.c); not in its public headers.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

int tsys_main_queue_handle(void) { return _dispatch_get_main_queue_handle_4CF(); }

void tsys_main_queue_drain(void) {
    // Reset first: work queued after this point writes the eventfd again, so nothing is left unseen.
    tsys_eventfd_reset(_dispatch_get_main_queue_handle_4CF());
    _dispatch_main_queue_callback_4CF(NULL);
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

void tsys_eventfd_signal(int fd) {
    while (eventfd_write(fd, 1) == -1 && errno == EINTR) {}
}

void tsys_eventfd_reset(int fd) {
    eventfd_t value;
    while (eventfd_read(fd, &value) == -1 && errno == EINTR) {}
}

int tsys_timer_fd(int realtime) {
    return timerfd_create(realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
}

int tsys_timer_fd_set(int fd, long long at_ns) {
    struct itimerspec spec = {{0, 0}, {0, 0}};
    if (at_ns >= 0) {
        // it_value zero would disarm it: the first nanosecond is as good as any past instant.
        long long at = at_ns > 0 ? at_ns : 1;
        spec.it_value.tv_sec = (time_t)(at / 1000000000LL);
        spec.it_value.tv_nsec = (long)(at % 1000000000LL);
    }
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

int tsys_timer_fd_drain(int fd) {
    unsigned long long expirations;
    ssize_t n = read(fd, &expirations, sizeof expirations);
    if (n == (ssize_t)sizeof expirations) return 1;
    if (n < 0 && (errno == EAGAIN || errno == ECANCELED)) return 0;
    return -1;
}

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
