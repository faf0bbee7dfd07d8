#!/bin/sh
# Makes the root file system of Cove's container image in DIR (once: a
# finished one is kept): Debian bookworm from Debian's archive with what
# E2B's base template has (python3, node and npm, git, curl, gcc and make),
# since a node running in a pod gives the host's template the image's /usr,
# and debootstrap, with which a node builds E2B's base (--base=debian).
# Needs root and debootstrap (installed when missing). MIRROR overrides the
# archive.
set -eu
dir=${1:?usage: image-rootfs.sh DIR}
mirror=${MIRROR:-http://deb.debian.org/debian}
packages=python3,python-is-python3,nodejs,git,curl,ca-certificates,procps,iproute2,less,ncurses-bin,build-essential,debootstrap
# A root made with another package list is made again.
[ "$(cat "$dir/.cove-rootfs" 2>/dev/null)" = "$packages" ] && exit 0
command -v debootstrap >/dev/null || { apt-get update && apt-get install -y debootstrap; }
new="$dir.new"
if [ -e "$new" ]; then
	# A run cut short: what it mounted went with its namespace.
	rm -rf --one-file-system "$new"
fi
mkdir -p "$(dirname "$dir")"
unshare -m debootstrap --variant=minbase \
	--include="$packages" \
	bookworm "$new" "$mirror"
# npm through apt: debootstrap's own configuration pass fails on it.
unshare -m sh -c "mount -t proc proc '$new/proc' && chroot '$new' sh -c \
	'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm && apt-get clean && rm -rf /var/lib/apt/lists/*'"
echo "$packages" >"$new/.cove-rootfs"
if [ -e "$dir" ]; then
	rm -rf --one-file-system "$dir"
fi
mv "$new" "$dir"
