/* probe FILE PERIOD_NS PHASE_NS
 *
 * The command every lateness benchmark runs, for timerd and for its peers alike: it appends one line to
 * FILE with how late it started, in nanoseconds, relative to the most recent due time on the wall clock,
 * where due times are the instants t with t = PHASE_NS (mod PERIOD_NS). It does nothing else, so it costs
 * about what `true` costs. Valid while lateness stays below PERIOD_NS (a scheduler that falls further
 * behind than a whole period is reported as saturated by the benchmark, not by this probe).
 *
 * Under timerd, TIMERD_SCHEDULED_AT (RFC 3339, UTC, as timerd sets it) is the due time instead: timerd's
 * `start=` is relative to when the job was added, so its phase is not known to the benchmark exactly.
 */
#define _GNU_SOURCE /* strptime, timegm */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* "2026-11-29T18:30:56.400000Z" -> ns since the epoch; -1 if it is not in that form. */
static long long parse_utc(const char *text) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == NULL) return -1;
    long long ns = 0, scale = 100000000LL;
    if (*rest == '.') {
        for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10) ns += (*rest - '0') * scale;
    }
    if (strcmp(rest, "Z") != 0) return -1;
    return (long long)timegm(&tm) * 1000000000LL + ns;
}

int main(int argc, char **argv) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (argc != 4) {
        fprintf(stderr, "usage: probe FILE PERIOD_NS PHASE_NS\n");
        return 2;
    }
    long long period = atoll(argv[2]), phase = atoll(argv[3]);
    if (period <= 0 || phase < 0) {
        fprintf(stderr, "probe: PERIOD_NS must be > 0 and PHASE_NS >= 0\n");
        return 2;
    }
    long long t = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    long long late = ((t - phase) % period + period) % period;
    const char *scheduled = getenv("TIMERD_SCHEDULED_AT");
    if (scheduled != NULL) {
        long long due = parse_utc(scheduled);
        if (due < 0) {
            fprintf(stderr, "probe: cannot parse TIMERD_SCHEDULED_AT=%s\n", scheduled);
            return 2;
        }
        late = t - due;
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%lld\n", late);
    int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n) {
        perror("probe");
        return 1;
    }
    return 0;
}
