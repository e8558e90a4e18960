#!/usr/bin/env bash
# The Debian package's life on a host: install → timerd running (socket activation) → timerctl ping →
# remove → purge, with dpkg and a real systemd, in a private systemd booted in namespaces of its own
# (tools/private-systemd.sh) whose /usr, /etc and /var are overlays: the host's dpkg database, /usr and
# /etc are never written (checked at the end).
#
# Needs root, unshare and nsenter (as SystemdTests do); without them it says so loudly and skips, unless
# CI=true, where that is a failure. Builds nothing: `make test-deb` builds the package first.
#
# Last line: "N passed, M failed"; the exit status is 1 if anything failed.

set -u
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
version=$(head -n 1 debian/changelog | cut -d'(' -f2 | cut -d')' -f1)
deb=$repo/dist/timerd_${version}_$(dpkg --print-architecture).deb

source Tests/InstallTests/checks.sh
finish() { tally; exit $?; }

problem=
[[ $(id -u) -eq 0 ]] || problem="not root"
for tool in unshare nsenter dpkg; do command -v "$tool" >/dev/null || problem="$problem${problem:+; }no $tool"; done
[[ -f $deb ]] || problem="$problem${problem:+; }no $deb (run make deb)"
if [[ -n $problem ]]; then
    if [[ ${CI:-} == true ]]; then fail "the package cycle can run here" "$problem"; finish; fi
    echo "!!! the package's install/remove/purge cycle was NOT tested: $problem"
    finish
fi

scratch=$(mktemp -d /var/tmp/timerd-deb-cycle.XXXXXX) || exit 2
cp tools/private-systemd.sh "$scratch/boot.sh"
cp "$deb" "$scratch/timerd.deb"
: > "$scratch/cgroups"
host_status=$(md5sum /var/lib/dpkg/status)
host_had_group=$(getent group timerd >/dev/null && echo yes || echo no)

setsid bash "$scratch/boot.sh" "timerd-deb-cycle-${scratch##*.}" "$scratch" deb-cycle.target "timerd package test bed" \
    /lib/systemd/systemd /usr /etc /var >"$scratch/console.log" 2>&1 </dev/null &
unshare_pid=$!
systemd_pid=

