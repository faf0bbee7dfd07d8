# Cove — build, test and benchmark. Every target installs what it needs.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/covesandbox/cove/internal/version.Version=$(VERSION)
PKGS    := ./...
# gVisor's runsc, pinned; built static (a cgo build cannot start its
# sandbox) from the Go module proxy into bin/.
RUNSC_VERSION ?= v0.0.0-20260905035102-160fafc42237

.PHONY: lint image bench-prepare all build dashboard check-dashboard test test-long test-k8s bench bench-ab bench-cluster deps tools generate check-generated run install clean runsc

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cove ./cmd/cove
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cove-sandbox ./cmd/cove-sandbox

# runsc installs gVisor's runsc in bin/ (once per version): the gvisor
# driver's sandboxes run on it; `cove server` finds it beside itself.
runsc: bin/runsc
bin/runsc: Makefile
	mkdir -p bin
	CGO_ENABLED=0 GOBIN=$(CURDIR)/bin $(GO) install gvisor.dev/gvisor/runsc@$(RUNSC_VERSION)
	touch $@

# run starts cove server on 127.0.0.1:3000 (as root; data in /var/lib/cove)
# with debootstrap for the built-in debian templates, as soon as Cove is
# built: what the gvisor and microvm drivers need (runsc, QEMU, the guests'
# kernel), scripts/prepare-drivers.sh prepares while it serves, and they
# join when it is done. The first start prints an API key and the
# variables to export. ARGS passes flags to cove server:
#   make run ARGS='--data-dir /srv/cove --metrics-listen 127.0.0.1:9090'
ARGS ?=
run: build
	./scripts/deps.sh run
	./bin/cove server $(ARGS)
run: export COVE_PREPARE_DRIVERS = $(CURDIR)/scripts/prepare-drivers.sh

# install puts cove, cove-sandbox and runsc in $(PREFIX)/bin (cove finds
# the other two beside itself).
PREFIX ?= /usr/local
install: build runsc
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/cove bin/cove-sandbox bin/runsc $(DESTDIR)$(PREFIX)/bin/

# No server a test or benchmark starts builds the built-in Debian templates
# in the background: tests talk to no archive (each test's server says so
# itself too; this covers any it misses).
export COVE_PREPARE_TEMPLATES = false
run: export COVE_PREPARE_TEMPLATES = true
# Nor does base become the debian recipe: tests and benchmarks pass
# --base=debian where they mean it (with the tests' own archive).
export COVE_BASE = host
run: export COVE_BASE = debian

# bench-prepare times a fresh server's preparation of code-interpreter-v1
# (from Debian's archive: not part of make bench).
bench-prepare: build
	./scripts/bench-prepare.sh

# image writes Cove's container image, the one deploy/helm/cove runs, to
# bin/cove-image as an OCI layout, without a container daemon: Debian from
# its archive (made once in IMAGE_ROOTFS) with cove, cove-sandbox and runsc
# in /usr/local/bin. docs/DEPLOY.md says how to push it.
IMAGE_ROOTFS ?= /var/cache/cove-image/rootfs
image: build runsc
	./scripts/image-rootfs.sh $(IMAGE_ROOTFS)
	if [ -e bin/cove-image ]; then rm -rf --one-file-system bin/cove-image; fi
	$(GO) run ./deploy/image -rootfs $(IMAGE_ROOTFS) -bin bin -o bin/cove-image -tag $(VERSION)

# deps installs what the tests need on a fresh Debian/Ubuntu machine.
deps:
	./scripts/deps.sh

