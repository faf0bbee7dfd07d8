#!/bin/sh
# Runs the benchmarks and rewrites docs/BENCHMARKS.md. Needs root (the
# namespaces driver) and bin/cove (make build): sandboxes then start from
# the release binary, as in production.
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchtime 100x -count "${COUNT:-5}" ./internal/isolation/namespaces/ | tee "$out"
go run ./bench/benchreport -o docs/BENCHMARKS.md < "$out"
echo "wrote docs/BENCHMARKS.md"
