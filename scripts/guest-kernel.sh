#!/bin/sh
# Unpacks Debian's cloud kernel (the linux-image-cloud-amd64 package's
# current kernel) for microVM guests into /var/cache/cove-microvm: the
# package is downloaded from the machine's Debian archive and unpacked,
# never installed (the host's own kernel and boot are left alone).
# kernel/ points at the newest unpacked one. Its compressed image
# (boot/vmlinuz-*, a bzImage) is also unpacked to boot/vmlinux-*, the
# ELF QEMU starts at its PVH entry: the guest then boots without
# decompressing its kernel (about half a second less under TCG).
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

# vmlinux: the bzImage's payload (at (setup_sects + 1) * 512 + payload_offset,
# payload_length bytes, of which the last 4 are the unpacked size),
# unpacked with the tool of its compression, checked against that size.
boot=$cache/$pkg/boot
for img in "$boot"/vmlinuz-*; do
	out=$boot/vmlinux-${img##*/vmlinuz-}
	[ -e "$out" ] && continue
	[ "$(od -An -c -j 514 -N 4 "$img" | tr -d ' ')" = HdrS ] || { echo "guest-kernel: $img is not a bzImage" >&2; exit 1; }
	setup=$(od -An -tu1 -j 497 -N 1 "$img" | tr -d ' ')
	set -- $(od -An -tu4 -j 584 -N 8 "$img")
	off=$(((setup + 1) * 512 + $1)) len=$2
	size=$(od -An -tu4 -j $((off + len - 4)) -N 4 "$img" | tr -d ' ')
	case $(od -An -tx1 -j "$off" -N 4 "$img" | tr -d ' \n') in
	02214c18) tool=lz4 pkgname=lz4 ;;
	fd377a58) tool=xz pkgname=xz-utils ;;
	28b52ffd) tool=zstd pkgname=zstd ;;
	1f8b*) tool=gzip pkgname=gzip ;;
	*) echo "guest-kernel: $img: a compression this script does not know; guests boot the bzImage" >&2; continue ;;
	esac
	command -v "$tool" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkgname"
	tail -c +$((off + 1)) "$img" | head -c $((len - 4)) | "$tool" -dc > "$out.tmp"
	[ "$(stat -c %s "$out.tmp")" = "$size" ] || { rm -f "$out.tmp"; echo "guest-kernel: $img unpacked to other than $size bytes" >&2; exit 1; }
	mv "$out.tmp" "$out"
done
