#!/usr/bin/env bash
# Checks cluster-config/raftlock.service with `systemd-analyze verify`,
# against the raftlock binary this checkout built (verify insists that
# ExecStart's program exists). Skips with a message where systemd is not
# installed: the unit is documentation there, not a test subject.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null; then
    echo "systemd-analyze not installed: cluster-config/raftlock.service not verified"
    exit 0
fi
binary="${CARGO_TARGET_DIR:-$PWD/target}/debug/raftlock"
[ -x "$binary" ] || cargo build --locked -p raftlock-cli
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
sed "s#/usr/bin/raftlock#$binary#" cluster-config/raftlock.service \
    > "$scratch/raftlock.service"
# verify exits 0 on mere warnings (an unknown or misspelt key is only
# "ignoring"), so any output at all fails the check.
if ! output="$(systemd-analyze verify "$scratch/raftlock.service" 2>&1)" || [ -n "$output" ]; then
    echo "$output" >&2
    echo "cluster-config/raftlock.service: systemd-analyze verify failed" >&2
    exit 1
fi
echo "cluster-config/raftlock.service: systemd-analyze verify passed"
