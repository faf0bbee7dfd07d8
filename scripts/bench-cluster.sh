#!/bin/sh
# make bench-cluster: a cluster — PostgreSQL (Debian's, a throwaway one),
# an S3 bucket (SeaweedFS, as make deps builds it for the tests), three
# `cove node`s and two `cove api` replicas — beside a `cove server` on the
# same machine, the same figures through each (bench/harness -only
# cluster): a command's round trip, pause and resume with and without
# memory, create → first output, creates per second. Needs root and
# bin/cove (make build). SUSTAIN (default 20s) and N (default 30) size it.
set -eu
export COVE_PREPARE_TEMPLATES=false # no background Debian builds beside the figures
export COVE_BASE=host                # base is the host's template, as in make bench
cd "$(dirname "$0")/.."
key=e2b_00000000000000000000000000000000be4c4001
token=bench-cluster-node-token-0123456789abcdef
data=$(mktemp -d)
pg=$(mktemp -d /tmp/cove-bench-pg.XXXXXX)
pids="" pgpid="" weedpid=""
stop() {
	for p in $pids; do kill -INT "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	pids=""
	if [ -n "$weedpid" ]; then # its data is the bench's only
		kill -KILL "$weedpid" 2>/dev/null || true
		wait "$weedpid" 2>/dev/null || true
		weedpid=""
	fi
	if [ -n "$pgpid" ]; then # runuser passes no signal on: pg_ctl stops it
		runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg/data" stop -m fast >/dev/null 2>&1 || true
		wait "$pgpid" 2>/dev/null || true
		pgpid=""
	fi
}
trap 'stop; rm -rf --one-file-system "$pg"' EXIT

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
chown postgres "$pg"
runuser -u postgres -- "$pgbin/initdb" -D "$pg/data" -U cove --auth=trust -E UTF8 --no-sync >/dev/null
runuser -u postgres -- "$pgbin/postgres" -D "$pg/data" -k "$pg" -c listen_addresses= -c fsync=off >"$pg/log" 2>&1 &
pgpid=$!
dsn="host=$pg port=5432 user=cove dbname=postgres sslmode=disable"
for _ in $(seq 100); do
	runuser -u postgres -- "$pgbin/pg_isready" -h "$pg" -q && break
	sleep 0.1
done

weed=${COVE_WEED:-/var/cache/cove-test/weed}
[ -x "$weed" ] || { echo "bench-cluster: no SeaweedFS server at $weed (make deps builds it)" >&2; exit 1; }
mkdir -p "$data/s3/data"
export AWS_ACCESS_KEY_ID=cove-bench AWS_SECRET_ACCESS_KEY=cove-bench-secret
printf '{"identities":[{"name":"cove","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$data/s3/s3.json"
"$weed" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$data/s3/data" -master.port=38971 -master.port.grpc=38972 \
	-volume.port=38973 -volume.port.grpc=38974 -filer -filer.port=38975 -filer.port.grpc=38976 \
	-s3 -s3.port=38970 -s3.port.grpc=38977 -s3.config="$data/s3/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 \
	-iam=false -master.telemetry=false -volume.max=0 -master.volumeSizeLimitMB=64 >"$data/s3/log" 2>&1 &
weedpid=$!
bucket=http://127.0.0.1:38970/bench
for _ in $(seq 300); do # the filer and a volume answer: the gateway can make the bucket
	curl -fsS http://127.0.0.1:38975/ >/dev/null 2>&1 && curl -fsS http://127.0.0.1:38973/status >/dev/null 2>&1 && break
	sleep 0.2
done

server=127.0.0.1:3890
./bin/cove server --listen "$server" --data-dir "$data/server" --api-key "$key" --cgroup-parent cove-bench-server \
	--network-range 198.19.0.0/18 --pool-size 0 >"$data/server.log" 2>&1 &
pids="$pids $!"
for i in 1 2 3; do
	./bin/cove node --listen "127.0.0.1:389$i" --name "n$i" --data-dir "$data/n$i" --database "$dsn" --node-token "$token" --object-store "$bucket" \
		--cgroup-parent "cove-bench-n$i" --network-range "198.19.$((64 * i)).0/18" --pool-size 0 >"$data/n$i.log" 2>&1 &
	pids="$pids $!"
done
for i in 1 2 3; do
	for _ in $(seq 100); do
		curl -fsS "http://127.0.0.1:389$i/healthz" >/dev/null 2>&1 && break
		sleep 0.1
	done
done
for i in 5 6; do
	./bin/cove api --listen "127.0.0.1:389$i" --data-dir "$data/api$i" --database "$dsn" --node-token "$token" --api-key "$key" --object-store "$bucket" \
		>"$data/api$i.log" 2>&1 &
	pids="$pids $!"
done
for a in "$server" 127.0.0.1:3895 127.0.0.1:3896; do
	for _ in $(seq 100); do
		curl -fsS "http://$a/health" >/dev/null 2>&1 && break
		sleep 0.1
	done
done
sleep 2 # every replica has read the nodes
go run ./bench/harness -only cluster -cold "http://$server" -cluster "http://127.0.0.1:3895" -key "$key" \
	-n "${N:-30}" -sustain "${SUSTAIN:-20s}"
stop
left=$(find "$data/server/sandboxes" "$data/n1/sandboxes" "$data/n2/sandboxes" "$data/n3/sandboxes" -mindepth 1 -maxdepth 1 2>/dev/null || true)
if [ -n "$left" ]; then
	echo "bench-cluster: sandboxes left after the roles stopped: $left" >&2
	exit 1
fi
rm -rf --one-file-system "$data"
