#!/usr/bin/env python3
"""Where a fire's time goes, step by step, for timerd and the bare C launcher (docs/performance.md,
"Fire to command (round 13)").

Runs `timerd-bench run --only lateness --turns 1` at one load (timerd's window, then the launcher's) and,
a few seconds into each window, records the scheduler events of the whole machine with `perf record -a`
(the parent's wake and its clone, the fork, the child's first time on a CPU, its execve and the end of
the exec). Each event is put against the due time of its fire: the jobs are due on a grid of 1/LOAD s
of the wall clock, and perf's CLOCK_MONOTONIC timestamps are moved to the wall clock by the offset
between the two taken just before. Prints each step's p50 and p99 in microseconds after the due time,
for both schedulers, and how often the child first ran on its parent's CPU.

Tracing costs every step something (a system call or a context switch more, each an exit to the
hypervisor here), timerd more than the launcher since it makes more of them: compare the steps between
them, not the totals with `make bench`'s.

Usage (as root, with perf, after `make bench` has built timerd-bench):
    bench/fire_timeline.py OUT_DIR [--timerd PATH] [--load N] [--seconds S]
"""
import argparse, os, re, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVENTS = ["sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_switch",
          "syscalls:sys_enter_execve", "syscalls:sys_enter_clone3", "syscalls:sys_enter_clone",
          "syscalls:sys_exit_epoll_wait", "syscalls:sys_exit_clock_nanosleep"]
LINE = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit("fire_timeline: gave up waiting")


def process_with(text):
    """The pid of a process whose command line contains `text`."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text in f.read().replace(b"\0", b" ").decode(errors="replace"):
                        return int(pid)
            except OSError:
                pass
    return None


def grows(path):
    try:
        size = os.path.getsize(path)
        time.sleep(0.3)
        return os.path.getsize(path) > size
    except OSError:
        return False


def record(out, name, seconds):
    offset = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    data = os.path.join(out, f"{name}.data")
    events = [arg for event in EVENTS for arg in ("-e", event)]
    subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", *events, "-o", data,
                    "--", "sleep", str(seconds)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["perf", "script", "-i", data, "--ns", "-F", "comm,pid,tid,cpu,time,event,trace"],
                          check=True, capture_output=True, text=True).stdout
    return offset, text


def steps(offset, text, parent, wake_event, period):
    """Each child of `parent` (a command name prefix): its steps in ns after its due time."""
    children, switched_in, clone_at, woke = {}, {}, {}, {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tid, cpu, sec, nsec, event, rest = m.groups()
        t = int(sec) * 10**9 + int(nsec) + offset
        pid, tid, cpu = int(pid), int(tid), int(cpu)
        mine = comm.startswith(parent)
        if event == wake_event and mine:
            woke[tid] = t
        elif event in ("syscalls:sys_enter_clone3", "syscalls:sys_enter_clone") and mine:
            clone_at[tid] = t
        elif event == "sched:sched_process_fork" and mine:
            child = int(re.search(r"child_pid=(\d+)", rest).group(1))
            clone = clone_at.get(tid, t)
            due = clone - clone % period
            # The parent's first time on a CPU since the due time: its wake for this fire.
            wake = next((x for x in switched_in.get(tid, []) if x >= due), None)
            if wake is not None:
                children[child] = {"due": due, "woken": wake, "loop": woke.get(tid, wake), "clone": clone,
                                   "fork": t, "cpu": cpu}
        elif event == "sched:sched_switch":
            nxt = int(re.search(r"next_pid=(\d+)", rest).group(1))
            switched_in.setdefault(nxt, []).append(t)
            del switched_in[nxt][:-64]
            if nxt in children and "running" not in children[nxt]:
                children[nxt]["running"] = t
                children[nxt]["same_cpu"] = cpu == children[nxt]["cpu"]
        elif event == "syscalls:sys_enter_execve" and pid in children:
            children[pid]["execve"] = t
        elif event == "sched:sched_process_exec" and pid in children:
            children[pid]["exec"] = t
    keys = ("woken", "loop", "clone", "fork", "running", "execve", "exec")
    return [c for c in children.values() if all(k in c for k in keys) and c["exec"] - c["due"] < period]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--timerd", default=os.path.join(ROOT, ".build/release/timerd"))
    parser.add_argument("--load", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=12, help="each scheduler's window")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for program in ("probe", "launcher"):
        subprocess.run(["cc", "-O2", "-o", os.path.join(out, program), os.path.join(ROOT, "bench", program + ".c")], check=True)
    bench = subprocess.Popen(
        [os.path.join(ROOT, ".build/release/timerd-bench"), "run", "--timerd", args.timerd,
         "--probe", os.path.join(out, "probe"), "--launcher", os.path.join(out, "launcher"), "--out", out,
         "--only", "lateness", "--loads", str(args.load), "--seconds", str(args.seconds), "--turns", "1"],
        stdout=open(os.path.join(out, "bench.log"), "w"), stderr=subprocess.STDOUT)
    window = max(2, args.seconds // 3)
    recorded = {}
    wait_for(lambda: grows(os.path.join(out, f"timerd-{args.load}.probe-lines")), 300)
    recorded["timerd"] = record(out, "timerd", window)
    wait_for(lambda: process_with(os.path.join(out, "launcher") + " "), 300)
    wait_for(lambda: grows(os.path.join(out, f"launcher-{args.load}.probe-lines")), 60)
    recorded["launcher"] = record(out, "launcher", window)
    bench.wait()

    period = 10**9 // args.load
    names = [("woken", "on a CPU (woken)"), ("loop", "wake returned"), ("clone", "clone called"),
             ("fork", "child made"), ("running", "child on a CPU"), ("execve", "child's execve"),
             ("exec", "exec done")]
    print(f"µs after the due time, p50 / p99, {args.load} fires/s ({window} s of each window traced)")
    print("%-22s %18s %18s" % ("step", "timerd", "bare C launcher"))
    results = {
        "timerd": steps(*recorded["timerd"], os.path.basename(args.timerd)[:15], "syscalls:sys_exit_epoll_wait", period),
        "launcher": steps(*recorded["launcher"], "launcher", "syscalls:sys_exit_clock_nanosleep", period),
    }
    for key, label in names:
        cells = []
        for who in ("timerd", "launcher"):
            values = [(c[key] - c["due"]) / 1e3 for c in results[who]]
            cells.append("%7.0f / %-7.0f" % (pct(values, 0.5), pct(values, 0.99)))
        print("%-22s %18s %18s" % (label, *cells))
    for who in ("timerd", "launcher"):
        children = results[who]
        same = sum(1 for c in children if c["same_cpu"])
        print(f"{who}: {len(children)} fires; the child first ran on its parent's CPU in {same}")


if __name__ == "__main__":
    sys.exit(main())
