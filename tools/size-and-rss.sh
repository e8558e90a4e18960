#!/bin/bash
# Binary size and idle memory of the release build (docs/performance.md, "Binary size and idle memory").
# Run after `make build`, from the repository: prints the size of .build/release/timerd and timerctl as
# built and stripped, then starts timerd three times on an empty config in a temporary directory and
# prints VmRSS, RssAnon and RssFile from /proc/PID/status 2 s after its socket appeared.
#
#   tools/size-and-rss.sh                     the release build, empty config
#   JOBS=100 tools/size-and-rss.sh            a config of 100 jobs `every = 1h`
#   ADDS=100 tools/size-and-rss.sh            then 100 `ADD hN every=1h -- /bin/true` pipelined on one
#                                             connection (as timerd-bench's idle scenario), read again
#                                             once it is closed: 2 s later, and 10 s later (the Dispatch
#                                             workers that served it end after 5 s idle)
#   RUNS=3 tools/size-and-rss.sh A B …        other timerd binaries, runs alternating between them
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=${JOBS:-0}
adds=${ADDS:-0}
runs=${RUNS:-3}
binaries=("$@")
if [ ${#binaries[@]} -eq 0 ]; then
    binaries=(.build/release/timerd)
    for binary in timerd timerctl; do
        strip -o "$work/$binary.stripped" ".build/release/$binary"
        printf '%-9s as built %10d bytes, stripped %10d bytes\n' "$binary" \
            "$(stat -c %s ".build/release/$binary")" "$(stat -c %s "$work/$binary.stripped")"
    done
fi
for run in $(seq "$runs"); do
    for timerd in "${binaries[@]}"; do
        dir=$(mktemp -d "$work/run.XXXX")
        : > "$dir/timerd.conf"
        for i in $(seq "$jobs"); do printf '[job "h%d"]\nevery = 1h\ncommand = true\n\n' "$i" >> "$dir/timerd.conf"; done
        "$timerd" --config "$dir/timerd.conf" --socket "$dir/s.sock" --state-dir "$dir/state" 2> "$dir/log" &
        pid=$!
        for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
        sleep 2
        echo "run $run, $jobs jobs, $timerd: $(grep -E '^(VmRSS|RssAnon|RssFile):' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')"
        if [ "$adds" -gt 0 ]; then
            python3 - "$dir/s.sock" "$adds" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
n = int(sys.argv[2])
s.sendall("".join(f"ADD h{i} every=1h -- /bin/true\n" for i in range(n)).encode())
replies = s.makefile("rb")
bad = [r for r in (replies.readline() for _ in range(n)) if not r.startswith(b"OK")]
if bad: sys.exit(f"ADD failed: {bad[0]!r}")
PY
            for wait in 2 8; do
                sleep "$wait"
                echo "run $run, +$adds ADDs, $timerd, after $((wait == 2 ? 2 : 10)) s: $(grep -E '^(VmRSS|RssAnon|RssFile):' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')"
            done
        fi
        kill "$pid"
        wait "$pid" || true
    done
done
