#!/bin/sh
# Unpacks Debian's cloud kernel (the linux-image-cloud-amd64 package's
# current kernel) for microVM guests into /var/cache/cove-microvm: the
# package is downloaded from the machine's Debian archive and unpacked,
# never installed (the host's own kernel and boot are left alone).
# kernel/ points at the newest unpacked one.
set -eu
cache=/var/cache/cove-microvm
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$pkg" ]; then
	apt-get update -qq
	pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
fi
[ -n "$pkg" ] || { echo "guest-kernel: Debian's archive names no linux-image-cloud-amd64 kernel" >&2; exit 1; }
if [ ! -d "$cache/$pkg/boot" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf --one-file-system "$tmp"' EXIT
	(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1 || apt-get download "$pkg")
	mkdir -p "$cache"
	rm -rf --one-file-system "$cache/$pkg.tmp"
	dpkg-deb -x "$tmp"/"$pkg"_*.deb "$cache/$pkg.tmp"
	mv "$cache/$pkg.tmp" "$cache/$pkg"
fi
ln -sfn "$pkg" "$cache/kernel"
