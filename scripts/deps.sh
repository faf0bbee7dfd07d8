#!/bin/sh
# Installs what building and testing Cove needs on a fresh Debian/Ubuntu
# machine, and nothing when it is already there. "tools" adds the code
# generators; "run" installs only what cove server needs to serve from
# Debian (debootstrap, which builds the built-in debian templates, and
# lxcfs): what its other drivers need, scripts/prepare-drivers.sh prepares
# once it serves.
set -eu
cd "$(dirname "$0")/.."
# guest_kernel_ready: the guests' kernel is unpacked, its ELF too
# (scripts/guest-kernel.sh).
guest_kernel_ready() {
	ls /var/cache/cove-microvm/kernel/boot/vmlinux-* >/dev/null 2>&1
}
need=""
if [ "${1:-}" = run ]; then
	for pkg in debootstrap lxcfs; do
		command -v "$pkg" >/dev/null 2>&1 || need="$need $pkg"
	done
	# *.localhost (the SDK's getHost URLs) resolving to loopback for Node
	# and Python (curl and browsers resolve it themselves); NSS=no leaves
	# the host's name resolution as it is.
	if [ "${NSS:-}" != no ] && ! getent hosts cove-check.localhost >/dev/null 2>&1; then
		need="$need libnss-myhostname"
	fi
	if [ -n "$need" ]; then
		if [ "$(id -u)" != 0 ]; then echo "deps: cove server runs as root; as root this installs:$need" >&2; exit 1; fi
		apt-get update -qq
		# Say what changes on the host before it changes.
		echo "make run installs from Debian's archive:$need"
		case " $need " in *" libnss-myhostname "*)
			echo "  libnss-myhostname adds 'myhostname' to the hosts line of /etc/nsswitch.conf, so that"
			echo "  *.localhost (the SDK's getHost URLs) resolves to loopback; 'make run NSS=no' leaves it out"
			echo "  (docs/GUIDE.md, \"Reaching a sandbox's ports\", says how to reach them then)." ;;
		esac
		echo "  apt-get installs or upgrades:"
		apt-get install -s --no-install-recommends $need 2>/dev/null | sed -n 's/^Inst /    /p'
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need
	fi
	exit 0
fi
command -v go >/dev/null 2>&1 || { echo "deps: Go is not installed (https://go.dev/dl)" >&2; exit 1; }
# lxcfs: sandboxes' /proc/meminfo and friends tell their own limits.
# chromium: the dashboard's browser tests drive Debian's, headless.
# qemu-system-x86_64: microVM guests (QEMU's microvm machine); mkfs.erofs
# makes their read-only images of template layers.
# debootstrap: test/cli builds the debian recipe from the tests' own
# Debian archive (scripts/debian-archive.sh, below).
for pair in python3:python3 node:nodejs npm:npm lxcfs:lxcfs chromium:chromium qemu-system-x86_64:qemu-system-x86 mkfs.erofs:erofs-utils debootstrap:debootstrap dnsmasq:dnsmasq-base openssl:openssl; do
	cmd=${pair%%:*} pkg=${pair#*:}
	command -v "$cmd" >/dev/null 2>&1 || need="$need $pkg"
done
# The code interpreter's kernels and libraries (test/compat runs them in
# sandboxes over the host's /usr), as code-interpreter-v1 has them.
for pkg in python3-ipykernel python3-numpy python3-pandas python3-matplotlib python3-pil \
	r-cran-irkernel default-jdk-headless node-typescript; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need="$need $pkg"
done
# The desktop template's packages (template.DesktopPackages): test/compat
# runs @e2b/desktop in sandboxes over the host's /usr.
for pkg in xvfb x11-utils x11-xserver-utils xfonts-base fonts-dejavu-core xdotool scrot x11vnc novnc websockify \
	net-tools xdg-utils xfce4-session xfwm4 xfdesktop4 xfce4-panel xfce4-settings xfce4-terminal dbus-x11 libgtk-3-bin; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need="$need $pkg"
done
# A virtual environment for the official Python SDKs (test/compat/py):
# Debian's python3 makes one only with python3-venv.
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need="$need python3-venv"
# PostgreSQL's server: the store's tests start a throwaway cluster of it.
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need="$need postgresql"
# *.localhost (getHost URLs) resolving to loopback for Node and Python.
getent hosts cove-check.localhost >/dev/null 2>&1 || need="$need libnss-myhostname"
if [ "${1:-}" = tools ]; then
	command -v protoc >/dev/null 2>&1 || need="$need protobuf-compiler"
	# The well-known types (timestamp, duration) the protos import.
	[ -f /usr/include/google/protobuf/timestamp.proto ] || need="$need libprotobuf-dev"
fi
if [ -n "$need" ]; then
	if [ "$(id -u)" != 0 ]; then echo "deps: need root to install:$need" >&2; exit 1; fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need
fi
go mod download
# The tests' own Debian archive: Debian 12's index and the debian recipe's
# packages, fetched once (make test reaches no archive).
if [ "$(id -u)" = 0 ]; then
	./scripts/debian-archive.sh
fi
# The microVM guests' kernel: Debian's cloud kernel, unpacked (not
# installed) into /var/cache/cove-microvm.
if ! guest_kernel_ready; then
	if [ "$(id -u)" != 0 ]; then echo "deps: need root to unpack the guest kernel into /var/cache/cove-microvm" >&2; exit 1; fi
	./scripts/guest-kernel.sh
fi
# SeaweedFS, the S3-compatible server the object store's tests start:
# built once from the Go module proxy (its go.mod has replace directives,
# so from inside its module, not with go install), kept by version.
weed_version=v0.0.0-20261109003541-7506e5f91cd6
weed=/var/cache/cove-test/seaweedfs-$weed_version/weed
if [ ! -x "$weed" ]; then
	if [ "$(id -u)" != 0 ]; then echo "deps: need root to build SeaweedFS into $weed" >&2; exit 1; fi
	src=$(go mod download -json "github.com/seaweedfs/seaweedfs@$weed_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	mkdir -p "$(dirname "$weed")"
	echo "deps: building SeaweedFS $weed_version (once; several minutes)" >&2
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$weed.tmp" ./weed) && mv "$weed.tmp" "$weed"
fi
ln -sfn "$weed" /var/cache/cove-test/weed
# The official E2B SDKs for the compatibility suite (test/compat), and
# playwright-core, which drives Chromium in its dashboard test.
if [ ! -f test/compat/node_modules/playwright-core/package.json ]; then
	(cd test/compat && npm ci --no-audit --no-fund)
fi
# The official E2B Python SDKs and pytest, as test/compat/py/requirements.txt
# pins them, in a virtual environment of the repository's own (never the
# system's Python); made again when the pins change.
./scripts/python-venv.sh
if [ "${1:-}" = tools ]; then
	GOBIN="$(go env GOPATH)/bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	GOBIN="$(go env GOPATH)/bin" go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
fi
