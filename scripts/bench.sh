#!/bin/sh
# Runs the benchmarks and rewrites docs/BENCHMARKS.md. Needs root (sandboxes)
# and bin/cove (make build): sandboxes then start from the release binary,
# as in production. SUSTAIN (default 60s) and MEM (default 200,500,1000)
# size the load figures.
set -eu
# The servers measured never build the built-in Debian templates in the
# background (their downloads and dpkg would share the cores measured).
export COVE_PREPARE_TEMPLATES=false
# Their base is the host's template, as the figures before were.
export COVE_BASE=host
cd "$(dirname "$0")/.."
out=$(mktemp)
data=$(mktemp -d)
key=e2b_00000000000000000000000000000000be4c4000
cold=127.0.0.1:${BENCH_PORT:-3999}
pooled=127.0.0.1:$((${BENCH_PORT:-3999} - 1))
burst=127.0.0.1:$((${BENCH_PORT:-3999} - 2))
gvisor=127.0.0.1:$((${BENCH_PORT:-3999} - 3))
plain=127.0.0.1:$((${BENCH_PORT:-3999} - 4))
disk=127.0.0.1:$((${BENCH_PORT:-3999} - 5))
microvm=127.0.0.1:$((${BENCH_PORT:-3999} - 6))
s1= s2= s3= s4= s5= s6= s7=
trap 'kill $s1 $s2 $s3 $s4 $s5 $s6 $s7 2>/dev/null || true; wait $s1 $s2 $s3 $s4 $s5 $s6 $s7 2>/dev/null || true; rm -f "$out"' EXIT

# The peers: Debian's runc, crun and bubblewrap.
for p in runc crun bwrap; do
	command -v $p >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc crun bubblewrap >/dev/null; break; }
done

go test -run '^$' -bench 'CreateReady|Floor|TemplateCreate' -benchtime 100x -count "${COUNT:-5}" ./internal/isolation/namespaces/ | tee "$out"
go test -run '^$' -bench Disk100 -benchtime 1x -count 1 ./internal/isolation/namespaces/ | tee -a "$out"
go test -run '^$' -bench PauseResume -benchtime 50x -count "${COUNT:-5}" ./internal/isolation/namespaces/ | tee -a "$out"
go test -run '^$' -bench TCPStream -benchtime 5x -count "${COUNT:-5}" ./internal/network/ | tee -a "$out"
# The egress proxy: a stream through it, then what a held connection costs
# (one process a run: Go's pools outlive a run in the same process).
go test -run '^$' -bench EgressProxy/stream -benchtime 3x -count "${COUNT:-5}" ./internal/network/ | tee -a "$out"
for _ in $(seq "${COUNT:-5}"); do
	go test -run '^$' -bench EgressProxy/held -benchtime 1x -count 1 ./internal/network/ | tee -a "$out"
done
go run ./bench/peers -n "${PEER_N:-30}" | tee -a "$out"

# The servers promise up to 64 times this host's memory: the idle-memory
# figure keeps 1 000 sandboxes of 512 MiB alive at once.
# End to end through the SDKs against two servers on loopback: one without
# warm sandboxes (every create is cold), one with them.
./bin/cove server --listen "$cold" --data-dir "$data/cold" --api-key "$key" --cgroup-parent cove-bench-cold --memory-overcommit 64 \
	--network-range 198.19.128.0/17 --pool-size 0 >"$data/cold.log" 2>&1 &
s1=$!
./bin/cove server --listen "$pooled" --data-dir "$data/pooled" --api-key "$key" --cgroup-parent cove-bench-pooled --memory-overcommit 64 \
	--metrics-listen "127.0.0.1:$((${BENCH_PORT:-3999} - 10))" \
	--network-range 198.18.0.0/16 --pool-size "${POOL:-8}" >"$data/pooled.log" 2>&1 &
s2=$!
# A node sized for bursts of 100: that many warm sandboxes.
./bin/cove server --listen "$burst" --data-dir "$data/burst" --api-key "$key" --cgroup-parent cove-bench-burst --memory-overcommit 64 \
	--network-range 198.19.0.0/18 --pool-size 100 >"$data/burst.log" 2>&1 &
s3=$!
# Sandboxes on gVisor (bin/runsc, which make bench installs), none warm.
./bin/cove server --listen "$gvisor" --data-dir "$data/gvisor" --api-key "$key" --cgroup-parent cove-bench-gvisor --memory-overcommit 64 \
	--network-range 198.19.64.0/18 --pool-size 0 --default-isolation gvisor >"$data/gvisor.log" 2>&1 &
s4=$!
# Like the cold one, without user namespaces: what they cost.
./bin/cove server --listen "$plain" --data-dir "$data/plain" --api-key "$key" --cgroup-parent cove-bench-plain --memory-overcommit 64 \
	--network-range 198.19.192.0/18 --pool-size 0 --userns=false >"$data/plain.log" 2>&1 &
s5=$!
# gVisor writing paused sandboxes to disk at once: the resume-from-disk figure.
./bin/cove server --listen "$disk" --data-dir "$data/disk" --api-key "$key" --cgroup-parent cove-bench-disk --memory-overcommit 64 \
	--network=false --pool-size 0 --default-isolation gvisor --pause-to-disk-after 100ms >"$data/disk.log" 2>&1 &
s6=$!
# Sandboxes in microVMs (QEMU; KVM where /dev/kvm opens, else emulated),
# none warm, without a network of their own.
./bin/cove server --listen "$microvm" --data-dir "$data/microvm" --api-key "$key" --cgroup-parent cove-bench-microvm --memory-overcommit 64 \
	--network=false --pool-size 0 --default-isolation microvm >"$data/microvm.log" 2>&1 &
