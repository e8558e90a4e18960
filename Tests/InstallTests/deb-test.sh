#!/usr/bin/env bash
# Checks the Debian package `make deb` built (dist/timerd_VERSION_ARCH.deb): its control fields, every
# file it installs and its mode, the conffile, the maintainer scripts (the timerd group, the units
# enabled and started through deb-systemd-helper, /var/lib/timerd removed on purge only), stripped
# binaries, and lintian without errors or warnings (those it may give, and why, are in
# debian/README.source and debian/timerd.lintian-overrides).
#
# Builds nothing (`make test-deb` runs `make deb` first); installs nothing: it reads the package with
# dpkg-deb in a temporary directory of its own.
#
# Last line: "N passed, M failed"; the exit status is 1 if anything failed.

set -u
cd "$(dirname "$0")/../.." || exit 2
version=$(head -n 1 debian/changelog | cut -d'(' -f2 | cut -d')' -f1)
arch=$(dpkg --print-architecture)
deb=dist/timerd_${version}_${arch}.deb

source Tests/InstallTests/checks.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/timerd-deb-test.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# expect DESCRIPTION ACTUAL EXPECTED
expect() { if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1" "expected: $3"$'\n'"got:      $2"; fi; }
# contains DESCRIPTION TEXT NEEDLE
contains() { if [[ $2 == *"$3"* ]]; then pass "$1"; else fail "$1" "no '$3' in:"$'\n'"$2"; fi; }

if [[ ! -f $deb ]]; then
    fail "$deb exists (run make deb)"
    tally
    exit 1
fi

field() { dpkg-deb -f "$deb" "$1"; }
expect "Package" "$(field Package)" timerd
expect "Version" "$(field Version)" "$version"
expect "Architecture" "$(field Architecture)" "$arch"
expect "Section" "$(field Section)" admin
# Depends from dpkg-shlibdeps: the libraries the binaries link (libsqlite3 among them), not libcurl
# or libsystemd, which timerd loads when it needs them (Recommends).
depends=$(field Depends)
contains "Depends has libc6 (dpkg-shlibdeps)" "$depends" "libc6 (>= "
contains "Depends has libsqlite3-0" "$depends" "libsqlite3-0"
contains "Depends has passwd (groupadd in postinst)" "$depends" "passwd"
if [[ $depends == *curl* || $depends == *libsystemd* ]]; then fail "Depends leaves out libcurl and libsystemd" "$depends"; else pass "Depends leaves out libcurl and libsystemd"; fi
expect "Recommends" "$(field Recommends)" "libcurl4, libsystemd0"

# Every file, with its mode (directories left out).
listing=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $1, $6}' | sort -k2)
expected="-rw-r--r-- ./etc/timerd/timerd.conf
-rw-r--r-- ./lib/systemd/system/timerd.service
-rw-r--r-- ./lib/systemd/system/timerd.socket
-rwxr-xr-x ./usr/bin/timerctl
-rwxr-xr-x ./usr/bin/timerd
-rw-r--r-- ./usr/share/bash-completion/completions/timerctl"
for doc in README.md $(cd docs && ls *.md); do
    expected+=$'\n'"-rw-r--r-- ./usr/share/doc/timerd/$doc"
done
expected+=$'\n'"-rw-r--r-- ./usr/share/doc/timerd/changelog.Debian.gz"$'\n'"-rw-r--r-- ./usr/share/doc/timerd/copyright"
expected+=$'\n'"-rw-r--r-- ./usr/share/lintian/overrides/timerd"
expected+=$'\n'"-rw-r--r-- ./usr/share/man/man1/timerctl.1.gz"$'\n'"-rw-r--r-- ./usr/share/man/man5/timerd.conf.5.gz"$'\n'"-rw-r--r-- ./usr/share/man/man8/timerd.8.gz"
# dh_compress compresses the docs above a size: compared without their .gz.
normalise() { sed -E 's|(/usr/share/doc/timerd/[A-Za-z-]+\.md)\.gz$|\1|' | sort -k2; }
expect "files and modes" "$(normalise <<<"$listing")" "$(normalise <<<"$expected")"
expect "owned by root" "$(dpkg-deb -c "$deb" | awk '{print $2}' | sort -u)" "root/root"

dpkg-deb -x "$deb" "$tmp/root"
dpkg-deb -e "$deb" "$tmp/control"
expect "conffiles" "$(cat "$tmp/control/conffiles")" "/etc/timerd/timerd.conf"
expect "the config is the default one" "$(cat "$tmp/root/etc/timerd/timerd.conf")" "$(cat config/timerd-default.conf)"
contains "ExecStart is /usr/bin/timerd" "$(cat "$tmp/root/lib/systemd/system/timerd.service")" "ExecStart=/usr/bin/timerd --config /etc/timerd/timerd.conf"
for binary in timerd timerctl; do
    if readelf -S "$tmp/root/usr/bin/$binary" | grep -q '\.symtab\|\.debug_info'; then
        fail "$binary is stripped"
    else
        pass "$binary is stripped"
    fi
done
expect "timerctl runs" "$("$tmp/root/usr/bin/timerctl" version --help >/dev/null 2>&1; echo $?)" 0

postinst=$(cat "$tmp/control/postinst")
contains "postinst creates the system group timerd" "$postinst" "groupadd --system timerd"
contains "postinst enables timerd.socket" "$postinst" "deb-systemd-helper enable 'timerd.socket'"
contains "postinst enables timerd.service" "$postinst" "deb-systemd-helper enable 'timerd.service'"
contains "postinst starts them" "$postinst" "deb-systemd-invoke \$_dh_action 'timerd.service' 'timerd.socket'"
postrm=$(cat "$tmp/control/postrm")
contains "postrm removes /var/lib/timerd on purge" "$postrm" 'if [ "$1" = purge ]; then
    rm -rf /var/lib/timerd'
contains "postrm purges the units' state" "$postrm" "deb-systemd-helper purge"
for script in postinst postrm prerm; do
    if sh -n "$tmp/control/$script" 2>/dev/null; then pass "$script is valid sh"; else fail "$script is valid sh"; fi
done

# lintian: no errors and no warnings (informational tags are listed in debian/README.source).
issues=$(lintian "$deb" 2>&1 | grep -E '^[EW]:')
if [[ -z $issues ]]; then pass "lintian: no errors or warnings"; else fail "lintian: no errors or warnings" "$issues"; fi

tally
