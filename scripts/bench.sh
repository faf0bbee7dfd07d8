#!/bin/sh
# Runs the benchmarks and rewrites docs/BENCHMARKS.md. Needs root (sandboxes)
# and bin/cove (make build): sandboxes then start from the release binary,
# as in production.
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp)
data=$(mktemp -d)
key=e2b_00000000000000000000000000000000be4c4000
addr=127.0.0.1:${BENCH_PORT:-3999}
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$out" "$data"' EXIT

go test -run '^$' -bench 'CreateReady|Floor|TemplateCreate' -benchtime 100x -count "${COUNT:-5}" ./internal/isolation/namespaces/ | tee "$out"
go test -run '^$' -bench Disk100 -benchtime 1x -count 1 ./internal/isolation/namespaces/ | tee -a "$out"
go test -run '^$' -bench TCPStream -benchtime 5x -count "${COUNT:-5}" ./internal/network/ | tee -a "$out"

# Time to interactive through the SDKs, against a real server on loopback.
./bin/cove server --listen "$addr" --data-dir "$data" --api-key "$key" >"$data.log" 2>&1 &
server=$!
for _ in $(seq 100); do
	curl -fsS "http://$addr/health" >/dev/null 2>&1 && break
	sleep 0.1
done
(cd bench/js && [ -d node_modules/e2b ] || npm ci --no-audit --no-fund >/dev/null)
export COVE_API_URL="http://$addr" COVE_API_KEY="$key"
export E2B_API_URL="http://$addr" E2B_SANDBOX_URL="http://$addr" E2B_API_KEY="$key" E2B_DOMAIN=localhost
go run ./bench/tti -n "${TTI_N:-50}" | tee -a "$out"
(cd bench/js && node tti.mjs "${TTI_N:-50}") | tee -a "$out"

go run ./bench/benchreport -o docs/BENCHMARKS.md < "$out"
echo "wrote docs/BENCHMARKS.md"
