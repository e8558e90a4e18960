#!/usr/bin/env bash
# peer-systemd.sh: the systemd 252 side of the lateness benchmark. The workload timerd runs (N jobs, each due
# every second, phases spread uniformly across the second, each running bench/probe), run instead by N
# systemd timers + Type=oneshot services in a private systemd, so both can be compared side by side.
#
#   bench/peer-systemd.sh --jobs N --seconds S --probe /abs/path/to/probe --out /abs/dir
#
# Writes OUT/systemd-N.samples (one lateness in ns per probe start, S-second window only) and
# OUT/systemd-N.json. Needs root, unshare and nsenter (exit 3 otherwise).
#
# Sub-second phase: systemd 252 rejects a fraction on a `*` seconds field (`*-*-* *:*:*.250000` is "Invalid
# argument" to systemd-analyze calendar, and the unit loader ignores it, then refuses the timer for lacking
# a value), but accepts one on the start of a repetition, to the microsecond: `*-*-* *:*:00.250000/1`
# elapses at :00.25, :01.25, ... :59.25 of every minute, i.e. once per second at phase 0.25 s. Job i uses
# `*-*-* *:*:00.ffffff/1` with ffffff = i*1e6/N µs, rounded to the µs (calendar specs go no finer); the probe
# is given that same rounded phase, so lateness is measured against the instant systemd was asked for.
#
# The private systemd is booted by tools/private-systemd.sh, the recipe Tests/SystemdTests uses too
# (see the design note systemd-in-a-namespace.md): PID + mount + cgroup namespaces, its own cgroups (removed at the end), tmpfs
# /tmp and /run, volatile journal, a target of its own with no default dependencies, --log-level=warning (so
# the per-start "Starting/Finished" info lines a default host would journal are not written: if anything that
# flatters systemd). Powered off with SIGRTMIN+4 to its host PID only, on every exit path.
set -euo pipefail
export LC_ALL=C  # EPOCHREALTIME, sort and awk: '.' decimals, byte order

usage() { echo "usage: $0 --jobs N --seconds S --probe /abs/path/to/probe --out /abs/dir" >&2; exit 2; }
die() { echo "peer-systemd: $*" >&2; exit 1; }
note() { echo "peer-systemd: [${SECONDS}s] $*" >&2; }

jobs='' seconds='' probe='' out=''
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=${2-}; shift 2 || usage ;;
    --seconds) seconds=${2-}; shift 2 || usage ;;
    --probe) probe=${2-}; shift 2 || usage ;;
    --out) out=${2-}; shift 2 || usage ;;
    -h|--help) usage ;;
    *) echo "peer-systemd: unknown argument: $1" >&2; usage ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "peer-systemd: --jobs must be a positive integer" >&2; usage; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "peer-systemd: --seconds must be a positive integer" >&2; usage; }
