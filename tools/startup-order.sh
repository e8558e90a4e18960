#!/bin/bash
# Regenerates tools/startup-order.txt, the symbol ordering file `make build` links timerd with
# (docs/performance.md, "Start-up code together"): the functions of the timerd binary that run from exec
# until it is idle, in the order they first run, so that the linker puts them next to each other and an
# idle timerd maps a few hundred KiB of its code instead of 64 KiB windows spread over 10 MiB.
#
#   make build && tools/startup-order.sh              rewrites tools/startup-order.txt
#   tools/startup-order.sh BINARY OUT                 another binary, another output file
#   tools/startup-order.sh --check                    (make test) fails when more than 1% of the functions
#                                                     that run at start are missing from the committed list
#
# Needs valgrind (callgrind) and python3. It runs the binary twice under callgrind, each time with a
# fresh state directory, and takes what ran up to the moment it is idle (callgrind_control --dump):
#   1. an empty config, then one control connection with a `PING` (timerd-bench's idle scenario);
#   2. a config of 100 jobs `every = 1h`, then one connection with 100 pipelined `ADD`s (the other idle
#      rows of issue #19, tools/size-and-rss.sh with JOBS=100 or ADDS=100).
# The list is the functions of 1, then those of 2 not in 1. Names that no longer exist after a change
# are ignored by the linker (--no-warn-symbol-ordering), so a stale list costs memory, not correctness;
# regenerate it after changes to start-up and commit it with them.
set -euo pipefail
cd "$(dirname "$0")/.."
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
binary=${1:-.build/release/timerd}
output=${2:-tools/startup-order.txt}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
committed=$output
[ -n "$check" ] && output=$work/fresh.txt
# valgrind 3.19 cannot read the DWARF 5 of the release build: trace a copy without debug info (the
# symbol table, which callgrind names functions by, stays).
strip --strip-debug -o "$work/timerd" "$binary"

# trace NAME JOBS ADDS: the mangled names of the binary's functions that ran, in order of first run.
trace() {
    local dir="$work/$1" jobs=$2 adds=$3 pid i
    mkdir "$dir"
    : > "$dir/timerd.conf"
    for i in $(seq "$jobs"); do printf '[job "h%d"]\nevery = 1h\ncommand = true\n\n' "$i" >> "$dir/timerd.conf"; done
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind" --dump-instr=no --demangle=no \
        --separate-threads=no "$work/timerd" --config "$dir/timerd.conf" --socket "$dir/s.sock" \
        --state-dir "$dir/state" > "$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    python3 - "$dir/s.sock" "$adds" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
n = int(sys.argv[2])
requests = [f"ADD a{i} every=1h -- /bin/true\n" for i in range(n)] or ["PING\n"]
s.sendall("".join(requests).encode())
replies = s.makefile("rb")
bad = [r for r in (replies.readline() for _ in requests) if not r.startswith(b"OK")]
if bad: sys.exit(f"request failed: {bad[0]!r}")
PY
    # The connection's close and what follows it (idle memory given back) run after the reply.
    sleep 5
    callgrind_control --dump "$pid" > /dev/null 2>&1
    sleep 3
    kill "$pid"
    wait "$pid" || true
    python3 - "$dir/callgrind.1" <<'PY'
import re, sys
# callgrind's format names objects (ob=) and functions (fn=, cfn=) once as "(id) name", then "(id)".
objects, functions, current, seen = {}, {}, None, set()
def name(table, spec):
    m = re.match(r'\((\d+)\)(?: (.*))?$', spec)
    if not m: return spec
    if m.group(2) is not None: table[m.group(1)] = m.group(2)
    return table.get(m.group(1))
for line in open(sys.argv[1], errors='replace'):
    line = line.rstrip('\n')
    if line.startswith('ob='): current = name(objects, line[3:])
    elif line.startswith('cob='): name(objects, line[4:])
    elif line.startswith('cfn='): name(functions, line[4:])
    elif line.startswith('fn='):
        f = name(functions, line[3:])
        if not (current and current.endswith('/timerd') and f) or f.startswith('0x'): continue
        f = re.sub(r"'\d+$", '', f)   # callgrind's mark of a recursive call
        if f not in seen: seen.add(f); print(f)
PY
}
trace empty 0 0 > "$work/empty.txt"
trace jobs 100 100 > "$work/jobs.txt"
awk '!seen[$0]++' "$work/empty.txt" "$work/jobs.txt" > "$output"
if [ -z "$check" ]; then
    echo "$output: $(wc -l < "$work/empty.txt") functions at start, $(wc -l < "$output") with 100 jobs"
    exit 0
fi
# A stale list went unnoticed once and cost an idle timerd 2 MiB (docs/performance.md, "Start-up code
# together"): the functions that run now and are not in it.
missing=$(sort -u "$output" | comm -23 - <(sort -u "$committed") | wc -l)
total=$(wc -l < "$output")
if [ $((missing * 100)) -gt "$total" ]; then
    echo "$committed is stale: $missing of the $total functions that run at start are not in it;" \
        "run 'make build && tools/startup-order.sh' and commit it" >&2
    exit 1
fi
echo "$committed: $missing of the $total functions that run at start are not in it (at most 1%)"