cleanup() {
    # SIGRTMIN+4 (poweroff) to our systemd only: a child of our unshare, named systemd, never PID 1.
    if [[ -n $systemd_pid && $systemd_pid -gt 1 && $(cat "/proc/$systemd_pid/comm" 2>/dev/null) == systemd ]]; then
        kill -s RTMIN+4 "$systemd_pid"
    fi
    for _ in $(seq 450); do kill -0 "$unshare_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$unshare_pid" 2>/dev/null; then
        echo "the private systemd did not power off within 45 s: SIGKILL to it (every process of its namespace ends)"
        [[ -n $systemd_pid && $(cat "/proc/$systemd_pid/comm" 2>/dev/null) == systemd ]] && kill -9 "$systemd_pid"
        for _ in $(seq 150); do kill -0 "$unshare_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    wait "$unshare_pid" 2>/dev/null
    # Deepest first (systemd's own below ours), again while a cgroup's last processes are still leaving.
    local dir left
    for _ in $(seq 50); do
        left=
        while read -r dir; do
            [[ $dir == /sys/fs/cgroup/*/timerd-deb-cycle-* || $dir == /sys/fs/cgroup/timerd-deb-cycle-* ]] || continue
            find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
            [[ -d $dir ]] && left="$left $dir"
        done < "$scratch/cgroups"
        [[ -z $left ]] && break
        sleep 0.2
    done
    [[ -n $left ]] && echo "cgroups left behind:$left"
    rm -rf "$scratch"
}
trap cleanup EXIT

for _ in $(seq 200); do
    # Space-separated, with no newline at the end.
    children=($(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null))
    if [[ ${#children[@]} -eq 1 && ${children[0]} -gt 1 && $(cat "/proc/${children[0]}/comm" 2>/dev/null) == systemd ]]; then
        systemd_pid=${children[0]}
        break
    fi
    sleep 0.1
done
if [[ -z $systemd_pid ]]; then fail "the private systemd starts" "$(cat "$scratch/console.log")"; finish; fi
inside() { timeout 60 nsenter -t "$systemd_pid" -m -p "$@"; }
state=
for _ in $(seq 300); do
    state=$(inside systemctl is-system-running 2>/dev/null)
    [[ $state == running || $state == degraded ]] && break
    sleep 0.1
done
if [[ $state == running ]]; then pass "the private systemd is running"; else fail "the private systemd is running" "$state"; finish; fi

# A container image's /usr/sbin/policy-rc.d (exit 101) forbids maintainer scripts to start services; a
# host has none. Removed in the overlay only.
inside rm -f /usr/sbin/policy-rc.d

# Install: enabled and started by its maintainer scripts.
if output=$(inside env DEBIAN_FRONTEND=noninteractive dpkg -i "$scratch/timerd.deb" 2>&1); then pass "dpkg -i"; else fail "dpkg -i" "$output"; fi
for unit in timerd.socket timerd.service; do
    state=$(inside systemctl is-enabled "$unit" 2>&1)
    if [[ $state == enabled ]]; then pass "$unit is enabled"; else fail "$unit is enabled" "$state"; fi
done
active=
for _ in $(seq 100); do
    active=$(inside systemctl is-active timerd.service 2>&1)
    [[ $active == active ]] && break
    sleep 0.1
done
if [[ $active == active ]]; then pass "timerd.service is active"; else fail "timerd.service is active" "$active; $(inside journalctl -u timerd --no-pager 2>&1 | tail -20)"; fi
reply=$(inside /usr/bin/timerctl ping 2>&1)
if [[ $reply == pong ]]; then pass "timerctl ping answers pong"; else fail "timerctl ping answers pong" "$reply"; fi
if inside getent group timerd >/dev/null; then pass "the group timerd exists"; else fail "the group timerd exists"; fi
group=$(inside stat -c %G /run/timerd/timerd.sock 2>&1)
if [[ $group == timerd ]]; then pass "the socket belongs to the group timerd"; else fail "the socket belongs to the group timerd" "$group"; fi
inside /usr/bin/timerctl add kept --every 1h --command true >/dev/null 2>&1
if inside test -d /var/lib/timerd; then pass "/var/lib/timerd holds the state"; else fail "/var/lib/timerd holds the state"; fi

# Remove: stopped, the binaries gone, the config and the state kept.
if output=$(inside dpkg -r timerd 2>&1); then pass "dpkg -r"; else fail "dpkg -r" "$output"; fi
state=$(inside systemctl is-active timerd.service 2>&1)
if [[ $state != active ]]; then pass "timerd is stopped"; else fail "timerd is stopped" "$state"; fi
if ! inside test -e /usr/bin/timerd; then pass "/usr/bin/timerd is gone"; else fail "/usr/bin/timerd is gone"; fi
if inside test -f /etc/timerd/timerd.conf; then pass "remove keeps the config"; else fail "remove keeps the config"; fi
if inside test -d /var/lib/timerd; then pass "remove keeps /var/lib/timerd"; else fail "remove keeps /var/lib/timerd"; fi

# Purge: the config and the state go.
if output=$(inside dpkg -P timerd 2>&1); then pass "dpkg -P"; else fail "dpkg -P" "$output"; fi
if ! inside test -e /etc/timerd/timerd.conf; then pass "purge removes the config"; else fail "purge removes the config"; fi
if ! inside test -e /var/lib/timerd; then pass "purge removes /var/lib/timerd"; else fail "purge removes /var/lib/timerd"; fi
state=$(inside dpkg-query -W -f='${Status}' timerd 2>&1)
if [[ $state != *installed* || $state == *not-installed* ]]; then pass "dpkg no longer knows timerd"; else fail "dpkg no longer knows timerd" "$state"; fi

# The host: untouched.
if [[ $(md5sum /var/lib/dpkg/status) == "$host_status" ]]; then pass "the host's dpkg database is untouched"; else fail "the host's dpkg database is untouched"; fi
if [[ ! -e /usr/bin/timerd && ! -e /lib/systemd/system/timerd.service ]]; then pass "the host's /usr is untouched"; else fail "the host's /usr is untouched"; fi
if [[ $(getent group timerd >/dev/null && echo yes || echo no) == "$host_had_group" ]]; then pass "the host's groups are untouched"; else fail "the host's groups are untouched"; fi

finish
