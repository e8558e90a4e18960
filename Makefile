# timerd — build, run and test. `make run` and `make test` work on a fresh Debian machine: they install the
# missing system packages first (as root, or through sudo).

SWIFT        ?= swift
# openssl and python3: the webhook tests' throwaway CA and HTTP(S) server. tzdata: the zones of cron
# and calendar jobs. python3-venv: the test oracles' virtual environment (croniter, from PyPI).
# libsqlite3-dev: the durable state store (state.db). etcd-server: the etcd of the cluster tests and of
# `make bench`'s cluster scenario.
# libsystemd-dev: the headers of CTimerdSystemd (timerd loads libsystemd itself only under systemd).
APT_PACKAGES := libsystemd-dev libcurl4-openssl-dev libsqlite3-dev pkg-config systemd openssl python3 python3-venv tzdata etcd-server
# The cron tests compare timerd with croniter (an independent implementation) in this venv.
ORACLE_VENV  := $(CURDIR)/.build/oracle-venv
CRONITER     := croniter==7.0.0
# `make bench` only: gnuplot draws the lateness plot, cc builds the probe the benchmarked commands run.
BENCH_PACKAGES := gnuplot-nox gcc libc6-dev
# What make test needs beyond that: valgrind (callgrind) for tools/startup-order.sh --check.
TEST_PACKAGES := valgrind
# lld instead of gold: gold warns about mktemp inside the static Foundation library we do not call.
# -z pack-relative-relocs: the ~40,000 relative relocations of the position-independent binary as a
# compact RELR table (glibc 2.36+) instead of 24-byte RELA entries the loader reads page by page at
# start: about 1 MiB less resident memory in every process (docs/performance.md, "Binary size and idle
# memory").
# Start-up code together (docs/performance.md, "Start-up code together"): every function in a section of
# its own (-function-sections; the static Swift libraries are built so), the functions that run from exec
# until timerd is idle first, in the order of tools/startup-order.txt (tools/startup-order.sh regenerates
# it; names it no longer finds are skipped silently), and the compiler's unnamed private functions
# (.text..L*, about 13 KB, which no ordering file can name) in one place (tools/private-functions.ld):
# an idle timerd maps about 2.5 MiB less of its code.
LINK_LAYOUT  := tools/startup-order.txt tools/private-functions.ld
RELEASE_FLAGS := -c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
	-Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections \
	-Xlinker --symbol-ordering-file=$(CURDIR)/tools/startup-order.txt -Xlinker --no-warn-symbol-ordering \
	-Xlinker --script=$(CURDIR)/tools/private-functions.ld
