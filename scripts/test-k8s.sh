#!/bin/sh
# make test-k8s: the Helm chart (deploy/helm/cove) and the Terraform module
# (deploy/terraform), checked as far as a machine without a container
# runtime allows, all on loopback:
#   - helm lint; the chart's refusals of bad values;
#   - helm template, then kubeconform against the Kubernetes release's own
#     schemas (made from its OpenAPI document, offline);
#   - helm install into a real kube-apiserver and etcd started here, with
#     kwok making labelled Node objects Ready; the objects are read back;
#   - terraform fmt; validate and plan need the providers' binaries, which
#     only their registries serve: skipped, saying so, when they cannot be
#     had.
# The tools are built from the Go module proxy once per version into
# $COVE_K8S_CACHE (default /var/cache/cove-k8s): the first run takes about
# 20 minutes (kube-apiserver alone 12), the next ones seconds.
set -eu
cd "$(dirname "$0")/.."
K8S=v1.37.2 KWOK=v0.8.0 HELM=v3.22.0 KUBECONFORM=v0.8.0
cache=${COVE_K8S_CACHE:-/var/cache/cove-k8s}
bin=$cache/bin
mkdir -p "$bin"
modcache=$(go env GOMODCACHE)

# build NAME VERSION PACKAGE: go install PACKAGE@VERSION into the cache.
build() {
	[ -x "$bin/$1-$2" ] && return
	echo "test-k8s: building $1 $2 (once)"
	tmp=$(mktemp -d)
	GOBIN=$tmp go install -ldflags="-s -w" "$3@$2"
	mv "$tmp/$1" "$bin/$1-$2"
	rmdir "$tmp"
}
build helm "$HELM" helm.sh/helm/v3/cmd/helm
build kubeconform "$KUBECONFORM" github.com/yannh/kubeconform/cmd/kubeconform
build kwok "$KWOK" sigs.k8s.io/kwok/cmd/kwok
# kube-apiserver's module replaces its staging modules with directories, so
# it builds from a module of ours that names their published versions.
if [ ! -x "$bin/kube-apiserver-$K8S" ]; then
	echo "test-k8s: building kube-apiserver $K8S (once, about 12 minutes)"
	wrap=$cache/src/kube-$K8S
	mkdir -p "$wrap"
	go mod download -json "k8s.io/kubernetes@$K8S" >/dev/null
	staging=v0.${K8S#v1.}
	{
		echo "module cove.local/kubewrap"
		echo
		echo "go 1.26.0"
		echo
		echo "replace ("
		sed -n '/^replace (/,/^)/p' "$modcache/cache/download/k8s.io/kubernetes/@v/$K8S.mod" |
			awk -v v="$staging" '/=>/ { print "\t" $1 " => " $1 " " v }'
		echo ")"
	} >"$wrap/go.mod"
	(cd "$wrap" && go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S" &&
		go build -o "$bin/kube-apiserver-$K8S" -ldflags="-s -w \
			-X k8s.io/component-base/version.gitVersion=$K8S \
			-X k8s.io/component-base/version.gitMajor=1 \
			-X k8s.io/component-base/version.gitMinor=$(echo "$K8S" | cut -d. -f2)" \
			k8s.io/kubernetes/cmd/kube-apiserver)
fi
command -v etcd >/dev/null 2>&1 || {
	[ "$(id -u)" = 0 ] || { echo "test-k8s: etcd is missing (apt-get install etcd-server)" >&2; exit 1; }
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server
}
helm=$bin/helm-$HELM
chart=deploy/helm/cove

work=$(mktemp -d)
pids=""
cleanup() {
	# Throwaway processes on throwaway data: killed outright (the
	# apiserver's graceful stop waits for the etcd it lost).
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT INT TERM

echo "== helm lint"
token=test-k8s-node-token-0123456789abcdef
values="--set image.repository=registry.example/cove --set nodeToken.value=$token --set database.external.dsn=postgres://cove:pw@db.example/cove --set objectStore.url=https://s3.example/cove-templates --set objectStore.accessKey=AK --set objectStore.secretKey=SK"
# shellcheck disable=SC2086
"$helm" lint --strict "$chart" $values
# shellcheck disable=SC2086
"$helm" lint --strict "$chart" $values --set postgresql.enabled=true --set postgresql.password=pw --set api.apiKey=e2b_0000000000000000000000000000000000000000

echo "== the chart refuses what cannot run"
refuses() { # refuses WHY ARGS...: helm template must fail, saying WHY
	why=$1
	shift
	if out=$("$helm" template cove "$chart" "$@" 2>&1); then
		echo "test-k8s: the chart took $*" >&2
		exit 1
	fi
	echo "$out" | grep -q "$why" || { echo "test-k8s: refused, but not for '$why': $out" >&2; exit 1; }
}
refuses "image.repository is required" --set nodeToken.value=$token --set database.external.dsn=x
refuses "32 characters or more" --set image.repository=r --set nodeToken.value=short --set database.external.dsn=x
refuses "give database.external.dsn" --set image.repository=r --set nodeToken.value=$token
refuses "postgresql.password is required" --set image.repository=r --set nodeToken.value=$token --set postgresql.enabled=true
refuses "objectStore.accessKey is required" --set image.repository=r --set nodeToken.value=$token --set database.external.dsn=x --set objectStore.url=https://s3.example/b

echo "== a team quota reaches the replicas"
# shellcheck disable=SC2086
"$helm" template cove "$chart" $values --set api.teamQuota.sandboxes=20 --set api.teamQuota.memoryMB=65536 >"$work/quota.yaml"
for want in "name: COVE_TEAM_MAX_SANDBOXES" 'value: "20"' "name: COVE_TEAM_MAX_MEMORY_MB" 'value: "65536"'; do
	grep -q "$want" "$work/quota.yaml" || { echo "test-k8s: no '$want' in the api Deployment with a team quota" >&2; exit 1; }
done
if grep -q COVE_TEAM_MAX_CPUS "$work/quota.yaml"; then
	echo "test-k8s: a quota left at 0 reached the replicas" >&2
	exit 1
fi

echo "== the node API's TLS reaches both roles"
# shellcheck disable=SC2086
"$helm" template cove "$chart" $values --set nodeTLS.existingSecret=cove-node-tls >"$work/tls.yaml"
for want in "--advertise=https://" "scheme: HTTPS" "secretName: cove-node-tls" "name: COVE_NODE_TLS_SERVER_NAME"; do
	grep -q -- "$want" "$work/tls.yaml" || { echo "test-k8s: no '$want' with nodeTLS.existingSecret" >&2; exit 1; }
done
[ "$(grep -c "mountPath: /etc/cove/node-tls" "$work/tls.yaml")" = 2 ] || { echo "test-k8s: the node TLS files are not mounted in both roles" >&2; exit 1; }

echo "== the identity key reaches both roles"
# shellcheck disable=SC2086
"$helm" template cove "$chart" $values --set identityKey.existingSecret=cove-identity --set identityKey.issuer=https://id.example >"$work/identity.yaml"
for want in "name: COVE_IDENTITY_KEY_FILE" 'value: "https://id.example"' "mountPath: /etc/cove/identity-key"; do
	[ "$(grep -c -- "$want" "$work/identity.yaml")" = 2 ] || { echo "test-k8s: '$want' not in both roles with identityKey.existingSecret" >&2; exit 1; }
done
grep -q "secretName: cove-identity" "$work/identity.yaml" || { echo "test-k8s: the identity key's Secret is not mounted" >&2; exit 1; }
if "$helm" template cove "$chart" $values | grep -q "COVE_IDENTITY"; then
	echo "test-k8s: an identity key though none was given" >&2
	exit 1
fi

echo "== metrics reach both roles, and only the scrapers"
# shellcheck disable=SC2086
"$helm" template cove "$chart" $values --set metrics.enabled=true --set metrics.port=9191 \
	--set 'metrics.scrapeFrom[0].namespaceSelector.matchLabels.team=monitoring' >"$work/metrics.yaml"
for want in 'value: "0.0.0.0:9191"' 'prometheus.io/port: "9191"' "containerPort: 9191" "team: monitoring"; do
	[ "$(grep -c -- "$want" "$work/metrics.yaml")" -ge 2 ] || { echo "test-k8s: '$want' not in both roles with metrics on" >&2; exit 1; }
done
if "$helm" template cove "$chart" $values | grep -q "COVE_METRICS_LISTEN\|prometheus.io"; then
	echo "test-k8s: metrics on though not asked for" >&2
	exit 1
fi

echo "== kubeconform against Kubernetes $K8S's schemas"
schemas=$cache/schemas-$K8S
if [ ! -d "$schemas" ]; then
	go mod download -json "k8s.io/kubernetes@$K8S" >/dev/null
	go run ./test/k8s/schemas "$schemas.tmp" <"$modcache/k8s.io/kubernetes@$K8S/api/openapi-spec/swagger.json"
	mv "$schemas.tmp" "$schemas"
fi
for set in "" "--set nodeTLS.existingSecret=cove-node-tls" "--set metrics.enabled=true --set metrics.scrapeFrom[0].podSelector.matchLabels.app=prometheus" "--set postgresql.enabled=true --set postgresql.password=pw --set database.external.dsn= --set api.apiKey=e2b_0000000000000000000000000000000000000000"; do
	# shellcheck disable=SC2086
	"$helm" template cove "$chart" -n cove $values $set >"$work/rendered.yaml"
	"$bin/kubeconform-$KUBECONFORM" -strict -summary \
		-schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$work/rendered.yaml"
done
# The check catches what it should: a wrong type and an unknown field.
sed 's/automountServiceAccountToken: false/automountServiceAccountToken: "no"/; s/containerPort:/containerPortz:/' "$work/rendered.yaml" >"$work/bad.yaml"
if "$bin/kubeconform-$KUBECONFORM" -strict -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$work/bad.yaml" >/dev/null 2>&1; then
	echo "test-k8s: kubeconform took a manifest with a wrong type and an unknown field" >&2
	exit 1
fi

echo "== helm install into kube-apiserver $K8S + etcd, with kwok's nodes"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcd_client=$(port) etcd_peer=$(port) api_port=$(port) kwok_port=$(port)
etcd --name cove-k8s-test --data-dir "$work/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "cove-k8s-test=http://127.0.0.1:$etcd_peer" >"$work/etcd.log" 2>&1 &
pids="$pids $!"
openssl genrsa -out "$work/sa.key" 2048 2>/dev/null
openssl rsa -in "$work/sa.key" -pubout -out "$work/sa.pub" 2>/dev/null
admin=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$admin,admin,admin-uid,system:masters" >"$work/tokens.csv"
"$bin/kube-apiserver-$K8S" --etcd-servers="http://127.0.0.1:$etcd_client" \
	--bind-address=127.0.0.1 --secure-port="$api_port" --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
	--cert-dir="$work/certs" --token-auth-file="$work/tokens.csv" --authorization-mode=Node,RBAC \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$work/sa.pub" \
	--service-account-signing-key-file="$work/sa.key" --service-cluster-ip-range=10.96.0.0/16 \
	--allow-privileged=true >"$work/apiserver.log" 2>&1 &
pids="$pids $!"
kube() { # kube METHOD PATH [BODY]: a call to the apiserver as admin
	if [ $# -gt 2 ]; then
		curl -sfk -X "$1" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' -d "$3" "https://127.0.0.1:$api_port$2"
	else
		curl -sfk -X "$1" -H "Authorization: Bearer $admin" "https://127.0.0.1:$api_port$2"
	fi
}
i=0
until kube GET /readyz >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 120 ] || { echo "test-k8s: kube-apiserver not ready" >&2; tail -20 "$work/apiserver.log" >&2; exit 1; }
	sleep 0.5
done
cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$admin"}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
EOF
for n in 1 2 3; do
	kube POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"host-$n\",\"labels\":{\"cove.dev/sandbox-host\":\"true\"}}}" >/dev/null
done
stages=$modcache/sigs.k8s.io/kwok@$KWOK/kustomize/stage
"$bin/kwok-$KWOK" --kubeconfig "$work/kubeconfig" --manage-nodes-with-label-selector cove.dev/sandbox-host=true \
	--server-address "127.0.0.1:$kwok_port" \
	--config "$stages/node/fast/node-initialize.yaml" --config "$stages/node/heartbeat/node-heartbeat.yaml" \
	--config "$stages/pod/fast/pod-ready.yaml" --config "$stages/pod/fast/pod-complete.yaml" \
	--config "$stages/pod/fast/pod-delete.yaml" >"$work/kwok.log" 2>&1 &
pids="$pids $!"
ready() {
	kube GET /api/v1/nodes | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["items"]
ok = [n for n in nodes if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))]
sys.exit(0 if len(ok) == 3 else 1)'
}
i=0
until ready; do
	i=$((i + 1))
	[ $i -lt 60 ] || { echo "test-k8s: kwok made no nodes Ready" >&2; tail -20 "$work/kwok.log" >&2; exit 1; }
	sleep 0.5
