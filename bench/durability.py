#!/usr/bin/env python3
"""Durability benchmarks for `make bench-state` (docs/performance.md, docs/state.md).

1. Cost of durability per ADD: one client, sequential ADD/OK round trips, with the state on the
   disk (fsync per group commit) and on tmpfs (/dev/shm: the same work without the fsync).
2. Timer lateness while ADDs are being made durable: a 10 ms interval job's worst fire lateness (from
   STATS) while a client adds jobs as fast as it can.
3. kill -9 in a loop (more cycles than the test suite's 50): clients add and cancel at full speed, the
   daemon is killed, restarted, and every acknowledged change is checked; then PRAGMA integrity_check.
4. The same loop on a nearly full file system (as root; skipped otherwise): a small tmpfs mostly taken
   by a filler file, which shrinks before each start (room for changes) and grows to fill the disk while
   the clients run, so some replies are ERR storage-unavailable. After each restart every acknowledged
   change is there, no refused one is in effect, and PRAGMA integrity_check is ok.

Usage: durability.py TIMERD_BINARY WORK_DIR [CYCLES]
"""
import errno, json, os, random, shutil, signal, socket, sqlite3, statistics, subprocess, sys, threading, time


# Every timerd this run started, so none outlives it (an exception midway included).
STARTED = []


