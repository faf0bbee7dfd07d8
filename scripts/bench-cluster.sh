#!/bin/sh
# make bench-cluster: a cluster — PostgreSQL (Debian's, a throwaway one),
# three `cove node`s and two `cove api` replicas — beside a `cove server`
# on the same machine, the same figures through each (bench/harness
# -only cluster): a command's round trip, create → first output, creates
# per second. Needs root and bin/cove (make build). SUSTAIN (default 20s)
# and N (default 30) size it.
set -eu
cd "$(dirname "$0")/.."
key=e2b_00000000000000000000000000000000be4c4001
token=bench-cluster-node-token-0123456789abcdef
data=$(mktemp -d)
pg=$(mktemp -d /tmp/cove-bench-pg.XXXXXX)
pids="" pgpid=""
stop() {
	for p in $pids; do kill -INT "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	pids=""
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

server=127.0.0.1:3890
./bin/cove server --listen "$server" --data-dir "$data/server" --api-key "$key" --cgroup-parent cove-bench-server \
	--network-range 198.19.0.0/18 --pool-size 0 >"$data/server.log" 2>&1 &
pids="$pids $!"
for i in 1 2 3; do
	./bin/cove node --listen "127.0.0.1:389$i" --name "n$i" --data-dir "$data/n$i" --database "$dsn" --node-token "$token" \
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
	./bin/cove api --listen "127.0.0.1:389$i" --data-dir "$data/api$i" --database "$dsn" --node-token "$token" --api-key "$key" \
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