test: deps build runsc check-dashboard check-generated lint
	CGO_ENABLED=1 $(GO) vet $(PKGS)
	cd sdk/go && $(GO) vet ./...
	# The isolation tests measure CPU shares: they run first, alone, one
	# driver's package at a time.
	$(GO) test -race -count=1 -p 1 -timeout 10m ./internal/isolation/...
	# The two longest packages first (go test starts them in the order
	# given), so that the others fill the second CPU beside them.
	$(GO) test -race -count=1 -timeout 20m -skip '^TestDebianRecipe' ./test/compat ./internal/server $$($(GO) list ./... | grep -v -e '/internal/isolation$$' -e /internal/isolation/ -e /test/security -e '/test/compat$$' -e '/internal/server$$')
	# A recipe built end to end (debootstrap, apt-get, dpkg on every CPU),
	# by one server and by a cluster: alone, not beside tests that time
	# what they wait for.
	$(GO) test -race -count=1 -timeout 15m -run '^TestDebianRecipe' ./test/cli/
	# The hostile suite measures a neighbour under attack: alone too.
	$(GO) test -race -count=1 -timeout 20m ./test/security/
	cd sdk/go && $(GO) test -race -count=1 -timeout 10m ./...

# dashboard copies the dashboard's browser packages, pinned by
# internal/dashboard/web/package-lock.json, into the files the binary
# embeds (committed: building cove needs no npm); check-dashboard proves
# the committed copies are what the lockfile gives.
XTERM = internal/dashboard/web/node_modules/@xterm/xterm
dashboard:
	cd internal/dashboard/web && npm ci --ignore-scripts --no-audit --no-fund
	cp $(XTERM)/lib/xterm.mjs $(XTERM)/css/xterm.css internal/dashboard/web/vendor/
	cp $(XTERM)/LICENSE internal/dashboard/web/vendor/xterm.LICENSE

check-dashboard:
	cd internal/dashboard/web && npm ci --ignore-scripts --no-audit --no-fund
	cmp $(XTERM)/lib/xterm.mjs internal/dashboard/web/vendor/xterm.mjs
	cmp $(XTERM)/css/xterm.css internal/dashboard/web/vendor/xterm.css
	cmp $(XTERM)/LICENSE internal/dashboard/web/vendor/xterm.LICENSE

test-long: deps build runsc
	COVE_LONG=1 $(GO) test -count=1 -timeout 80m $(PKGS)

# The Helm chart and the Terraform module against a real kube-apiserver and
# etcd on loopback (scripts/test-k8s.sh; its tools are built once per
# version into /var/cache/cove-k8s).
test-k8s:
	./scripts/test-k8s.sh

bench: deps build runsc
	./scripts/bench.sh

# Two builds on the hot path, their creates interleaved:
# make bench-ab OLD=/path/to/old/bin NEW=bin
bench-ab: build
	./scripts/bench-ab.sh old=$(OLD) new=$(NEW)

# A cluster (PostgreSQL, three nodes, two API replicas) beside cove server.
bench-cluster: deps build runsc
	./scripts/bench-cluster.sh

tools:
	./scripts/deps.sh tools

generate: tools
	./api/generate.sh

# lint checks the imports' grouping (goimports -local, generated code
# aside), runs staticcheck, both pinned, and builds the control plane and
# the node contract for macOS (nothing of Linux in them).
GOIMPORTS   = golang.org/x/tools/cmd/goimports@v0.52.0
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out=$$($(GO) run $(GOIMPORTS) -local github.com/covesandbox/cove -l $$(git ls-files '*.go' | grep -v -e '\.pb\.go$$' -e '\.connect\.go$$')); \
	if [ -n "$$out" ]; then echo "imports not as goimports -local github.com/covesandbox/cove -w groups them:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	cd sdk/go && $(GO) run $(STATICCHECK) ./...
	@# The control plane and the node contract are free of Linux.
	GOOS=darwin $(GO) build ./internal/controlplane/... ./internal/proxy ./internal/dashboard ./internal/sandboxes

# check-generated regenerates the protobuf code and fails when it differs
# from what is committed (or is not committed at all).
GENERATED = internal/nodeapi/nodepb sdk/go/envdpb
check-generated: generate
	git diff --exit-code -- $(GENERATED)
	test -z "$$(git status --porcelain -- $(GENERATED))"

clean:
	rm -rf bin
