#!/usr/bin/env bash
# Runs the README's Rust examples on free loopback ports: the embedded
# example as member 3 of a cluster whose members 1 and 2 are `raftlock
# serve`, all reading one cluster file, and the HTTP example against a
# `raftlock up` cluster.
# Called by .ci/run after the tests (the binaries are built by then).
set -euo pipefail
cd "$(dirname "$0")/.."

# The README's embedding snippet is the example's code, line for line.
sed -n '/<!-- embedded -->/,/<!-- \/embedded -->/p' README.md | grep -v '^```\|^<!--' |
    while IFS= read -r line; do
        [ -z "$line" ] && continue
        grep -qF -- "$line" crates/raftlock-client/examples/embedded.rs ||
            { echo "README embedding line not in examples/embedded.rs: $line"; exit 1; }
    done

# A base port P with P..P+5 and P+100..P+105 free: `raftlock up` takes
# P..P+2 (+100), the embedded example's cluster P+3..P+5 (+100).
base=$(python3 - <<'PY'
import random, socket
# Below the kernel's ephemeral range: a member's outgoing connection must
# not take a port another member is about to listen on.
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
for _ in range(200):
    p = random.randrange(10000, max(10001, low - 310))
    try:
        socks = []
        for o in (0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105, 200, 201, 202, 203, 204, 205, 300, 301, 302):
            s = socket.socket(); s.bind(("127.0.0.1", p + o)); socks.append(s)
        print(p); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PY
)
data=$(mktemp -d)
log="$data/up.log"
cargo build --locked -q -p raftlock-cli
pids=()
trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$data"' EXIT

echo "== example: embedded"
mkdir "$data/embedded"
{
    echo '[cluster]'
    echo 'data_dir = "data"'
    for id in 1 2 3; do
        echo '[[members]]'
        echo "id = $id"
        echo "api_addr = \"127.0.0.1:$((base + 2 + id))\""
        echo "raft_addr = \"127.0.0.1:$((base + 102 + id))\""
    done
} > "$data/embedded/cluster.toml"
for id in 1 2; do
    target/debug/raftlock serve --config "$data/embedded/cluster.toml" --id $id \
        > "$data/embedded/serve-$id.log" 2>&1 &
    pids+=($!)
done
cargo run --locked -q -p raftlock-client --example embedded -- "$data/embedded/cluster.toml" 3 ||
    { tail -n 20 "$data"/embedded/serve-*.log; exit 1; }
for p in "${pids[@]}"; do kill -INT "$p"; wait "$p" || true; done
pids=()

target/debug/raftlock up --base-port "$base" --data-dir "$data/cluster" > "$log" 2>&1 &
up=$!
pids+=($up)
for _ in $(seq 1 300); do
    grep -q "cluster ready" "$log" && break
    kill -0 $up 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
grep -q "cluster ready" "$log" || { echo "raftlock up did not become ready"; cat "$log"; exit 1; }
echo "== example: http_lock"
RAFTLOCK_ENDPOINTS="http://127.0.0.1:$base,http://127.0.0.1:$((base+1)),http://127.0.0.1:$((base+2))" \
    cargo run --locked -q -p raftlock-client --example http_lock
