#!/usr/bin/env bash
# Checks `make install` and `make uninstall` into a temporary DESTDIR: every file and its mode, the
# units (ExecStart, systemd-analyze verify), the config that is never overwritten nor removed, the
# installed binaries (static Swift runtime), the man pages, the bash completion (including job names
# from a running daemon started from the installed binary), and the unit directory for other PREFIXes.
#
# Builds nothing: run `make build` first (`make test-install` does both). make is called with
# `-o build`, so install uses the existing .build/release binaries. Runs no systemctl (a stub on
# PATH records any call) and touches nothing outside its temporary directory.
#
# Last line: "N passed, M failed"; the exit status is 1 if anything failed.

set -u
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
prefix=/usr/local
make_cmd=(${MAKE:-make} --no-print-directory -o build)

source Tests/InstallTests/checks.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/timerd-install-test.XXXXXX") || exit 2
dest=$tmp/destdir
daemon_pid=

cleanup() {
    if [[ -n $daemon_pid ]]; then
        kill "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# check DESCRIPTION COMMAND…: passes when COMMAND exits 0; shows its output when it does not.
check() {
    local description=$1 output
    shift
    if output=$("$@" 2>&1); then pass "$description"; else fail "$description" "$output"; fi
}
# mode_of FILE: octal permission bits, e.g. 755.
mode_of() { stat -c '%a' "$1"; }

# ---------------------------------------------------------------------------------------------------
echo "# install-test: DESTDIR=$dest PREFIX=$prefix"

for binary in timerd timerctl; do
    if [[ ! -x .build/release/$binary ]]; then
        fail "precondition: .build/release/$binary exists (run 'make build' first, or 'make test-install')"
        echo "$passed passed, $failed failed"
        exit 1
    fi
done

# A systemctl stub: install must not call it.
mkdir -p "$tmp/stub-bin"
cat >"$tmp/stub-bin/systemctl" <<EOF
#!/bin/sh
echo "systemctl \$*" >>"$tmp/systemctl-calls"
EOF
chmod 755 "$tmp/stub-bin/systemctl"

install_log=$tmp/install.log
if PATH=$tmp/stub-bin:$PATH "${make_cmd[@]}" install DESTDIR="$dest" PREFIX="$prefix" >"$install_log" 2>&1; then
    pass "make install DESTDIR=… PREFIX=$prefix exits 0"
else
    fail "make install DESTDIR=… PREFIX=$prefix exits 0" "$(cat "$install_log")"
fi
if [[ -e $tmp/systemctl-calls ]]; then
    fail "make install does not run systemctl" "$(cat "$tmp/systemctl-calls")"
else
    pass "make install does not run systemctl"
fi
check "make install prints the systemctl enable hint" \
    grep -q 'systemctl daemon-reload && systemctl enable --now timerd.socket timerd.service' "$install_log"

# --- Every installed file, with its mode, and nothing else. ------------------------------------
unitdir=$prefix/lib/systemd/system
declare -A expected=(
    ["$prefix/bin/timerd"]=755
    ["$prefix/bin/timerctl"]=755
    ["$unitdir/timerd.service"]=644
    ["$unitdir/timerd.socket"]=644
    ["/etc/timerd/timerd.conf"]=644
    ["$prefix/share/man/man1/timerctl.1"]=644
    ["$prefix/share/man/man5/timerd.conf.5"]=644
    ["$prefix/share/man/man8/timerd.8"]=644
    ["$prefix/share/bash-completion/completions/timerctl"]=644
    ["$prefix/share/doc/timerd/README.md"]=644
)
for doc in docs/*.md; do expected["$prefix/share/doc/timerd/${doc#docs/}"]=644; done

for path in $(printf '%s\n' "${!expected[@]}" | sort); do
    file=$dest$path
    if [[ ! -f $file ]]; then
        fail "installed $path" "missing: $file"
    elif [[ $(mode_of "$file") != "${expected[$path]}" ]]; then
        fail "installed $path with mode ${expected[$path]}" "mode is $(mode_of "$file")"
    else
        pass "installed $path (mode ${expected[$path]})"
    fi
done
unexpected=$(cd "$dest" && find . ! -type d | sed 's|^\.||' | sort | while read -r path; do
    [[ -n ${expected[$path]+set} ]] || echo "$path"
done)
if [[ -z $unexpected ]]; then pass "no other files installed"; else fail "no other files installed" "$unexpected"; fi
if [[ -d $dest/etc/timerd/jobs.d ]]; then pass "created /etc/timerd/jobs.d/"; else fail "created /etc/timerd/jobs.d/"; fi

for binary in timerd timerctl; do
    strip -o "$tmp/$binary.stripped" ".build/release/$binary"
    check "installed $binary is the release build, stripped" cmp "$tmp/$binary.stripped" "$dest$prefix/bin/$binary"
done
check "installed timerd.conf is config/timerd-default.conf (no demo jobs)" \
    cmp config/timerd-default.conf "$dest/etc/timerd/timerd.conf"
check "installed docs match the source tree" \
    cmp README.md "$dest$prefix/share/doc/timerd/README.md"

leaked=$(grep -rl -- "$dest" "$dest" 2>/dev/null)
if [[ -z $leaked ]]; then pass "no installed file mentions DESTDIR"; else fail "no installed file mentions DESTDIR" "$leaked"; fi

# --- Units. --------------------------------------------------------------------------------------
service=$dest$unitdir/timerd.service
execstart=$(grep '^ExecStart=' "$service" 2>/dev/null)
if [[ $execstart == "ExecStart=$prefix/bin/timerd --config /etc/timerd/timerd.conf" ]]; then
    pass "timerd.service ExecStart points at $prefix/bin/timerd"
else
    fail "timerd.service ExecStart points at $prefix/bin/timerd" "$execstart"
fi
if grep -n '@[A-Z_]*@' "$service" >/dev/null; then
    fail "no @PLACEHOLDER@ left in timerd.service" "$(grep -n '@[A-Z_]*@' "$service")"
else
    pass "no @PLACEHOLDER@ left in timerd.service"
fi
check "timerd.socket installed unchanged" cmp systemd/timerd.socket "$dest$unitdir/timerd.socket"
check "timerd.service differs from the source only in ExecStart" \
    diff <(grep -v '^ExecStart=' systemd/timerd.service) <(grep -v '^ExecStart=' "$service")

if command -v systemd-analyze >/dev/null; then
    # The default unit directory must be one systemd reads, so nothing else has to be edited.
    if systemd-analyze unit-paths 2>/dev/null | grep -qx "$unitdir"; then
        pass "systemd reads $unitdir (systemd-analyze unit-paths)"
    else
        fail "systemd reads $unitdir (systemd-analyze unit-paths)" "$(systemd-analyze unit-paths 2>&1)"
    fi
    # `systemd-analyze verify` checks that ExecStart's program exists. With --root=DESTDIR (systemd
    # 252) it does resolve ExecStart inside DESTDIR, but also wants a whole OS there (sysinit.target,
    # /bin/kill for ExecReload), so verify a copy whose ExecStart points into DESTDIR instead.
    # MANPATH makes its Documentation=man: check find the installed man pages.
    mkdir -p "$tmp/verify" "$tmp/verify-missing"
    sed "s|^ExecStart=$prefix/bin/|ExecStart=$dest$prefix/bin/|" "$service" >"$tmp/verify/timerd.service"
    cp "$dest$unitdir/timerd.socket" "$tmp/verify/"
    if output=$(cd "$tmp/verify" && MANPATH=$dest$prefix/share/man systemd-analyze verify \
        "$tmp/verify/timerd.socket" "$tmp/verify/timerd.service" 2>&1) && [[ -z $output ]]; then
        pass "systemd-analyze verify passes on the installed units (and finds their man pages)"
    else
        fail "systemd-analyze verify passes on the installed units (and finds their man pages)" "$output"
    fi
    # Control: the same check fails when ExecStart's program is missing.
    sed "s|^ExecStart=$prefix/bin/|ExecStart=$tmp/nonexistent/|" "$service" >"$tmp/verify-missing/timerd.service"
    cp "$dest$unitdir/timerd.socket" "$tmp/verify-missing/"
    if output=$(MANPATH=$dest$prefix/share/man systemd-analyze verify \
        "$tmp/verify-missing/timerd.socket" "$tmp/verify-missing/timerd.service" 2>&1); then
        fail "systemd-analyze verify rejects a missing ExecStart program (control)" "$output"
    else
        pass "systemd-analyze verify rejects a missing ExecStart program (control)"
    fi
else
    skip "systemd-analyze not found: unit checks skipped"
fi

# --- Config: never overwritten, valid. ------------------------------------------------------------
check "installed config passes timerd --check-config" \
    "$dest$prefix/bin/timerd" --check-config --config "$dest/etc/timerd/timerd.conf"
echo "# edited by install-test" >>"$dest/etc/timerd/timerd.conf"
edited=$(cat "$dest/etc/timerd/timerd.conf")
if "${make_cmd[@]}" install DESTDIR="$dest" PREFIX="$prefix" >"$tmp/install2.log" 2>&1; then
    pass "second make install exits 0"
else
    fail "second make install exits 0" "$(cat "$tmp/install2.log")"
fi
if [[ $(cat "$dest/etc/timerd/timerd.conf") == "$edited" ]]; then
    pass "second make install keeps the edited /etc/timerd/timerd.conf"
else
    fail "second make install keeps the edited /etc/timerd/timerd.conf" \
        "$(diff <(printf '%s\n' "$edited") "$dest/etc/timerd/timerd.conf")"
fi
check "second make install says it keeps the config" grep -q 'keeping the existing' "$tmp/install2.log"

# --- Installed binaries run, with the Swift runtime linked in. -----------------------------------
version=$("$dest$prefix/bin/timerd" --version 2>&1)
if [[ $version =~ ^timerd\ [0-9]+\.[0-9]+ ]]; then
    pass "installed timerd --version runs ($version)"
else
    fail "installed timerd --version runs" "$version"
fi
check "installed timerctl --help runs" "$dest$prefix/bin/timerctl" --help
for binary in timerd timerctl; do
    libs=$(ldd "$dest$prefix/bin/$binary" 2>&1)
    if grep -Eq 'libswift|libFoundation|libdispatch|not found' <<<"$libs"; then
        fail "$binary: static Swift runtime (ldd shows no libswift*)" "$libs"
    else
        pass "$binary: static Swift runtime (ldd shows no libswift*)"
    fi
done

# --- Man pages. -----------------------------------------------------------------------------------
pages=("$dest$prefix/share/man/man1/timerctl.1" "$dest$prefix/share/man/man5/timerd.conf.5"
    "$dest$prefix/share/man/man8/timerd.8")
if command -v man >/dev/null; then
    for page in "${pages[@]}"; do
        warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
        if [[ $? -eq 0 && -z $warnings ]]; then
            pass "man --warnings -l ${page#"$dest"} renders without warnings"
        else
            fail "man --warnings -l ${page#"$dest"} renders without warnings" "$warnings"
        fi
    done
    for topic in "1 timerctl" "5 timerd.conf" "8 timerd"; do
        found=$(MANPATH=$dest$prefix/share/man man -w $topic 2>&1)
        if [[ $found == "$dest$prefix/share/man/"* ]]; then
            pass "man finds ${topic#* }(${topic%% *}) under the installed MANPATH"
        else
            fail "man finds ${topic#* }(${topic%% *}) under the installed MANPATH" "$found"
        fi
    done
else
    skip "man not found: man page rendering not checked (apt-get install man-db groff-base)"
fi
if command -v groff >/dev/null; then
    for page in "${pages[@]}"; do
        check "groff -man -ww -z ${page#"$dest"} is clean" \
            bash -c 'out=$(groff -man -ww -z "$1" 2>&1) && [[ -z $out ]] || { echo "$out"; exit 1; }' _ "$page"
    done
else
    skip "groff not found: groff warnings not checked"
fi

# --- Bash completion. ----------------------------------------------------------------------------
completion=$dest$prefix/share/bash-completion/completions/timerctl
check "bash -n passes on the completion" bash -n "$completion"

# complete WORD…: sources the installed completion in a fresh bash, sets COMP_WORDS to the words
# (the last one is being completed), calls the function and prints COMPREPLY, one per line.
complete_words() {
    PATH=$dest$prefix/bin:$PATH bash -c '
        source "$1" || exit 1
        shift
        COMP_WORDS=("$@")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="${COMP_WORDS[*]}"
        COMP_POINT=${#COMP_LINE}
        _timerctl timerctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}"
    ' _ "$completion" "$@"
}
# expect_completion DESCRIPTION EXPECTED WORD…: COMPREPLY (joined by spaces) must equal EXPECTED.
expect_completion() {
    local description=$1 want=$2 got
    shift 2
    got=$(complete_words "$@" 2>&1 | paste -sd' ')
    if [[ $got == "$want" ]]; then pass "$description"; else fail "$description" "want: '$want'"$'\n'"got:  '$got'"; fi
}
expect_completion "completion: timerctl pa<TAB> -> pause" "pause" timerctl pa
expect_completion "completion: timerctl add x --kill-g<TAB> -> --kill-grace" "--kill-grace" timerctl add x --kill-g
expect_completion "completion: timerctl add x --kill-mode <TAB> -> modes" "control-group mixed process" \
    timerctl add x --kill-mode ""
expect_completion "completion: timerctl run x --f<TAB> -> --force" "--force" timerctl run x --f
expect_completion "completion: timerctl add x --overlap <TAB> -> policies" "skip queue allow replace" \
    timerctl add x --overlap ""
expect_completion "completion: timerctl exec --rep<TAB> -> --repeats" "--repeats" timerctl exec --rep
expect_completion "completion: timerctl add x --method <TAB> -> methods" "GET POST PUT PATCH DELETE HEAD" \
    timerctl add x --method ""
expect_completion "completion: timerctl resume j --<TAB> -> resume flags" "--socket --help --now --after" \
    timerctl resume j --
expect_completion "completion: timerctl --j<TAB> -> --json" "--json" timerctl --j
expect_completion "completion: job names, daemon unreachable -> nothing" "" \
    timerctl --socket "$tmp/no-such.sock" show ""

# Job names from a daemon started from the installed binary, on a private socket.
socket=$tmp/timerd.sock
cat >"$tmp/names.conf" <<'EOF'
[job "install-test-a"]
every = 1h
command = true

[job "install-test-b"]
in = 1h
command = true
EOF
TIMERD_SOCKET= "$dest$prefix/bin/timerd" --config "$tmp/names.conf" --socket "$socket" --state-dir "$tmp/state" 2>"$tmp/timerd.log" &
daemon_pid=$!
for _ in $(seq 50); do
    "$dest$prefix/bin/timerctl" --socket "$socket" ping >/dev/null 2>&1 && break
    sleep 0.1
done
check "installed timerd answers installed timerctl ping" "$dest$prefix/bin/timerctl" --socket "$socket" ping
expect_completion "completion: timerctl --socket S show <TAB> -> job names from the daemon" \
    "install-test-a install-test-b" timerctl --socket "$socket" show ""
expect_completion "completion: timerctl pause install-test-a <TAB> -> the other name (--socket=S)" \
    "install-test-b" timerctl --socket = "$socket" pause install-test-a ""
kill "$daemon_pid" 2>/dev/null
wait "$daemon_pid" 2>/dev/null
daemon_pid=

# --- Uninstall. ------------------------------------------------------------------------------------
if PATH=$tmp/stub-bin:$PATH "${make_cmd[@]}" uninstall DESTDIR="$dest" PREFIX="$prefix" >"$tmp/uninstall.log" 2>&1; then
    pass "make uninstall exits 0"
else
    fail "make uninstall exits 0" "$(cat "$tmp/uninstall.log")"
fi
left=$(cd "$dest" && find . ! -type d | sed 's|^\.||' | sort)
if [[ $left == "/etc/timerd/timerd.conf" ]]; then
    pass "make uninstall removes every installed file but the config"
else
    fail "make uninstall removes every installed file but the config" "left: $left"
fi
# Like a package's conffiles: the config may hold the admin's edits, so uninstall leaves it.
if [[ $(cat "$dest/etc/timerd/timerd.conf" 2>/dev/null) == "$edited" ]]; then
    pass "make uninstall keeps the (edited) /etc/timerd/timerd.conf, like dpkg conffiles"
else
    fail "make uninstall keeps the (edited) /etc/timerd/timerd.conf, like dpkg conffiles"
fi
check "make uninstall says it kept the config" grep -q 'Kept .*/etc/timerd/' "$tmp/uninstall.log"
if [[ -e $dest$prefix/share/doc/timerd ]]; then
    fail "make uninstall removes $prefix/share/doc/timerd/"
else
    pass "make uninstall removes $prefix/share/doc/timerd/"
fi
if [[ -e $tmp/systemctl-calls ]]; then
    fail "make uninstall does not run systemctl" "$(cat "$tmp/systemctl-calls")"
else
    pass "make uninstall does not run systemctl"
fi

# --- Other prefixes: where the units go, what ExecStart says. ------------------------------------
# unit_check PREFIX UNITDIR: install into a fresh DESTDIR with PREFIX; units must be in UNITDIR.
unit_check() {
    local other_prefix=$1 want_dir=$2 d=$tmp/destdir-${1//\//_}
    if ! "${make_cmd[@]}" install DESTDIR="$d" PREFIX="$other_prefix" >"$d.log" 2>&1; then
        fail "PREFIX=$other_prefix: make install exits 0" "$(cat "$d.log")"
        return
    fi
    local line
    line=$(grep '^ExecStart=' "$d$want_dir/timerd.service" 2>&1)
    if [[ -f $d$want_dir/timerd.socket && $line == "ExecStart=$other_prefix/bin/timerd --config /etc/timerd/timerd.conf" ]]; then
        pass "PREFIX=$other_prefix: units in $want_dir, ExecStart=$other_prefix/bin/timerd"
    else
        fail "PREFIX=$other_prefix: units in $want_dir, ExecStart=$other_prefix/bin/timerd" \
            "$(cd "$d" && find . -name 'timerd.s*')"$'\n'"$line"
    fi
    "${make_cmd[@]}" uninstall DESTDIR="$d" PREFIX="$other_prefix" >/dev/null 2>&1
    left=$(cd "$d" && find . ! -type d | sed 's|^\.||' | sort)
    if [[ $left == "/etc/timerd/timerd.conf" ]]; then
        pass "PREFIX=$other_prefix: make uninstall leaves only the config"
    else
        fail "PREFIX=$other_prefix: make uninstall leaves only the config" "$left"
    fi
}
unit_check /usr /usr/lib/systemd/system
unit_check /opt/timerd /etc/systemd/system

tally
