# timerd — build, run and test. `make run` and `make test` work on a fresh Debian machine: they install the
# missing system packages first (as root, or through sudo).

SWIFT        ?= swift
APT_PACKAGES := libsystemd-dev pkg-config
# lld instead of gold: gold warns about mktemp inside the static Foundation library we do not call.
RELEASE_FLAGS := -c release --static-swift-stdlib -Xswiftc -use-ld=lld
RUN_DIR      := $(CURDIR)/run
SOCKET       := $(RUN_DIR)/timerd.sock
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test check-config clean help

all: build

help:
	@echo "make run           install missing packages, build release binaries, run timerd on config/timerd.conf"
	@echo "make test          install missing packages, then build and run every test"
	@echo "make build         release binaries in .build/release/ (timerd, timerctl)"
	@echo "make check-config  validate config/timerd.conf"
	@echo "make clean         remove build products and the run/ directory"

# Install only what is missing; `apt-get update` only when something is.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing missing packages:$$missing"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install the Swift 6 toolchain (swift.org) and put it on PATH"; exit 1; }

build: deps
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
	@exec .build/release/timerd --config config/timerd.conf --socket $(SOCKET)

check-config: build
	.build/release/timerd --check-config --config config/timerd.conf

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

clean:
	rm -rf .build $(RUN_DIR)
