#!/usr/bin/env bash
# Runs the README's Rust examples: the embedded three-node example, and the
# HTTP example against a `raftlock up` cluster on free loopback ports.
# Called by .ci/run after the tests (the binaries are built by then).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== example: embedded"
cargo run --locked -q -p raftlock-client --example embedded

# A base port P with P..P+2 and P+100..P+102 free (`raftlock up` layout).
base=$(python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 60000)
    try:
        socks = []
        for o in (0, 1, 2, 100, 101, 102):
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
target/debug/raftlock up --base-port "$base" --data-dir "$data/cluster" > "$log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 300); do
    grep -q "cluster ready" "$log" && break
    kill -0 $up 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
grep -q "cluster ready" "$log" || { echo "raftlock up did not become ready"; cat "$log"; exit 1; }
echo "== example: http_lock"
RAFTLOCK_ENDPOINTS="http://127.0.0.1:$base,http://127.0.0.1:$((base+1)),http://127.0.0.1:$((base+2))" \
    cargo run --locked -q -p raftlock-client --example http_lock
