#!/usr/bin/env bash
# CI for the Go client (clients/go): codes_gen.go current (raftlock-api's
# raftlock-codes --check), gofmt, go vet, then go test against
# real raftlock processes. Installs Debian's golang-go when `go` is
# missing (needs root). The tests use $RAFTLOCK_BIN, else the
# repository's target/debug/raftlock, built here if absent.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
	echo "== installing golang-go"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y golang-go
fi
go version
# Standard library only: nothing to download, ever.
export GOPROXY=off

if [ -z "${RAFTLOCK_BIN:-}" ] && [ ! -x ../../target/debug/raftlock ]; then
	echo "== cargo build -p raftlock-cli (the tests run target/debug/raftlock)"
	(cd ../.. && cargo build --locked -p raftlock-cli)
fi

echo "== codes_gen.go generated from raftlock-api's ErrorCode"
(cd ../.. && cargo run --quiet --locked -p raftlock-api --bin raftlock-codes -- --check)

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt'd:" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test"
# One package at a time: each starts its own clusters on a small machine.
go test -count=1 -p 1 ./...
