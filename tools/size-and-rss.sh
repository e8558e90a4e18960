#!/bin/bash
# Binary size and idle memory of the release build (docs/performance.md, "Binary size and idle memory").
# Run after `make build`, from the repository: prints the size of .build/release/timerd and timerctl as
# built and stripped, then starts timerd three times on an empty config in a temporary directory and
# prints VmRSS, RssAnon and RssFile from /proc/PID/status 2 s after its socket appeared.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for binary in timerd timerctl; do
    strip -o "$work/$binary.stripped" ".build/release/$binary"
    printf '%-9s as built %10d bytes, stripped %10d bytes\n' "$binary" \
        "$(stat -c %s ".build/release/$binary")" "$(stat -c %s "$work/$binary.stripped")"
done
for run in 1 2 3; do
    dir="$work/run$run"
    mkdir -p "$dir"
    : > "$dir/empty.conf"
    .build/release/timerd --config "$dir/empty.conf" --socket "$dir/s.sock" --state-dir "$dir/state" 2> "$dir/log" &
    pid=$!
    for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    sleep 2
    echo "run $run: $(grep -E '^(VmRSS|RssAnon|RssFile):' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')"
    kill "$pid"
    wait "$pid" || true
done
