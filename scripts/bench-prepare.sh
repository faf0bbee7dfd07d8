#!/bin/sh
# Times a fresh machine's wait for the code interpreter and for E2B's base:
# a cove server with a new data directory, started as users start it (the
# built-in templates prepared in the background, --base=debian), until
# code-interpreter-v1 is ready and base is the debian recipe. It
# downloads from Debian's archive (MIRROR: the host's apt sources' first),
# so it is not part of make bench. Prints the progress every 10 s and the
# total; needs root and debootstrap. DEBS=DIR starts the server with that
# package cache (a warm cache: a machine that fetched them before);
# KEEP_DEBS=DIR keeps the run's cache there.
set -eu
cd "$(dirname "$0")/.."
data=$(mktemp -d /tmp/cove-bench-prepare.XXXXXX)
key=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=${PORT:-3290}
if [ -n "${DEBS:-}" ]; then
	mkdir -p "$data/data/templates"
	cp -r "$DEBS" "$data/data/templates/debs"
fi
start=$(date +%s)
COVE_PREPARE_TEMPLATES=true COVE_BASE=debian ./bin/cove server --listen 127.0.0.1:$port --data-dir "$data/data" --api-key "$key" \
	--cgroup-parent cove-bench-prepare --pool-size 0 --network-range 10.252.0.0/16 >"$data/server.log" 2>&1 &
server=$!
trap 'kill -INT $server; wait $server; rm -rf --one-file-system "$data"' EXIT
export COVE_API_URL=http://127.0.0.1:$port COVE_API_KEY=$key
base=
while :; do
	sleep 10
	if [ -z "$base" ] && grep -q "base is E2B's base now" "$data/server.log"; then
		base=$(( $(date +%s) - start ))
	fi
	list=$(./bin/cove template list 2>&1 || true)
	echo "$(( $(date +%s) - start )) s: $(echo "$list" | grep -E 'is [0-9]+% done' | tail -1)"
	if echo "$list" | grep -qE '^code-interpreter-v1 +code-interpreter-v1 +error'; then
		echo "the preparation failed:"; ./bin/cove template prepare code-interpreter-v1 2>&1 | tail -5; exit 1
	fi
	echo "$list" | grep -qE '^code-interpreter-v1 +code-interpreter-v1 +ready' && [ -n "$base" ] && break
done
cache=cold
[ -n "${DEBS:-}" ] && cache=warm
echo "BenchmarkPrepare/base/$cache-cache $base s from the server's start to base being E2B's base"
echo "BenchmarkPrepare/code-interpreter-v1/$cache-cache $(( $(date +%s) - start )) s from the server's start to ready"
if [ -n "${KEEP_DEBS:-}" ]; then
	rm -rf --one-file-system "$KEEP_DEBS"
	cp -r "$data/data/templates/debs" "$KEEP_DEBS"
fi
