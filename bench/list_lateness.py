#!/usr/bin/env python3
"""The lateness of 5 jobs due every 100 ms while `timerctl --json list` lists many jobs (docs/performance.md,
"LIST (round 14)"): the `make bench` row, repeated enough to count the rare late fire; and, with
`--metrics INTERVAL`, while timerd writes the Prometheus metrics of those jobs to a file every INTERVAL
(`metrics_file`; with LISTS 0, for 8 s with no `LIST`).

Uses `bulk.py`'s seed (N jobs added once, pipelined, under WORK_DIR/seed-N); each run starts timerd on a
copy of it, adds the 5 jobs (tag=fast) and watches them (`WATCH tag=fast`: each `fired` event says how
late it was handled), then runs `timerctl --json list > /dev/null` (the timerctl beside TIMERD) LISTS
times, 0.3 s apart. It prints the fast jobs' lateness while a `timerctl` ran and between them, the
timerd main thread's and all its threads' CPU time per `LIST` (the pauses between included), and the
CPU time the host took from this machine meanwhile (steal).

Usage: list_lateness.py TIMERD_BINARY WORK_DIR [LISTS] [N] [--metrics INTERVAL]
       (LISTS defaults to 8, N to 100000)
"""
import os, subprocess, sys, time

from bulk import prepare, print_lateness, start_timerd, watch_fast_jobs


def main():
    args = sys.argv[1:]
    metrics = None
    if "--metrics" in args:
        at = args.index("--metrics")
        metrics = args[at + 1]
        del args[at:at + 2]
    binary, base = args[0], args[1]
    lists = int(args[2]) if len(args) > 2 else 8
    n = int(args[3]) if len(args) > 3 else 100000
    timerctl = os.path.join(os.path.dirname(os.path.abspath(binary)), "timerctl")
    work, config, sock = prepare(binary, base, n)
    if metrics:
        with open(config, "w") as f:
            f.write(f"[daemon]\nmetrics_file = {work}/metrics.prom\nmetrics_interval = {metrics}\n")
    proc = start_timerd(binary, sock, config, os.path.join(work, "state"), os.path.join(work, "timerd.log"))

    def steal_ms():
        return int(open("/proc/stat").readline().split()[8]) * 1000 // os.sysconf("SC_CLK_TCK")

    def cpu_ms(tid):
        fields = open(f"/proc/{proc.pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")

    def all_cpu_ms():
        return sum(cpu_ms(tid) for tid in os.listdir(f"/proc/{proc.pid}/task"))

    try:
        _, _, phase, late = watch_fast_jobs(sock)
        steal, main_cpu, all_cpu = steal_ms(), cpu_ms(proc.pid), all_cpu_ms()
        durations = []
        if lists == 0:
            phase[0] = "metrics"
            time.sleep(8)
        for _ in range(lists):
            phase[0] = "list"
            start = time.monotonic()
            subprocess.run([timerctl, "--socket", sock, "--json", "list"], stdout=subprocess.DEVNULL, check=True)
            durations.append(time.monotonic() - start)
            phase[0] = "between"
            time.sleep(0.3)
        phase[0] = "done"
        if lists:
            print(f"timerctl --json list: {' '.join(f'{d * 1000:.0f}' for d in durations)} ms")
            print(f"CPU per LIST (with its 0.3 s pause): timerd's main thread {(cpu_ms(proc.pid) - main_cpu) / lists:.0f} ms, "
                  f"all its threads {(all_cpu_ms() - all_cpu) / lists:.0f} ms; stolen meanwhile {steal_ms() - steal} ms")
        if metrics:
            print(f"metrics file: {os.path.getsize(work + '/metrics.prom')} bytes, written every {metrics}")
        print_lateness(late, ["idle", "list", "between", "metrics"])
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
