#!/usr/bin/env python3
"""Durability benchmarks for `make bench-state` (docs/performance.md, docs/state.md).

1. Cost of durability per ADD: one client, sequential ADD/OK round trips, with the state on the
   disk (fsync per group commit) and on tmpfs (/dev/shm: the same work without the fsync).
2. Timer lateness while ADDs are being made durable: a 10 ms interval job's worst fire lateness (from
   STATS) while a client adds jobs as fast as it can.
3. kill -9 in a loop (more cycles than the test suite's 50): clients add and cancel at full speed, the
   daemon is killed, restarted, and every acknowledged change is checked; then PRAGMA integrity_check.

Usage: durability.py TIMERD_BINARY WORK_DIR [CYCLES]
"""
import json, os, random, shutil, signal, socket, sqlite3, statistics, subprocess, sys, threading, time


def start(binary, work, state):
    sock = os.path.join(work, "timerd.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    conf = os.path.join(work, "empty.conf")
    open(conf, "w").close()
    log = open(os.path.join(work, "timerd.log"), "ab")
    proc = subprocess.Popen([binary, "--socket", sock, "--config", conf, "--state-dir", state],
                            stdout=log, stderr=log, env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            c = connect(sock)
            if request(c, "PING") == "OK":
                return proc, sock
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit("timerd did not answer PING")


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s.makefile("rwb", buffering=0)


def request(conn, line):
    conn.write((line + "\n").encode())
    reply = conn.readline()
    if not reply:
        raise OSError("closed")
    return reply.decode().rstrip("\n")


def add_latency(binary, work, state, n=2000):
    proc, sock = start(binary, work, state)
    c = connect(sock)
    lat = []
    for i in range(n):
        t = time.perf_counter_ns()
        assert request(c, f"ADD a{i} every=1h command=true") == "OK"
        lat.append(time.perf_counter_ns() - t)
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    lat.sort()
    return {"median_us": lat[n // 2] / 1000, "p99_us": lat[int(n * 0.99)] / 1000}


def lateness_under_adds(binary, work, state, seconds=10):
    proc, sock = start(binary, work, state)
    c = connect(sock)
    assert request(c, "ADD tick every=10ms command=true") == "OK"
    stop = time.time() + seconds
    added = 0
    while time.time() < stop:
        assert request(c, f"ADD l{added} every=1h command=true") == "OK"
        added += 1
    stats = json.loads(request(c, "STATS")[3:])
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    return {"adds_per_s": added / seconds, "lateness_ms": stats["lateness_ms"]}


def kill_loop(binary, work, state, cycles):
    present, absent = set(), set()
    acknowledged = 0
    for cycle in range(cycles):
        proc, sock = start(binary, work, state)
        names = {job["name"] for job in json.loads(request(connect(sock), "LIST")[3:])}
        lost, back = present - names, absent & names
        if lost or back:
            raise SystemExit(f"cycle {cycle}: lost {sorted(lost)[:5]}, came back {sorted(back)[:5]}")
        added, cancelled, uncertain, lock = set(), set(), set(), threading.Lock()

        def client(k):
            try:
                c = connect(sock)
                for step in range(60):
                    name = f"k{cycle}-{k}-{step}"
                    if request(c, f"ADD {name} every=1h command=true") == "OK":
                        with lock:
                            added.add(name)
                    if step % 3 == 0:
                        with lock:
                            uncertain.add(name)
                        if request(c, f"CANCEL {name}") == "OK":
                            with lock:
                                cancelled.add(name)
            except OSError:
                pass

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(random.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        for t in threads:
            t.join()
        proc.wait()
        acknowledged += len(added) + len(cancelled)
        present |= added - uncertain
        absent |= cancelled
    db = sqlite3.connect(os.path.join(state, "state.db"))
    check = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    return {"cycles": cycles, "acknowledged_changes": acknowledged, "integrity_check": check}


def main():
    binary, work = sys.argv[1], sys.argv[2]
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shm = f"/dev/shm/timerd-bench-{os.getpid()}"
    results = {
        "add_disk": add_latency(binary, work, os.path.join(work, "disk")),
        "add_tmpfs": add_latency(binary, work, shm),
        "lateness_under_adds": lateness_under_adds(binary, work, os.path.join(work, "late")),
        "kill_loop": kill_loop(binary, work, os.path.join(work, "kill"), cycles),
    }
    shutil.rmtree(shm, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