[[ $probe == /* && $out == /* ]] || { echo "peer-systemd: --probe and --out must be absolute paths" >&2; usage; }

if [ "$EUID" -ne 0 ]; then echo "peer-systemd: must run as root (boots a private systemd in new namespaces)" >&2; exit 3; fi
for tool in unshare nsenter setsid timeout; do
  command -v "$tool" >/dev/null || { echo "peer-systemd: \`$tool\` is not on PATH (util-linux/coreutils)" >&2; exit 3; }
done
systemd_binary=/lib/systemd/systemd
[ -x "$systemd_binary" ] || { echo "peer-systemd: $systemd_binary is missing" >&2; exit 3; }

# The namespace gets its own tmpfs on /tmp and /run: anything there is invisible to the private systemd's
# services, and gone afterwards.
in_private_tmpfs() { case $1/ in /tmp/*|/run/*) return 0 ;; *) return 1 ;; esac; }
out=$(realpath -m -- "$out")
in_private_tmpfs "$out" && die "--out $out is under /tmp or /run, which are private tmpfs inside the namespace (the probes would write where you cannot read it); use e.g. /var/tmp/bench"
probe=$(realpath -e -- "$probe") || die "--probe: no such file"
[ -x "$probe" ] && [ -f "$probe" ] || die "--probe $probe is not an executable file"
in_private_tmpfs "$probe" && die "--probe $probe is under /tmp or /run, which the namespace replaces; copy it to e.g. /var/tmp"
mkdir -p -- "$out"

samples=$out/systemd-$jobs.samples
report=$out/systemd-$jobs.json
window=$out/.systemd-$jobs.samples.window.$$
rm -f -- "$samples" "$report"

scratch=$(mktemp -d /var/tmp/timerd-peer-systemd-XXXXXX)
chmod 755 "$scratch"
cgroup_name=${scratch##*/}
unshare_pid='' systemd_pid='' sleeper='' finished=no

# Alive and not a zombie (our own children stay zombies until waited for).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Still the systemd we booted: a child of our unshare, called systemd, and never the machine's PID 1.
ours() {
  [ -n "$systemd_pid" ] && [ "$systemd_pid" -gt 1 ] && running "$unshare_pid" || return 1
  [ "$(cat "/proc/$systemd_pid/comm" 2>/dev/null)" = systemd ] || return 1
  [ "$(awk '/^PPid:/ { print $2 }' "/proc/$systemd_pid/status" 2>/dev/null)" = "$unshare_pid" ]
}

wait_exit() {  # PID SECONDS
  local deadline=$((SECONDS + $2))
  while running "$1"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

inside() { timeout "${TIMEOUT:-60}" nsenter -t "$systemd_pid" -m -p -- "$@"; }
systemctl_in() { inside systemctl --no-pager "$@"; }

power_off() {
  [ -n "$unshare_pid" ] || return 0
  if ours; then kill -s RTMIN+4 "$systemd_pid"; fi
  if ! wait_exit "$unshare_pid" 45; then
    # SIGKILL to a PID namespace's init takes every process in that namespace with it.
    if ours; then echo "peer-systemd: private systemd (host PID $systemd_pid) did not power off in 45 s; SIGKILL" >&2; kill -KILL "$systemd_pid"; fi
    if ! wait_exit "$unshare_pid" 15 && running "$unshare_pid"; then
      echo "peer-systemd: unshare $unshare_pid still running; SIGKILL" >&2
      kill -KILL "$unshare_pid"
      wait_exit "$unshare_pid" 15 || echo "peer-systemd: unshare $unshare_pid WOULD NOT EXIT" >&2
    fi
  fi
  wait "$unshare_pid" 2>/dev/null || true
  unshare_pid=''
}

# Only empty cgroups can be removed, so this never touches a live process.
remove_cgroups() {
  local root
  [ -f "$scratch/cgroups" ] || return 0
  while read -r root; do
    case $root in /sys/fs/cgroup/*/timerd-peer-systemd-*) ;; *) continue ;; esac
    [ -d "$root" ] || continue
    find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$root" ] || echo "peer-systemd: cgroup left behind: $root" >&2
  done < "$scratch/cgroups"
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  # A TERM ends the window's `wait` early, not its sleep.
  if [ -n "$sleeper" ] && running "$sleeper"; then kill "$sleeper"; wait "$sleeper" 2>/dev/null; fi
  if [ "$finished" != yes ] && [ -n "$unshare_pid" ] && [ -s "$scratch/console.log" ]; then
    echo "peer-systemd: console of the private systemd:" >&2
    tail -n 30 "$scratch/console.log" >&2
  fi
  power_off
  remove_cgroups
  if [ "$finished" != yes ]; then
    # A partial window is no result: leave nothing that looks like one.
    rm -f -- "$samples" "$report" "$window"
    [ $rc -ne 0 ] || rc=1
  fi
  rm -rf -- "$scratch"
  exit $rc
}
trap cleanup EXIT
trap 'echo "peer-systemd: interrupted" >&2; exit 130' INT
trap 'echo "peer-systemd: terminated" >&2; exit 143' TERM

# The private systemd's boot recipe, shared with Tests/SystemdTests.
cp -- "$(dirname -- "$0")/../tools/private-systemd.sh" "$scratch/boot.sh"
: > "$scratch/cgroups"

# Its own session: a Ctrl-C on the terminal must not reach the private systemd (SIGINT is ctrl-alt-del to
# it); our INT trap powers it off instead.
setsid /bin/bash "$scratch/boot.sh" "$cgroup_name" "$scratch" peer-bench.target "timerd lateness benchmark peer" \
    "$systemd_binary" \
    </dev/null >"$scratch/console.log" 2>&1 &
unshare_pid=$!

deadline=$((SECONDS + 20))
while [ -z "$systemd_pid" ]; do
  running "$unshare_pid" || die "unshare exited before systemd started"
  [ $SECONDS -lt $deadline ] || die "the private systemd did not start within 20 s"
  children=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null || true)
  read -r -a pids <<< "$children"
  if [ ${#pids[@]} -eq 1 ] && [ "${pids[0]}" -gt 1 ] && [ "$(cat "/proc/${pids[0]}/comm" 2>/dev/null)" = systemd ]; then
    systemd_pid=${pids[0]}
  else
    sleep 0.1
  fi
done

state='' deadline=$((SECONDS + 30))
until [ "$state" = running ]; do
  running "$unshare_pid" || die "the private systemd exited while booting"
  if [ $SECONDS -ge $deadline ]; then
    failed=$(TIMEOUT=10 systemctl_in --failed --no-legend 2>&1 || true)
    die "the private systemd (host PID $systemd_pid) did not reach \`running\` within 30 s (last state \"${state:-no answer}\"); failed units: ${failed:-none}"
  fi
  sleep 0.2
  state=$(TIMEOUT=5 systemctl_in is-system-running 2>/dev/null || true)
done

note "private systemd up as host PID $systemd_pid (unshare $unshare_pid)"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$systemd_pid/status"; }
rss_before=$(rss)

# Units for N timers and their services, in the namespace's /run (the host does not see them).
units=/proc/$systemd_pid/root/run/systemd/system
width=${#jobs}
timers=()
for ((i = 0; i < jobs; i++)); do
  printf -v name 'peer-probe-%0*d' "$width" "$i"
  phase_us=$(( (i * 1000000 + jobs / 2) / jobs ))
  printf -v calendar '*-*-* *:*:00.%06d/1' "$phase_us"
  # DefaultDependencies=no keeps sysinit.target (tmpfiles, udev, sysctl against the host) out; no start
  # limit, since every service starts once a second (the default 5 per 10 s would fail it after 5 s).
  cat > "$units/$name.service" <<EOF
[Unit]
DefaultDependencies=no
Conflicts=shutdown.target
Before=shutdown.target
StartLimitIntervalSec=0

[Service]
Type=oneshot
ExecStart=$probe $samples 1000000000 $((phase_us * 1000))
EOF
  cat > "$units/$name.timer" <<EOF
[Unit]
DefaultDependencies=no
Conflicts=shutdown.target
Before=shutdown.target peer-probes.target
PartOf=peer-probes.target

[Timer]
OnCalendar=$calendar
AccuracySec=1us
RandomizedDelaySec=0
EOF
  timers+=("$name.timer")
  [ "$i" -ne $((jobs > 1 ? 1 : 0)) ] || example=$calendar
done
# One target pulls them all in, as timers.target does at boot: a single transaction to start, and to stop
# (PartOf=). With a thousand timers firing, a `systemctl stop` of a thousand units by name had most of its
# StopUnit calls fail with ENOBUFS ("No buffer space available").
{
  printf '[Unit]\nDefaultDependencies=no\nConflicts=shutdown.target\nBefore=shutdown.target\n'
  printf 'Wants=%s\n' "${timers[@]}"
} > "$units/peer-probes.target"

# Registering = systemd parsing the N new units plus starting (arming) every timer. The target's job ends
# once every timer's has (the timers are Before= it), so this waits for all N to be armed.
started=$EPOCHREALTIME
TIMEOUT=120 systemctl_in daemon-reload || die "daemon-reload failed"
TIMEOUT=600 systemctl_in start peer-probes.target || die "starting the $jobs timers failed"
register_seconds=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
rss_after=$(rss)
active=$(TIMEOUT=60 systemctl_in list-units --type=timer --state=active --no-legend 'peer-probe-*' | wc -l)
[ "$active" -eq "$jobs" ] || die "only $active of $jobs timers are active after starting them"

note "$jobs timers armed in ${register_seconds} s; settling 3 s, then a ${seconds} s window"
# Past the burst of first fires, then the window.
sleep 3
: > "$samples"
sleep "$seconds" &
sleeper=$!
wait "$sleeper"
sleeper=''
# Probes that start from now on open a fresh file (they open by path), so the window holds only its own S s.
mv -- "$samples" "$window"
note "window over; stopping the timers and powering off"
failed_units=$(TIMEOUT=60 systemctl_in list-units --failed --no-legend 'peer-probe-*' | wc -l)
TIMEOUT=600 systemctl_in stop peer-probes.target || echo "peer-systemd: stopping the timers failed; powering off anyway" >&2
power_off
note "private systemd powered off"
rm -f -- "$samples"
mv -- "$window" "$samples"
[ "$failed_units" -eq 0 ] || echo "peer-systemd: warning: $failed_units probe services were in the failed state" >&2

starts=$(wc -l < "$samples")
expected=$((jobs * seconds))
printf '{"peer":"systemd 252","jobs":%d,"seconds":%d,"expected_fires":%d,"starts":%d,"register_seconds":%s,"pid1_rss_kb_before":%d,"pid1_rss_kb_after":%d,"calendar":"%s"}\n' \
    "$jobs" "$seconds" "$expected" "$starts" "$register_seconds" "$rss_before" "$rss_after" \
    "*-*-* *:*:00.ffffff/1 (ffffff = job i's phase in µs, i*1e6/N; job $((jobs > 1 ? 1 : 0)): $example)" > "$report"
finished=yes

# Nearest-rank percentiles.
summary=$(sort -n "$samples" | awk -v n="$starts" '
  function at(q,  k) { k = int(q * n); if (k < q * n) k++; if (k < 1) k = 1; return v[k] / 1e6 }
  { v[NR] = $1 }
  END { if (n == 0) print "no samples"; else printf "lateness p50 %.3f ms, p99 %.3f ms, max %.3f ms", at(0.5), at(0.99), v[n] / 1e6 }')
# Behind by more than a period, the probe's lateness wraps modulo 1 s: then only starts/expected means much.
saturated=''
[ $((starts * 100)) -ge $((expected * 98)) ] || saturated=' SATURATED (fires lost; lateness wraps at 1 s, so its percentiles mean little)'
echo "systemd 252: $jobs jobs x ${seconds} s: $starts/$expected starts ($(awk -v a="$starts" -v b="$expected" 'BEGIN { printf "%.1f", 100 * a / b }')%), $summary; registered in ${register_seconds} s; PID 1 RSS ${rss_before} -> ${rss_after} kB ($report)$saturated"
