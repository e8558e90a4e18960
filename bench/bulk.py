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


def main():
    binary, base = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
    seed = os.path.join(base, f"seed-{n}")
    work = os.path.join(base, "run")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    config = os.path.join(work, "empty.conf")
    open(config, "w").close()
    sock = os.path.join(work, "timerd.sock")

    def start(state):
        log = open(os.path.join(work, "timerd.log"), "a")
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

    def connect():
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        return s, s.makefile("rb")

    if not os.path.exists(seed):
        proc = start(os.path.join(seed, "state"))
        s, replies = connect()
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

    proc = start(os.path.join(work, "state"))
    try:
        s, replies = connect()
        for i in range(5):
            s.sendall(f"ADD fast{i} every=100ms tag=fast command=true\n".encode())
            replies.readline()
        watcher, events = connect()
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
        for name in ["idle", "list", "between", "cancel", "after"]:
            values = sorted(late.get(name, []))
            if values:
                print(f"  fast jobs' lateness during {name}: {len(values)} fires, "
                      f"p50 {values[len(values) // 2]:.2f} ms, p99 {values[min(len(values) - 1, len(values) * 99 // 100)]:.2f} ms, "
                      f"max {values[-1]:.2f} ms")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
