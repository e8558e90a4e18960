#!/usr/bin/env python3
"""LIST and CANCEL tag=bulk of many jobs, and the lateness of other jobs meanwhile (docs/performance.md).

Faster to repeat than `timerd-bench run --only scale` (which also adds the jobs one connection at a time):
the jobs are added once, pipelined, into a state directory kept under WORK_DIR/seed-N; each run starts
timerd on a copy of it, adds 5 jobs due every 100 ms (tag=fast) and watches them (`WATCH tag=fast`: each
`fired` event says how late it was handled), then times `LIST` (the whole reply, and its first bytes) and
`CANCEL tag=bulk`, and prints the fast jobs' lateness in each phase.

Usage: bulk.py TIMERD_BINARY WORK_DIR [N]   (N defaults to 100000)
"""
import json, os, shutil, socket, subprocess, sys, threading, time


def start_timerd(binary, sock, config, state, log_path):
    """Starts timerd on SOCK with CONFIG and STATE; returns the process once it answers PING."""
    log = open(log_path, "a")
    proc = subprocess.Popen([binary, "--socket", sock, "--config", config, "--state-dir", state], stdout=log, stderr=log)
    for _ in range(2000):
        try:
            probe = socket.socket(socket.AF_UNIX)
            probe.connect(sock)
            probe.sendall(b"PING\n")
            if probe.recv(16).startswith(b"OK"):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("timerd did not answer")


def prepare(binary, base, n):
    """A fresh BASE/run with an empty config and a copy of the N-job seed state (made once, pipelined, in
    BASE/seed-N); returns (work directory, config, socket path)."""
    seed = os.path.join(base, f"seed-{n}")
    work = os.path.join(base, "run")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    config = os.path.join(work, "empty.conf")
    open(config, "w").close()
    sock = os.path.join(work, "timerd.sock")
    if not os.path.exists(seed):
        proc = start_timerd(binary, sock, config, os.path.join(seed, "state"), os.path.join(work, "timerd.log"))
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        replies = s.makefile("rb")
        data = "".join(f"ADD j{i} every=1h tag=bulk command=true\n" for i in range(n)).encode()
        writer = threading.Thread(target=lambda: s.sendall(data))
        writer.start()
        ok = sum(1 for _ in range(n) if replies.readline().startswith(b"OK"))
        writer.join()
        proc.terminate()
        proc.wait()
        if ok != n:
            shutil.rmtree(seed)
            raise SystemExit(f"only {ok} of {n} ADDs succeeded")
    shutil.copytree(os.path.join(seed, "state"), os.path.join(work, "state"))
    return work, config, sock


def connect(sock):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    return s, s.makefile("rb")


def watch_fast_jobs(sock):
    """Adds 5 jobs due every 100 ms (tag=fast) and watches them from a thread: each `fired` event's
    lateness goes to late[phase[0]]. Returns (connection, its replies, phase, late) 1.5 s later."""
    s, replies = connect(sock)
    for i in range(5):
        s.sendall(f"ADD fast{i} every=100ms tag=fast command=true\n".encode())
        replies.readline()
    watcher, events = connect(sock)
    watcher.sendall(b"WATCH tag=fast\n")
    events.readline()
    phase = ["idle"]
    late = {}

    def watch():
        for line in events:
            event = json.loads(line)
            if event.get("event") == "fired":
                late.setdefault(phase[0], []).append(event["lateness_ms"])

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(1.5)
    return s, replies, phase, late


def print_lateness(late, phases):
    """The fast jobs' lateness in each of PHASES that had fires."""
    for name in phases:
        values = sorted(late.get(name, []))
        if values:
            print(f"  fast jobs' lateness during {name}: {len(values)} fires, p50 {values[len(values) // 2]:.2f} ms, "
                  f"p90 {values[len(values) * 9 // 10]:.2f} ms, p99 {values[min(len(values) - 1, len(values) * 99 // 100)]:.2f} ms, "
                  f"max {values[-1]:.2f} ms; over 1 ms {sum(v > 1 for v in values)}, over 2 ms {sum(v > 2 for v in values)}")


def main():
    binary, base = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
    work, config, sock = prepare(binary, base, n)
    proc = start_timerd(binary, sock, config, os.path.join(work, "state"), os.path.join(work, "timerd.log"))
    try:
        s, replies, phase, late = watch_fast_jobs(sock)

        phase[0] = "list"
        start_time = time.monotonic()
        s.sendall(b"LIST\n")
        first, parts = None, []
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise SystemExit("timerd closed the connection during LIST")
            if first is None:
                first = time.monotonic() - start_time
            parts.append(chunk)
            if chunk.endswith(b"\n"):
                break
        listed = time.monotonic() - start_time
        size = sum(map(len, parts))
        phase[0] = "between"
        time.sleep(0.5)

        phase[0] = "cancel"
        start_time = time.monotonic()
        s.sendall(b"CANCEL tag=bulk\n")
        reply = replies.readline()
        cancelled = time.monotonic() - start_time
        phase[0] = "after"
        time.sleep(0.5)
        if not reply.startswith(b"OK"):
            raise SystemExit(f"CANCEL: {reply[:200]!r}")
        print(f"LIST {listed * 1000:.0f} ms ({size / 1e6:.1f} MB, first bytes after {first * 1000:.0f} ms); "
              f"CANCEL tag=bulk {cancelled * 1000:.0f} ms")
        print_lateness(late, ["idle", "list", "between", "cancel", "after"])
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
