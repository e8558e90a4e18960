/* launcher JOBS PROBE FILE
 *
 * The bare C launcher: the floor any launcher can reach on this machine, measured in the same run as
 * timerd and systemd. It runs the lateness benchmark's schedule (JOBS jobs each due every second on the
 * wall clock, job i at phase i/JOBS s) and nothing else: one thread sleeps with clock_nanosleep until the
 * next due time, then starts `PROBE FILE 1000000000 PHASE_NS` for every job due by then with posix_spawn
 * (glibc's is clone(CLONE_VM | CLONE_VFORK) + execve), in a new session with default signal dispositions
 * and an empty signal mask, as timerd starts a command; stdin and output on /dev/null. Children are
 * reaped with waitpid(WNOHANG) after each round. No schedule arithmetic beyond an addition, no state,
 * no output capture, no records. Runs until killed.
 */
#define _GNU_SOURCE /* POSIX_SPAWN_SETSID */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define NS 1000000000LL

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * NS + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4 || atol(argv[1]) <= 0) {
        fprintf(stderr, "usage: launcher JOBS PROBE FILE\n");
        return 2;
    }
    long jobs = atol(argv[1]);
    char *probe = argv[2], *file = argv[3];

    /* Each job's argv, built once: PROBE FILE PERIOD_NS PHASE_NS. */
    char **phases = calloc((size_t)jobs, sizeof *phases);
    if (phases == NULL) return 1;
    for (long i = 0; i < jobs; i++) {
        if (asprintf(&phases[i], "%lld", (long long)i * NS / jobs) < 0) return 1;
    }

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&files, 1, 2);

    /* Start with the first due time after the next whole second; job k mod JOBS is due at
     * second + k/JOBS s. */
    long long second = (now_ns() / NS + 1) * NS;
    for (long long k = 0;; k++) {
        long i = (long)(k % jobs);
        long long due = second + (k / jobs) * NS + (long long)i * NS / jobs;
        struct timespec at = {.tv_sec = due / NS, .tv_nsec = due % NS};
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) == EINTR) {
        }
        char *args[] = {probe, file, "1000000000", phases[i], NULL};
        pid_t pid;
        int err = posix_spawn(&pid, probe, &files, &attr, args, environ);
        if (err != 0) {
            fprintf(stderr, "launcher: posix_spawn %s: %s\n", probe, strerror(err));
            return 1;
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
    }
}
