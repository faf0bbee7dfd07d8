#!/bin/bash
# bench-ab.sh LABEL=BINDIR ...: one pooled cove server per build (each
# BINDIR holds its cove and cove-sandbox), then bench/ab interleaves their
# creates (POOL=0: cold creates, no warm sandboxes). make bench-ab OLD=dir
# NEW=dir runs it on two builds.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 LABEL=BINDIR LABEL=BINDIR ..." >&2; exit 2; }
cd "$(dirname "$0")/.."
key=e2b_$(printf '%040d' 7)
dir=$(mktemp -d /tmp/cove-bench-ab.XXXXXX)
pids=()
stop() {
	kill -INT "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	rm -rf --one-file-system "$dir"
}
trap stop EXIT
urls=()
i=0
for arg in "$@"; do
	label=${arg%%=*} bin=${arg#*=}
	i=$((i + 1))
	port=$((3320 + i))
	COVE_PREPARE_TEMPLATES=false COVE_BASE=host "$bin/cove" server --listen "127.0.0.1:$port" --data-dir "$dir/$label" --api-key "$key" \
		--cgroup-parent "cove-bench-ab-$label" --pool-size "${POOL:-4}" --network-range "10.$((230 + i)).0.0/16" >"$dir/$label.log" 2>&1 &
	pids+=($!)
	urls+=("$label=http://127.0.0.1:$port")
	for _ in $(seq 100); do curl -fs -o /dev/null "127.0.0.1:$port/health" && break; sleep 0.1; done
done
sleep 2 # the pools fill
go run ./bench/ab -urls "$(IFS=,; echo "${urls[*]}")" -key "$key" -n "${N:-150}"