def stop_started():
    for proc in STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start(binary, work, state):
    sock = os.path.join(work, "timerd.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    conf = os.path.join(work, "empty.conf")
    open(conf, "w").close()
    log = open(os.path.join(work, "timerd.log"), "ab")
    proc = subprocess.Popen([binary, "--socket", sock, "--config", conf, "--state-dir", state],
                            stdout=log, stderr=log, env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    STARTED.append(proc)
    deadline = time.time() + 20
    while time.time() < deadline and proc.poll() is None:
        try:
            c = connect(sock)
            if request(c, "PING") == "OK":
                return proc, sock
        except OSError:
            pass
        time.sleep(0.01)
    if proc.poll() is not None:
        raise SystemExit(f"timerd exited with status {proc.returncode} (see {log.name})")
    proc.kill()
    proc.wait()
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


def clients_until_killed(proc, client, midway=None):
    """Runs `client(k)` on 4 threads and kills timerd (SIGKILL) at a random moment within 50 ms (100 ms
    with `midway`, which runs half-way); returns once the threads and timerd have ended."""
    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    time.sleep(random.uniform(0.0, 0.05))
    if midway:
        midway()
        time.sleep(random.uniform(0.0, 0.05))
    proc.send_signal(signal.SIGKILL)
    for t in threads:
        t.join()
    proc.wait()


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

        clients_until_killed(proc, client)
        acknowledged += len(added) + len(cancelled)
        present |= added - uncertain
        absent |= cancelled
    db = sqlite3.connect(os.path.join(state, "state.db"))
    check = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    return {"cycles": cycles, "acknowledged_changes": acknowledged, "integrity_check": check}


FULL_DISK_SIZE = 2 * 1024 * 1024
# Free space left before each start: room for some changes, and for timerd to open its database.
FULL_DISK_ROOM = (128 * 1024, 256 * 1024, 512 * 1024)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def set_free(mount, filler, want):
    """Shrinks or grows `filler` so that about `want` bytes of `mount` are free (0: full). Returns the
    free space then (more than `want` when the filler is empty and something else took the room)."""
    size = os.path.getsize(filler)
    target = max(0, size + free_bytes(mount) - want)
    if target < size:
        os.truncate(filler, target)
    elif target > size:
        # Written, not truncated up: a sparse file would take no room.
        # ENOSPC can come from a write or from the close's flush: either way the disk is full.
        try:
            with open(filler, "r+b") as f:
                f.seek(size)
                chunk = b"\0" * 65536
                while f.tell() < target:
                    f.write(chunk[:target - f.tell()])
                    f.flush()
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return free_bytes(mount)


def kill_loop_full_disk(binary, work, cycles):
    """The kill -9 loop on a small tmpfs kept nearly full (see the module's docstring, 4)."""
    if os.geteuid() != 0:
        print("kill_loop_full_disk: skipped: mounting a tmpfs needs root", file=sys.stderr)
        return {"skipped": "needs root (mounts a tmpfs)"}
    mount = os.path.join(work, "full")
    os.makedirs(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_DISK_SIZE}", "tmpfs", mount], check=True)
    try:
        return full_disk_cycles(binary, work, mount, cycles)
    finally:
        stop_started()
        if subprocess.run(["umount", mount]).returncode != 0:
            subprocess.run(["umount", "-l", mount])


def full_disk_cycles(binary, work, mount, cycles):
    state, filler = os.path.join(mount, "state"), os.path.join(mount, "filler")
    open(filler, "wb").close()
    present, absent = set(), set()
    counts = {"acknowledged": 0, "refused": 0, "other_errors": 0, "lost": 0, "came_back": 0,
              "integrity_failures": 0, "start_failures": 0, "cycles_with_both": 0, "cycles_all_refused": 0,
              "room_gone_at_cycle": None}
    examples = []

    def restart_and_check(cycle):
        """Starts timerd with some room, and checks what the cycles before acknowledged and refused."""
        room = random.choice(FULL_DISK_ROOM)
        if set_free(mount, filler, room) < min(FULL_DISK_ROOM) and counts["room_gone_at_cycle"] is None:
            # The filler is gone and timerd's files (its WAL) hold the rest: no room to give back.
            counts["room_gone_at_cycle"] = cycle
        try:
            proc, sock = start(binary, work, state)
        except SystemExit as e:
            # Not on what room there was: say so, give it all the room there is, and try again.
            counts["start_failures"] += 1
            if len(examples) < 5:
                examples.append(f"cycle {cycle}: start: {e}")
            set_free(mount, filler, FULL_DISK_SIZE)
            proc, sock = start(binary, work, state)
        names = {job["name"] for job in json.loads(request(connect(sock), "LIST")[3:])}
        lost, back = present - names, absent & names
        counts["lost"] += len(lost)
        counts["came_back"] += len(back)
        if (lost or back) and len(examples) < 5:
            examples.append(f"cycle {cycle}: lost {sorted(lost)[:5]}, came back {sorted(back)[:5]}")
        # Read while timerd runs: this connection is not the last, so closing it checkpoints nothing.
        db = sqlite3.connect(os.path.join(state, "state.db"))
        check = db.execute("PRAGMA integrity_check").fetchone()[0]
        db.close()
        if check != "ok":
            counts["integrity_failures"] += 1
            if len(examples) < 5:
                examples.append(f"cycle {cycle}: integrity_check: {check}")
        return proc, sock

    for cycle in range(cycles):
        proc, sock = restart_and_check(cycle)
        added, cancelled, add_refused, cancel_refused, uncertain = set(), set(), set(), set(), set()
        other, lock = [], threading.Lock()

        def change(c, line, name, done, refused):
            """Sends one change; files its name by the reply. Returns whether it was acknowledged."""
            reply = request(c, line)
            with lock:
                if reply == "OK":
                    done.add(name)
                elif reply.startswith("ERR storage-unavailable "):
                    refused.add(name)
                else:
                    other.append(reply)
            return reply == "OK"

        def client(k):
            try:
                c = connect(sock)
                for step in range(60):
                    name = f"f{cycle}-{k}-{step}"
                    if change(c, f"ADD {name} every=1h command=true", name, added, add_refused) and step % 3 == 0:
                        with lock:
                            uncertain.add(name)
                        change(c, f"CANCEL {name}", name, cancelled, cancel_refused)
            except OSError:
                pass

        clients_until_killed(proc, client, midway=lambda: set_free(mount, filler, 0))
        counts["acknowledged"] += len(added) + len(cancelled)
        counts["refused"] += len(add_refused) + len(cancel_refused)
        counts["other_errors"] += len(other)
        if other and len(examples) < 5:
            examples.append(f"cycle {cycle}: {other[0]}")
        if (added or cancelled) and (add_refused or cancel_refused):
            counts["cycles_with_both"] += 1
        if not (added or cancelled) and (add_refused or cancel_refused):
            counts["cycles_all_refused"] += 1
        # A refused CANCEL is certainly not in effect; one whose reply never came may be.
        present |= (added - uncertain) | (added & cancel_refused)
        absent |= cancelled | add_refused
    proc, _ = restart_and_check(cycles)
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    files = {name: os.path.getsize(os.path.join(state, name)) for name in sorted(os.listdir(state))}
    return {"cycles": cycles, "size_bytes": FULL_DISK_SIZE, **counts, "state_files_at_end": files, "problems": examples}


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
        "kill_loop_full_disk": kill_loop_full_disk(binary, work, max(1, cycles // 3)),
    }
    shutil.rmtree(shm, ignore_errors=True)
    print(json.dumps(results, indent=2))
    full = results["kill_loop_full_disk"]
    if "skipped" not in full and (full["lost"] or full["came_back"] or full["integrity_failures"]):
        raise SystemExit("kill_loop_full_disk: acknowledged changes lost, refused ones in effect, or a failed integrity check")


if __name__ == "__main__":
    main()
