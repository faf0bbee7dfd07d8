#!/bin/sh
# Regenerates the Go code for the .proto files under api/. Needs protoc,
# protoc-gen-go and protoc-gen-connect-go (make tools installs them).
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
for p in envd/process/process.proto envd/filesystem/filesystem.proto; do
	protoc -I . -I /usr/include \
		--go_out=. --go_opt=paths=source_relative \
		--connect-go_out=. --connect-go_opt=paths=source_relative \
		"$p"
done
