#!/usr/bin/env python3
"""Pipelined durable ADDs (docs/performance.md, "Group commit within a connection").

Starts timerd on an empty config with a fresh state directory under WORK_DIR, then each of CONNECTIONS
clients writes its share of N `ADD NAME every=1h command=true` lines in one go and reads the replies as
they come. Prints the ADDs acknowledged per second, the daemon's CPU time (user + system) per ADD and the
resident memory per job (VmRSS after the
ADDs minus before, divided by N).

Usage: pipelined_add.py TIMERD_BINARY WORK_DIR [N] [CONNECTIONS]
"""
import os, shutil, socket, subprocess, sys, threading, time


def vmrss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(sock, k, per, results):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    data = "".join(f"ADD c{k}j{i} every=1h command=true\n" for i in range(per)).encode()
    writer = threading.Thread(target=lambda: s.sendall(data))
    writer.start()
    replies = s.makefile("rb")
    ok = sum(1 for _ in range(per) if replies.readline().startswith(b"OK"))
    writer.join()
    results.append(ok)


def main():
    binary, base = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    conns = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    work = os.path.join(base, "pipelined-add")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    open(os.path.join(work, "empty.conf"), "w").close()
    sock = os.path.join(work, "timerd.sock")
    log = open(os.path.join(work, "timerd.log"), "w")
    proc = subprocess.Popen([binary, "--socket", sock, "--config", os.path.join(work, "empty.conf"),
                             "--state-dir", os.path.join(work, "state")], stdout=log, stderr=log)
    try:
        for _ in range(1000):
            try:
                probe = socket.socket(socket.AF_UNIX)
                probe.connect(sock)
                probe.close()
                break
            except OSError:
                time.sleep(0.01)
        before = vmrss_kb(proc.pid)
        cpu_before = cpu_seconds(proc.pid)
        per = n // conns
        results = []
        start = time.perf_counter()
        threads = [threading.Thread(target=client, args=(sock, k, per, results)) for k in range(conns)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        after = vmrss_kb(proc.pid)
        cpu = cpu_seconds(proc.pid) - cpu_before
        ok = sum(results)
        print(f"{conns} connection(s): {ok}/{per * conns} ADDs acknowledged in {elapsed:.2f} s = {ok / elapsed:.0f}/s; "
              f"timerd CPU {cpu:.2f} s ({cpu * 1e6 / max(ok, 1):.0f} µs/ADD); resident {before} kB -> {after} kB = {(after - before) * 1024 // max(ok, 1)} bytes/job")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