RUN_DIR      := $(CURDIR)/run
SOCKET       := $(RUN_DIR)/timerd.sock
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# `make install` layout. DESTDIR is prepended to every path (staged installs, packaging); PREFIX is
# what the installed files refer to (the unit's ExecStart). See docs/install.md.
PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
DOCDIR       ?= $(PREFIX)/share/doc/timerd
BASHCOMPDIR  ?= $(PREFIX)/share/bash-completion/completions
# systemd's unit search path includes /usr/local/lib/systemd/system and /usr/lib/systemd/system
# (`systemd-analyze unit-paths`), so units go under the prefix for those two; for any other prefix
# (systemd would not look there) into /etc/systemd/system.
SYSTEMDUNITDIR ?= $(if $(filter /usr /usr/local,$(patsubst %/,%,$(PREFIX))),$(PREFIX)/lib/systemd/system,/etc/systemd/system)
# Fixed, not under PREFIX: timerd.service and timerd's built-in default read /etc/timerd/timerd.conf.
CONFDIR      := /etc/timerd
INSTALL      ?= install
DOCS         := README.md $(sort $(wildcard docs/*.md))

.PHONY: all deps test-deps oracle-deps bench-deps deb-deps release-layout build run test test-tsan test-asan test-install test-deb bench bench-state fuzz check-config install install-files uninstall deb clean help

all: build

help:
	@echo "make run           install missing packages, build release binaries, run timerd on config/timerd.conf"
	@echo "make test          install missing packages, then build and run every test; the end-to-end"
	@echo "                   tests start the release timerd and timerctl of make build (.build/release);"
	@echo "                   checks that tools/startup-order.txt is current (tools/startup-order.sh)"
	@echo "make test-tsan     every test under ThreadSanitizer, built in .build/tsan: the tests start that"
	@echo "                   instrumented timerd and timerctl, and any report fails the run (about 6 min)"
	@echo "make test-asan     the same under AddressSanitizer + LeakSanitizer, built in .build/asan (about"
	@echo "                   7 min); suppressions, none of them for timerd's code, and why: sanitizers/*.supp"
	@echo "make build         release binaries in .build/release/ (timerd, timerctl)"
	@echo "make check-config  validate config/timerd.conf"
	@echo "make install       build, then install binaries, systemd units, man pages, completion, docs and"
	@echo "                   /etc/timerd/timerd.conf (never overwritten); PREFIX=/usr/local DESTDIR="
	@echo "make uninstall     remove what install put there, except the config in /etc/timerd"
	@echo "make test-install  build, then check install/uninstall into a temporary DESTDIR"
	@echo "make deb           build dist/timerd_VERSION_ARCH.deb (debian/, dpkg-buildpackage) and lintian it"
	@echo "make test-deb      make deb, then check the package's fields, files and scripts"
	@echo "make bench         benchmarks (about 20 minutes): lateness vs systemd timers, 100,000 jobs,"
	@echo "                   runs/s, idle cost, cluster fires/s on etcd; report and plot in bench/results/"
	@echo "                   (docs/performance.md)"
	@echo "make bench-state   durability: cost per durable ADD, lateness while writing, kill -9 loop"
	@echo "make fuzz          libFuzzer: each harness (protocol config duration calendar core) for"
	@echo "                   FUZZ_SECONDS (default 600) in turn; FUZZ_TARGETS=protocol runs some; crashes"
	@echo "                   in .build/fuzz/<name>/ (fuzz/README.md)"
	@echo "make clean         remove build products and the run/ directory"

# Install only what is missing; `apt-get update` only when something is.
define apt_install
	@missing=""; \
	for p in $(1); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing missing packages:$$missing"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(APT_PACKAGES))
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install the Swift 6 toolchain (swift.org) and put it on PATH"; exit 1; }

# A venv of its own, so nothing is installed into the system's Python.
oracle-deps: deps
	@$(ORACLE_VENV)/bin/python3 -c 'import croniter' 2>/dev/null || { \
		echo "Installing the test oracle $(CRONITER) into $(ORACLE_VENV)"; \
		python3 -m venv $(ORACLE_VENV) && $(ORACLE_VENV)/bin/pip install --quiet --disable-pip-version-check $(CRONITER); }

bench-deps: deps
	$(call apt_install,$(BENCH_PACKAGES))

# SwiftPM notices neither a change of RELEASE_FLAGS (objects compiled before -function-sections would be
# linked as they are) nor one of the files the link reads (LINK_LAYOUT): after the first the release
# build starts afresh, after the second its programs are linked again.
release-layout:
	@bin=$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path) && [ -n "$$bin" ] || exit 1; \
	if [ "$$(cat .build/release-flags 2>/dev/null)" != '$(RELEASE_FLAGS)' ]; then rm -rf "$$bin"; fi; \
	for program in timerd timerctl timerd-bench; do \
		for input in $(LINK_LAYOUT); do if [ "$$input" -nt "$$bin/$$program" ]; then rm -f "$$bin/$$program"; fi; done; \
	done; \
	mkdir -p .build && echo '$(RELEASE_FLAGS)' > .build/release-flags

build: deps release-layout
	$(SWIFT) build $(RELEASE_FLAGS) --product timerd
	$(SWIFT) build $(RELEASE_FLAGS) --product timerctl

run: build
	@mkdir -p $(RUN_DIR)
	@echo
	@echo "timerd is starting in the foreground on config/timerd.conf (Ctrl-C stops it)."
	@echo "In another terminal:"
	@echo "    export TIMERD_SOCKET=$(SOCKET)"
	@echo "    $(CURDIR)/.build/release/timerctl list"
	@echo
	@exec .build/release/timerd --config config/timerd.conf --socket $(SOCKET) --state-dir $(RUN_DIR)/state

check-config: build
	.build/release/timerd --check-config --config config/timerd.conf

# The end-to-end tests (IntegrationTests, SystemdTests) start the release timerd and timerctl that `make
# build` puts in .build/release (what users get): TIMERD_TEST_BIN_DIR names that directory. Without it,
# as under plain `swift test`, they start the debug ones next to the test bundle; with it, a binary missing
# there fails every test that needs it (never a silent fall-back). timerd-test-helper, which runs what a
# test must not do in the shared test process, always comes from the test build. See
# Tests/TestSupport/TestBinaries.swift.
test-deps: deps
	$(call apt_install,$(TEST_PACKAGES))

test: test-deps oracle-deps build
	tools/startup-order.sh --check
	$(SWIFT) build --build-tests
	TIMERD_TEST_BIN_DIR=$(CURDIR)/.build/release TIMERD_ORACLE_PYTHON=$(ORACLE_VENV)/bin/python3 $(SWIFT) test --skip-build
	$(MAKE) test-install
	$(MAKE) test-deb

# The whole suite under ThreadSanitizer / AddressSanitizer (+ LeakSanitizer): tests, timerd and timerctl
# built in a scratch path of their own, so the normal build is left alone. The end-to-end tests start
# timerd and timerctl from the directory of the test bundle, i.e. the instrumented ones of that build
# (checked below; TIMERD_TEST_BIN_DIR, which would point them elsewhere, is removed from their environment). halt_on_error: a report (a leak at exit too) makes that process exit with status 66;
# the harness also fails the test whose daemon or timerctl printed one (their stderr), SystemdTests
# look in the private systemd's journal, and a report in the test process fails swift test's exit
# status. Each suppression, and why it is not timerd's bug, is in sanitizers/*.supp.
# $(1): thread or address; $(2): the scratch path; $(3): a symbol only an instrumented binary has.
define sanitizer_test
	$(SWIFT) build --build-tests --sanitize=$(1) --scratch-path $(2)
	@for binary in timerd timerctl; do \
		grep -q $(3) $(2)/debug/$$binary || { echo "$(2)/debug/$$binary is not built with --sanitize=$(1)"; exit 1; }; \
	done
	env -u TIMERD_TEST_BIN_DIR TIMERD_ORACLE_PYTHON=$(ORACLE_VENV)/bin/python3 $(SWIFT) test --skip-build --sanitize=$(1) --scratch-path $(2)
endef

test-tsan: export TSAN_OPTIONS := halt_on_error=1:exitcode=66:atexit_sleep_ms=0:second_deadlock_stack=1:suppressions=$(CURDIR)/sanitizers/tsan.supp
test-tsan: deps oracle-deps
	$(call sanitizer_test,thread,.build/tsan,__tsan_init)

# SWIFT_BACKTRACE=enable=no: Swift's crash handler would otherwise get in the way of ASan's report.
test-asan: export ASAN_OPTIONS := halt_on_error=1:exitcode=66:detect_leaks=1:suppressions=$(CURDIR)/sanitizers/asan.supp
test-asan: export LSAN_OPTIONS := suppressions=$(CURDIR)/sanitizers/lsan.supp
test-asan: export SWIFT_BACKTRACE := enable=no
test-asan: deps oracle-deps
	$(call sanitizer_test,address,.build/asan,__asan_init)

# Not part of `make test`: minutes long, and its numbers depend on the machine. See docs/performance.md.
bench: bench-deps build
	$(SWIFT) build $(RELEASE_FLAGS) --product timerd-bench
	bash bench/run.sh

# Durability: the cost of an ADD made durable (disk vs tmpfs), timer lateness while ADDs are written, and
# kill -9 in a loop (BENCH_KILL_CYCLES, default 200), and as root a third as many on a nearly full tmpfs.
# About 20 minutes; see docs/performance.md.
bench-state: build
	python3 bench/durability.py $(CURDIR)/.build/release/timerd $(CURDIR)/bench/results/state $${BENCH_KILL_CYCLES:-200}

# libFuzzer, one harness per parser (fuzz/README.md): protocol, config, duration, calendar and core (cron,
# RFC 3339, TZ rules, TZif). Built outside SwiftPM: each library module once, instrumented, as one object
# (.build/fuzz/obj), then each harness (fuzz/<name>.swift + fuzz/support.swift) linked with libFuzzer's
# main. Each runs FUZZ_SECONDS (default 600), one after another; FUZZ_TARGETS picks some. New inputs go
# to .build/fuzz/<name>/corpus (seeded from fuzz/corpus/<name>), crashes and inputs slower than
# FUZZ_TIMEOUT seconds to .build/fuzz/<name>/crash-* or timeout-*; the target fails if any harness did.
# Inputs slower than 1 s are kept as slow-unit-* and listed: the timeout is wall-clock time, and a niced
# fuzzer on a busy machine stalls for longer than that, so re-run those files alone to see which are slow.
FUZZ_SECONDS ?= 600
FUZZ_TIMEOUT ?= 10
FUZZ_HARNESSES := protocol config duration calendar core
FUZZ_TARGETS ?= $(FUZZ_HARNESSES)
FUZZ_DIR     := .build/fuzz
FUZZ_SWIFTC  := swiftc -O -wmo -sanitize=fuzzer,address -parse-as-library -package-name timerd \
	-warnings-as-errors -I $(FUZZ_DIR)/obj
# The library modules each harness links, dependents first.
FUZZ_MODULES_protocol := TimerdProtocol TimerdCore
FUZZ_MODULES_config   := TimerdConfig TimerdProtocol TimerdCore
FUZZ_MODULES_duration := TimerdCore
FUZZ_MODULES_calendar := TimerdCore
FUZZ_MODULES_core     := TimerdCore
# More libFuzzer flags per harness. Config files need length: libFuzzer raises its input length limit
# slowly and reached only 265 bytes in 10 minutes of the config harness; allow 4 KB from the start.
FUZZ_FLAGS_config     := -len_control=0 -max_len=4096

ifneq ($(filter fuzz,$(MAKECMDGOALS)),)
ifneq ($(filter-out $(FUZZ_HARNESSES),$(FUZZ_TARGETS)),)
$(error FUZZ_TARGETS: no harness $(filter-out $(FUZZ_HARNESSES),$(FUZZ_TARGETS)) (harnesses: $(FUZZ_HARNESSES)))
endif
endif

fuzz: deps $(foreach t,$(FUZZ_TARGETS),$(FUZZ_DIR)/$(t)/fuzzer)
	@failed=""; $(foreach t,$(FUZZ_HARNESSES),flags_$(t)="$(FUZZ_FLAGS_$(t))";) \
	for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/$$t/corpus; \
		eval "flags=\$$flags_$$t"; \
		echo "== fuzz $$t: $(FUZZ_SECONDS) s, corpus $(FUZZ_DIR)/$$t/corpus + fuzz/corpus/$$t $$flags"; \
		{ SWIFT_BACKTRACE=enable=no $(FUZZ_DIR)/$$t/fuzzer -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) $$flags \
			-report_slow_units=1 -artifact_prefix=$(FUZZ_DIR)/$$t/ -print_final_stats=1 $(FUZZ_DIR)/$$t/corpus fuzz/corpus/$$t; \
			echo $$? > $(FUZZ_DIR)/$$t/status; } 2>&1 | tee $(FUZZ_DIR)/$$t/log; \
		[ "$$(cat $(FUZZ_DIR)/$$t/status)" = 0 ] || failed="$$failed $$t"; \
	done; \
	echo; echo "harness   seconds  executions  exec/s  coverage  corpus  slowest  result"; \
	for t in $(FUZZ_TARGETS); do \
		log=$(FUZZ_DIR)/$$t/log; \
		stat() { sed -n "s/^stat::$$1: *//p" $$log | tail -n 1; }; \
		last=$$(grep -E '^#[0-9]+' $$log | tail -n 1); \
		cov=$$(echo "$$last" | sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/\1\/\2/p'); \
		corp=$$(echo "$$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p'); \
		result=ok; [ "$$(cat $(FUZZ_DIR)/$$t/status)" = 0 ] || result="FAILED (see $$log)"; \
		secs=$$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' $$log | tail -n 1); \
		printf '%-9s %7s %11s %7s %9s %7s %6ss  %s\n' $$t "$${secs:--}" "$$(stat number_of_executed_units)" \
			"$$(stat average_exec_per_sec)" "$$cov" "$$corp" "$$(stat slowest_unit_time_sec)" "$$result"; \
	done; \
	ls $(foreach t,$(FUZZ_TARGETS),$(FUZZ_DIR)/$(t)/slow-unit-*) 2>/dev/null | sed 's/^/slower than 1 s (re-run alone): /'; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed (inputs in $(FUZZ_DIR)/<name>/crash-*, timeout-*, oom-*)"; exit 1; fi

$(FUZZ_DIR)/obj/TimerdCore.o: $(wildcard Sources/TimerdCore/*.swift)
$(FUZZ_DIR)/obj/TimerdProtocol.o: $(wildcard Sources/TimerdProtocol/*.swift) $(FUZZ_DIR)/obj/TimerdCore.o
$(FUZZ_DIR)/obj/TimerdConfig.o: $(wildcard Sources/TimerdConfig/*.swift) $(FUZZ_DIR)/obj/TimerdProtocol.o $(FUZZ_DIR)/obj/TimerdCore.o
# touch: swiftc leaves an output whose content did not change as it was, which would leave it older than
# what it was rebuilt for, and make would not rebuild the modules that depend on it.
$(FUZZ_DIR)/obj/%.o:
	@mkdir -p $(@D)
	$(FUZZ_SWIFTC) -module-name $* -emit-module -emit-module-path $(@D)/$*.swiftmodule -c Sources/$*/*.swift -o $@
	@touch $@

.SECONDEXPANSION:
$(FUZZ_DIR)/%/fuzzer: fuzz/%.swift fuzz/support.swift $$(addprefix $(FUZZ_DIR)/obj/,$$(addsuffix .o,$$(FUZZ_MODULES_$$*)))
	@mkdir -p $(@D)
	$(FUZZ_SWIFTC) -module-name Fuzz_$* fuzz/$*.swift fuzz/support.swift \
		$(addprefix $(FUZZ_DIR)/obj/,$(addsuffix .o,$(FUZZ_MODULES_$*))) -use-ld=lld -o $@

# `make deb`: dist/timerd_VERSION_ARCH.deb, built the Debian way (debian/, `dpkg-buildpackage -b`) from the
# release binaries of `make build`, in a staging copy (.build/deb/timerd) so that nothing is written beside
# the checkout; then lintian, which must report no errors (its warnings and why: debian/README.source).
# The Swift toolchain is a build prerequisite outside Debian's: debian/rules does not build, it installs
# what `make build` made (`make install-files`).
DEB_PACKAGES := debhelper dpkg-dev lintian
DEB_VERSION  := $(shell head -n 1 debian/changelog | cut -d'(' -f2 | cut -d')' -f1)
DEB_ARCH     := $(shell dpkg --print-architecture 2>/dev/null)
DEB_FILE     := dist/timerd_$(DEB_VERSION)_$(DEB_ARCH).deb

deb-deps: deps
	$(call apt_install,$(DEB_PACKAGES))

deb: deb-deps build
	rm -rf .build/deb && mkdir -p .build/deb/timerd/.build/release dist
	cp -r debian systemd config man completions docs README.md Makefile .build/deb/timerd/
	cp .build/release/timerd .build/release/timerctl .build/deb/timerd/.build/release/
	cd .build/deb/timerd && dpkg-buildpackage -b -us -uc
	mv .build/deb/timerd_$(DEB_VERSION)_$(DEB_ARCH).deb $(DEB_FILE)
	lintian --fail-on error $(DEB_FILE) || { echo "lintian reports errors in $(DEB_FILE)"; exit 1; }
	@echo "Built $(DEB_FILE)"

# Builds the package, then checks its control fields, files, conffile, maintainer scripts and lintian,
# and its install → start → ping → remove → purge cycle with dpkg in a private systemd whose /usr, /etc
# and /var are overlays (the host's are never written).
test-deb: deb
	bash Tests/InstallTests/deb-test.sh
	bash Tests/InstallTests/deb-cycle-test.sh

# Installs into a temporary DESTDIR and checks files, modes, units, man pages, completion, uninstall.
test-install: build
	bash Tests/InstallTests/install-test.sh

# Never runs systemctl: DESTDIR installs happen in package builds, and enabling is the admin's call.
# Binaries are installed stripped (install -s): their symbol table and debug info are never loaded into
# memory but are half of each file; gdb reads them from the unstripped .build/release/timerd (`gdb -s`).
install: build install-files

# What `install` puts in place, from the binaries `make build` made (`make deb` runs it in its staging
# directory, which has those binaries and no Swift toolchain).
install-files:
	$(INSTALL) -d -m 755 $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 755 -s .build/release/timerd .build/release/timerctl $(DESTDIR)$(BINDIR)/
	$(INSTALL) -d -m 755 $(DESTDIR)$(SYSTEMDUNITDIR)
	@mkdir -p .build/install
	sed 's|@BINDIR@|$(BINDIR)|g' systemd/timerd.service > .build/install/timerd.service
	@if grep -n '@[A-Z_]*@' .build/install/timerd.service; then echo "unsubstituted placeholder in timerd.service" >&2; exit 1; fi
	$(INSTALL) -m 644 .build/install/timerd.service systemd/timerd.socket $(DESTDIR)$(SYSTEMDUNITDIR)/
	$(INSTALL) -d -m 755 $(DESTDIR)$(CONFDIR) $(DESTDIR)$(CONFDIR)/jobs.d
	@if [ -e $(DESTDIR)$(CONFDIR)/timerd.conf ]; then \
		echo "keeping the existing $(DESTDIR)$(CONFDIR)/timerd.conf"; \
	else \
		echo "$(INSTALL) -m 644 config/timerd-default.conf $(DESTDIR)$(CONFDIR)/timerd.conf"; \
		$(INSTALL) -m 644 config/timerd-default.conf $(DESTDIR)$(CONFDIR)/timerd.conf; \
	fi
	$(INSTALL) -d -m 755 $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 644 man/timerctl.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 man/timerd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 644 man/timerd.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -d -m 755 $(DESTDIR)$(BASHCOMPDIR)
	$(INSTALL) -m 644 completions/timerctl.bash $(DESTDIR)$(BASHCOMPDIR)/timerctl
	$(INSTALL) -d -m 755 $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	@echo
	@echo "Installed timerd into $(DESTDIR)$(PREFIX) (units in $(DESTDIR)$(SYSTEMDUNITDIR), config in $(DESTDIR)$(CONFDIR))."
	@echo "Next: edit $(CONFDIR)/timerd.conf (or add $(CONFDIR)/jobs.d/*.conf), check it with"
	@echo "'timerd --check-config', then start it:"
	@echo "    systemctl daemon-reload && systemctl enable --now timerd.socket timerd.service"

# Removes exactly what install put there, but never $(CONFDIR): like a package's conffiles, the
# config may hold the admin's edits (remove it by hand to purge).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/timerd $(DESTDIR)$(BINDIR)/timerctl
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/timerd.service $(DESTDIR)$(SYSTEMDUNITDIR)/timerd.socket
	rm -f $(DESTDIR)$(MANDIR)/man1/timerctl.1 $(DESTDIR)$(MANDIR)/man5/timerd.conf.5 $(DESTDIR)$(MANDIR)/man8/timerd.8
	rm -f $(DESTDIR)$(BASHCOMPDIR)/timerctl
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	@echo
	@echo "Kept $(DESTDIR)$(CONFDIR)/ (timerd.conf and jobs.d/): remove it by hand if you no longer need it."
	@echo "If the service was enabled, first run: systemctl disable --now timerd.socket timerd.service"
	@echo "and afterwards: systemctl daemon-reload"

clean:
	rm -rf .build $(RUN_DIR)
