#!/usr/bin/env bash
# The benchmark behind `make bench` (see docs/performance.md). Needs the release build of timerd and
# timerd-bench (the Makefile builds them first). Environment:
#   BENCH_OUT      where results go (default bench/results; not under /tmp: the systemd peer runs in a
#                  namespace with its own /tmp)
#   BENCH_SECONDS  each scheduler's lateness window at each load (default 60; timerd's and the launcher's
#                  are cut into BENCH_TURNS turns, default 4), and the cluster window (default 20)
#   BENCH_LOADS    lateness loads in jobs (= fires per second), comma-separated (default 1000,200)
#   BENCH_SCALE    jobs in the scale test (default 100000)
#   BENCH_PEERS    "systemd" (default) or "none"
#   BENCH_CLUSTER_LOADS  cluster runs as NODES:FIRES_PER_SECOND, comma-separated (default 1:2000,3:3000)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${BENCH_OUT:-$PWD/bench/results}
seconds=${BENCH_SECONDS:-60}
loads=${BENCH_LOADS:-1000,200}
scale=${BENCH_SCALE:-100000}
peers=${BENCH_PEERS:-systemd}
bin=$PWD/.build/release

case "$out" in
    /*) ;;
    *) out=$PWD/$out ;;
esac
mkdir -p "$out"
# Results of an earlier run must not leak into this report.
rm -f "$out"/*.json "$out"/*.samples "$out"/*.probe-lines "$out"/*.dispatch "$out"/*.dat "$out"/*.log "$out"/report.md "$out"/lateness.*
cc -O2 -Wall -Wextra -o "$out/probe" bench/probe.c
cc -O2 -Wall -Wextra -o "$out/launcher" bench/launcher.c

# Lateness, one load at a time: systemd 252, then timerd and the bare C launcher (the floor) taking turns
# (timerd-bench's --turns, 4 windows each by default), so the two whose ratio is the target see the same
# mix of the machine's moments.
for jobs in ${loads//,/ }; do
    if [ "$peers" = systemd ]; then
        echo "systemd 252 peer: $jobs timers every second for $seconds s …"
        status=0
        bash bench/peer-systemd.sh --jobs "$jobs" --seconds "$seconds" --probe "$out/probe" --out "$out" || status=$?
        if [ "$status" = 3 ]; then
            echo "(systemd peer skipped: it needs root and unshare)"
            peers=none
        elif [ "$status" != 0 ]; then
            echo "systemd peer failed (exit $status)" >&2
            exit "$status"
        fi
    fi
    "$bin/timerd-bench" run --timerd "$bin/timerd" --probe "$out/probe" --launcher "$out/launcher" --out "$out" \
        --seconds "$seconds" --turns "${BENCH_TURNS:-4}" --loads "$jobs" --only lateness
done

# The webhook scenario's server: Debian's nginx binary, unpacked (not installed: the package would start
# a system-wide nginx on port 80).
nginx=$(command -v nginx || true)
if [ -z "$nginx" ]; then
    if [ ! -x "$out/nginx-root/usr/sbin/nginx" ]; then
        (cd "$out" && rm -f nginx_*.deb && apt-get download -qq nginx 2>/dev/null && dpkg -x nginx_*.deb nginx-root) \
            || echo "(could not fetch Debian's nginx: the webhook scenario is skipped)"
    fi
    [ -x "$out/nginx-root/usr/sbin/nginx" ] && nginx=$out/nginx-root/usr/sbin/nginx
fi
only=scale,throughput,idle
[ -n "$nginx" ] && only=$only,webhooks
# The cluster scenario's etcd: Debian's etcd-server (the Makefile's set-up installs it).
etcd=$(command -v etcd || true)
if [ -n "$etcd" ]; then only=$only,cluster; else echo "(no etcd on PATH, Debian's etcd-server: the cluster scenario is skipped)"; fi

"$bin/timerd-bench" run --timerd "$bin/timerd" --probe "$out/probe" --out "$out" \
    --seconds "$seconds" --loads "$loads" --scale-jobs "$scale" --only "$only" ${nginx:+--nginx "$nginx"} \
    ${etcd:+--etcd "$etcd"} --cluster-seconds "${BENCH_SECONDS:-20}" --cluster-loads "${BENCH_CLUSTER_LOADS:-1:2000,3:3000}"
"$bin/timerd-bench" report --out "$out" > /dev/null
gnuplot "$out/lateness.gp"
echo
cat "$out/report.md"
echo
echo "Report: $out/report.md, plot: $out/lateness.png"
