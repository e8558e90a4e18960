#!/usr/bin/env python3
"""Stalls made on demand, a stand-in for CPU the hypervisor steals (docs/performance.md, "Fire to command
(round 18)"): for SECONDS, every PERIOD_MS it takes one CPU (the machine's CPUs in turn) for MS by spinning
at SCHED_FIFO 50, so whatever runs or waits on that CPU waits that long. Needs root (real-time priority).
With LOG, appends one line a stall: its start and end (wall clock, ns) and the CPU.

    bench/stall.py MS PERIOD_MS SECONDS [LOG]

Run it beside a lateness window, e.g. `timerd-bench run --only lateness --loads 1000 --turns 1 --launcher
bench/results/launcher …`, and compare timerd's p99 with the launcher's under the same stalls.
"""
import os
import sys
import time


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    ms, period, seconds = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    log = open(sys.argv[4], "a") if len(sys.argv) == 5 else None
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    end = time.monotonic() + seconds
    stalls = 0
    while time.monotonic() < end:
        cpu = cpus[stalls % len(cpus)]
        os.sched_setaffinity(0, {cpu})
        began = time.time_ns()
        until = time.monotonic() + ms / 1000
        while time.monotonic() < until:
            pass
        if log:
            log.write(f"{began} {time.time_ns()} {cpu}\n")
        stalls += 1
        os.sched_setaffinity(0, set(cpus))
        time.sleep(period / 1000)
    print("stalls", stalls)


if __name__ == "__main__":
    main()
