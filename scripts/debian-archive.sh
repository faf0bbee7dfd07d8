#!/bin/sh
# Captures the tests' own Debian archive (testutil.DebianArchive serves
# it on the fake internet): Debian 12's signed index, as the archive
# serves it, and every package the debian recipe installs (debootstrap's
# minbase, the packages it includes and npm's, which its build step adds),
# so that make test builds that recipe end to end and reaches no archive.
# Made once, in COVE_TEST_ARCHIVE (default /var/cache/cove-test-archive),
# again when the list below changes; needs root, debootstrap and Debian's
# archive (MIRROR, default the host's apt sources' first).
set -eu
cd "$(dirname "$0")/.."
dir=${COVE_TEST_ARCHIVE:-/var/cache/cove-test-archive}
suite=bookworm
# template.Recipes["debian"]'s packages (a test holds this list to them).
packages="python3 python-is-python3 nodejs git curl sudo ca-certificates procps iproute2 less ncurses-bin build-essential npm yarnpkg"
want=$(echo "4 $suite $packages" | sha256sum | cut -c1-16) # 3: the archive's layout
if [ -f "$dir/complete" ] && [ "$(cat "$dir/complete")" = "$want" ]; then
	exit 0
fi
mirror=${MIRROR:-}
if [ -z "$mirror" ]; then
	mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/* *$/\1/p; s/^deb \(http[^ ]*\/debian\)\/* .*/\1/p' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1)
	mirror=${mirror:-http://deb.debian.org/debian}
fi
command -v debootstrap >/dev/null || { echo "debian-archive: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/cove-debian-archive.XXXXXX)
trap 'rm -rf --one-file-system "$tmp"' EXIT
mkdir -p "$tmp/archive/pool"
# The index files debootstrap and apt-get update fetch.
for f in InRelease Release Release.gpg main/binary-amd64/Packages.xz main/i18n/Translation-en.xz; do
	mkdir -p "$(dirname "$tmp/archive/dists/$suite/$f")"
	curl -fsS -o "$tmp/archive/dists/$suite/$f" "$mirror/dists/$suite/$f"
done
# debootstrap's base (what minbase installs), then what apt-get, which
# resolves more than debootstrap does, installs over it: the packages'
# whole closure, as apt-get sees it with nothing installed.
if ! debootstrap --download-only --variant=minbase --include="$(echo $packages | tr ' ' ',')" "$suite" "$tmp/root" "$mirror" >"$tmp/log" 2>&1; then
	tail -20 "$tmp/log" >&2
	echo "debian-archive: debootstrap could not fetch the packages from $mirror" >&2
	exit 1
fi
mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial"
: >"$tmp/apt/status"
echo "deb $mirror $suite main" >"$tmp/apt/sources.list"
apt() {
	apt-get -q -o Dir::Etc::SourceList="$tmp/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$tmp/apt/lists" -o Dir::State::status="$tmp/apt/status" -o Dir::Cache="$tmp/apt/cache" \
		-o Debug::NoLocking=1 "$@"
}
if ! { apt update && apt install -y --download-only --no-install-recommends $packages; } >"$tmp/log" 2>&1; then
	tail -20 "$tmp/log" >&2
	echo "debian-archive: apt-get could not fetch the packages from $mirror" >&2
	exit 1
fi
# The index must be the one the packages came from (the archive changes
# a few times a day).
curl -fsS "$mirror/dists/$suite/InRelease" | cmp -s - "$tmp/archive/dists/$suite/InRelease" || {
	echo "debian-archive: $mirror changed meanwhile; run it again" >&2
	exit 1
}
# Named as in the archive's pool (debootstrap's and apt's names carry the
# epoch).
for f in "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/apt/cache/archives/*.deb; do
	mv -f "$f" "$tmp/archive/pool/$(basename "$f" | sed 's/_[0-9]*%3a/_/')"
done
mkdir -p "$(dirname "$dir")"
if [ -e "$dir" ]; then
	rm -rf --one-file-system "$dir"
fi
mv "$tmp/archive" "$dir"
echo "$want" >"$dir/complete"
echo "debian-archive: $(ls "$dir/pool" | wc -l) packages in $dir"