s7=$!
for a in "$cold" "$pooled" "$burst" "$gvisor" "$plain" "$disk" "$microvm"; do
	for _ in $(seq 100); do
		curl -fsS "http://$a/health" >/dev/null 2>&1 && break
		sleep 0.1
	done
done
sleep 5 # the pools fill
# The microVM guests see the base template's /usr on an image of the
# host's (--microvm-bind-images), which the first guest starts: the
# figures are of guests on it.
vm=$(curl -fsS -X POST -H "X-API-Key: $key" -H 'Content-Type: application/json' -d '{"templateID":"base","timeout":900}' \
	"http://$microvm/sandboxes" | sed -n 's/.*"sandboxID":"\([^"]*\)".*/\1/p')
for _ in $(seq 900); do
	ls "$data"/microvm/microvm/_images/bind-*.erofs >/dev/null 2>&1 && break
	sleep 1
done
curl -fsS -X DELETE -H "X-API-Key: $key" "http://$microvm/sandboxes/$vm" >/dev/null
go run ./bench/harness -cold "http://$cold" -pooled "http://$pooled" -metrics "http://127.0.0.1:$((${BENCH_PORT:-3999} - 10))/metrics" -burst "http://$burst" -gvisor "http://$gvisor" -plain "http://$plain" -gvisor-disk "http://$disk" -microvm "http://$microvm" -key "$key" -n "${TTI_N:-50}" \
	-sustain "${SUSTAIN:-60s}" -mem "${MEM:-200,500,1000}" | tee -a "$out"
# The API's requests per second while idle connections without a
# credential are held from another loopback address, against the same
# without them.
go run ./bench/harness -pooled "http://$pooled" -key "$key" -only flood | tee -a "$out"
(cd bench/js && [ -d node_modules/@e2b/code-interpreter ] || npm ci --no-audit --no-fund >/dev/null)
export E2B_API_KEY="$key"
(cd bench/js && E2B_API_URL="http://$cold" E2B_SANDBOX_URL="http://$cold" node tti.mjs cold "${TTI_N:-50}") | tee -a "$out"
(cd bench/js && E2B_API_URL="http://$pooled" E2B_SANDBOX_URL="http://$pooled" node tti.mjs pooled "${TTI_N:-50}") | tee -a "$out"
# The same through the official Python SDK (make deps's venv), its sync
# client and its async one.
E2B_API_URL="http://$cold" E2B_SANDBOX_URL="http://$cold" test/compat/py/.venv/bin/python bench/py/tti.py cold "${TTI_N:-50}" | tee -a "$out"
E2B_API_URL="http://$pooled" E2B_SANDBOX_URL="http://$pooled" test/compat/py/.venv/bin/python bench/py/tti.py pooled "${TTI_N:-50}" | tee -a "$out"
# Files through the official SDKs (the Go SDK's: the harness above).
(cd bench/js && E2B_API_URL="http://$pooled" E2B_SANDBOX_URL="http://$pooled" node files.mjs) | tee -a "$out"
E2B_API_URL="http://$pooled" E2B_SANDBOX_URL="http://$pooled" test/compat/py/.venv/bin/python bench/py/files.py | tee -a "$out"
# The code interpreter through @e2b/code-interpreter, and its floor: the
# same kernel driven by the reference Jupyter client.
(cd bench/js && E2B_API_URL="http://$cold" E2B_SANDBOX_URL="http://$cold" node code.mjs cold "${CODE_N:-10}") | tee -a "$out"
(cd bench/js && E2B_API_URL="http://$pooled" E2B_SANDBOX_URL="http://$pooled" node code.mjs pooled "${CODE_N:-20}") | tee -a "$out"
/usr/bin/python3 bench/code/jupyter_rtt.py 2>/dev/null | tee -a "$out"

kill $s1 $s2 $s3 $s4 $s5 $s6 $s7
wait $s1 $s2 $s3 $s4 $s5 $s6 $s7 || true
# ComputeSDK's protocol through the official SDK, against a server as a
# user starts it (its default warm pool and network), alone on the host.
./bin/cove server --listen "$cold" --data-dir "$data/user" --api-key "$key" --cgroup-parent cove-bench-user >"$data/user.log" 2>&1 &
s1=$!
for _ in $(seq 100); do
	curl -fsS "http://$cold/health" >/dev/null 2>&1 && break
	sleep 0.1
done
sleep 3 # the pool fills
(cd bench/js && E2B_API_URL="http://$cold" E2B_SANDBOX_URL="http://$cold" node computesdk.mjs "${COMPUTESDK_N:-100}") | tee -a "$out"
kill $s1
wait $s1 || true
if [ -n "$(find "$data/cold/sandboxes" "$data/user/sandboxes" "$data/pooled/sandboxes" "$data/burst/sandboxes" "$data/gvisor/gvisor" "$data/plain/sandboxes" "$data/disk/gvisor" "$data/microvm/microvm" -mindepth 1 -maxdepth 1 ! -name .runsc ! -name initramfs.cpio ! -name _images ! -name _snapshots 2>/dev/null)" ]; then
	echo "bench: sandboxes left after the servers stopped" >&2
	exit 1
fi
rm -rf --one-file-system "$data"
go run ./bench/benchreport -o docs/BENCHMARKS.md < "$out"
echo "wrote docs/BENCHMARKS.md"
