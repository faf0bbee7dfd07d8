#!/bin/sh
# Regenerates the Go code for the .proto files under api/. The agent's
# lives in the Go SDK's module (sdk/go/envdpb), which Cove itself imports:
# one copy of the wire types in every binary; the node-internal API's in
# Cove's own (internal/nodeapi/nodepb). Needs protoc, protoc-gen-go
# and protoc-gen-connect-go (make tools installs them).
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
sdk=github.com/covesandbox/cove/sdk/go
for p in envd/process/process.proto envd/filesystem/filesystem.proto; do
	protoc -I . -I /usr/include \
		--go_out=../sdk/go --go_opt=module=$sdk \
		--connect-go_out=../sdk/go --connect-go_opt=module=$sdk \
		"$p"
done
protoc -I . -I /usr/include \
	--go_out=.. --go_opt=module=github.com/covesandbox/cove \
	--connect-go_out=.. --connect-go_opt=module=github.com/covesandbox/cove \
	node/v1/node.proto
