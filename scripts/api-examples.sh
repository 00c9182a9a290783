#!/usr/bin/env bash
# Runs docs/api.md's curl examples against a `raftlock up` cluster on free
# loopback ports. An example is a ```sh block between
# `<!-- example: NAME -->` and `<!-- /example -->`; it runs under
# `bash -euo pipefail` with `$API` set to a member's address, so a
# failing `curl -f` or `jq -e` fails CI. Needs curl and jq.
# Called by .ci/run after the tests (the binaries are built by then).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null && command -v jq >/dev/null ||
    { echo "api-examples: curl and jq are needed"; exit 1; }

# A base port P with P..P+2 and P+100..P+102 free (`raftlock up`'s ports).
base=$(python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 60000)
    socks = []
    try:
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
up=""
trap '[ -n "$up" ] && { kill -INT "$up" 2>/dev/null; wait "$up" 2>/dev/null; }; rm -rf "$data"' EXIT
target/debug/raftlock up --base-port "$base" --data-dir "$data/cluster" > "$log" 2>&1 &
up=$!
for _ in $(seq 1 300); do
    grep -q "cluster ready" "$log" && break
    kill -0 "$up" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
grep -q "cluster ready" "$log" || { echo "raftlock up did not become ready"; cat "$log"; exit 1; }

# One file per example, named after it.
mkdir "$data/examples"
awk -v dir="$data/examples" '
    /^<!-- example: / { name = $3; n++; file = sprintf("%s/%02d-%s.sh", dir, n, name); next }
    /^<!-- \/example -->/ { file = ""; next }
    file != "" && !/^```/ { print > file }
' docs/api.md
count=$(ls "$data/examples" | wc -l)
[ "$count" -gt 0 ] || { echo "no examples found in docs/api.md"; exit 1; }
for example in "$data"/examples/*.sh; do
    echo "== docs/api.md example: $(basename "$example" .sh)"
    API="http://127.0.0.1:$base" bash -euo pipefail "$example" > "$data/out" 2>&1 ||
        { cat "$data/out"; echo "example failed: $(basename "$example")"; exit 1; }
done
echo "$count docs/api.md examples passed"