done
echo "test-k8s: 3 nodes Ready"
# shellcheck disable=SC2086
"$helm" install cove "$chart" --kubeconfig "$work/kubeconfig" -n cove --create-namespace $values
"$helm" status cove --kubeconfig "$work/kubeconfig" -n cove | grep -q "STATUS: deployed"
for path in \
	/apis/apps/v1/namespaces/cove/deployments/cove-api \
	/apis/apps/v1/namespaces/cove/daemonsets/cove-node \
	/api/v1/namespaces/cove/services/cove-api \
	/apis/policy/v1/namespaces/cove/poddisruptionbudgets/cove-api \
	/apis/networking.k8s.io/v1/namespaces/cove/networkpolicies/cove-node \
	/api/v1/namespaces/cove/secrets/cove-secret \
	/api/v1/namespaces/cove/serviceaccounts/cove-node; do
	kube GET "$path" >/dev/null || { echo "test-k8s: $path was not created" >&2; exit 1; }
done
# The DaemonSet runs on the labelled nodes only, privileged, with the
# cluster's settings from the Secret.
kube GET /apis/apps/v1/namespaces/cove/daemonsets/cove-node | python3 -c '
import json, sys
ds = json.load(sys.stdin)["spec"]["template"]["spec"]
assert ds["nodeSelector"] == {"cove.dev/sandbox-host": "true"}, ds["nodeSelector"]
c = ds["containers"][0]
assert c["securityContext"]["privileged"] is True
assert {e["name"] for e in c["env"]} >= {"COVE_DATABASE", "COVE_NODE_TOKEN", "COVE_OBJECT_STORE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
assert ds["automountServiceAccountToken"] is False'
"$helm" uninstall cove --kubeconfig "$work/kubeconfig" -n cove >/dev/null
echo "test-k8s: the chart installed, was read back and uninstalled"

echo "== terraform"
tf=$(command -v tofu || command -v terraform || true)
if [ -z "$tf" ]; then
	echo "test-k8s: SKIPPED terraform fmt, validate and plan: neither tofu nor terraform is installed"
else
	"$tf" fmt -check -recursive deploy/terraform
	echo "test-k8s: $(basename "$tf") fmt: deploy/terraform is formatted"
	if (cd deploy/terraform && "$tf" init -backend=false -input=false -no-color >"$work/tf-init.log" 2>&1); then
		(cd deploy/terraform && "$tf" validate -no-color)
	else
		echo "test-k8s: SKIPPED $(basename "$tf") validate and plan: the hashicorp/helm and hashicorp/kubernetes providers cannot be downloaded here ($(grep -m1 -o 'Failed to [^.]*' "$work/tf-init.log" || echo 'init failed'))"
	fi
	rm -rf --one-file-system deploy/terraform/.terraform deploy/terraform/.terraform.lock.hcl
fi
echo "test-k8s: ok"
