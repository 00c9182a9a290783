#!/usr/bin/env bash
# Runs docs/api.md's curl examples (the blocks between `<!-- example -->`
# and `<!-- /example -->`) against a `raftlock up` cluster on free
# loopback ports, each block in its own bash with `set -euo pipefail` and
# RL set to the first member's URL: a block fails if a command does
# (`curl -f`, `grep`, `jq -e`). Called by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# A base port P with P..P+2 and P+100..P+102 free (`raftlock up`).
base=$(python3 - <<'PY'
import random, socket
# Below the kernel's ephemeral range: a member's outgoing connection must
# not take a port another member is about to listen on.
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
for _ in range(200):
    p = random.randrange(10000, max(10001, low - 210))
    socks = []
    try:
        for o in (0, 1, 2, 100, 101, 102, 200, 201, 202):
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
# The examples use jq as readers would; a fresh CI machine may lack it,
# so provide the little they use (`-r .field`, `-e EXPR`) through python3.
if ! command -v jq >/dev/null; then
    mkdir "$data/bin"
    cat > "$data/bin/jq" <<'PY'
#!/usr/bin/env python3
"""The jq subset docs/api.md's examples use: -r .a.b, and -e with
`.path | length == n`, `.path == value`, `A and B`."""
import json, re, sys
args = sys.argv[1:]
flag, expr = args[0], args[1]
doc = json.load(sys.stdin)
def path(p, v):
    for part in re.findall(r"\.([A-Za-z_]+)|\[(\d+)\]", p):
        v = v[part[0]] if part[0] else v[int(part[1])]
    return v
def test(e):
    e = e.replace("(", "").replace(")", "").strip()
    if " and " in e:
        return all(test(x) for x in e.split(" and "))
    left, right = [x.strip() for x in e.split("==")]
    length = left.endswith("| length")
    value = path(left.removesuffix("| length").strip(), doc)
    value = len(value) if length else value
    return value == json.loads(right)
if flag == "-r":
    print(path(expr, doc))
else:
    ok = test(expr)
    print("true" if ok else "false")
    sys.exit(0 if ok else 1)
PY
    chmod +x "$data/bin/jq"
    export PATH="$data/bin:$PATH"
fi
up=
trap '[ -n "$up" ] && { kill -INT "$up" 2>/dev/null; wait "$up" 2>/dev/null; }; rm -rf "$data"' EXIT
target/debug/raftlock up --base-port "$base" --data-dir "$data/cluster" > "$log" 2>&1 &
up=$!
for _ in $(seq 1 300); do
    grep -q "cluster ready" "$log" && break
    kill -0 $up 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
grep -q "cluster ready" "$log" || { echo "raftlock up did not become ready"; cat "$log"; exit 1; }

export RL="http://127.0.0.1:$base"
python3 - docs/api.md "$data" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"<!-- example -->\n```sh\n(.*?)```\n<!-- /example -->", text, re.S)
if not blocks:
    sys.exit("no examples found in docs/api.md")
for i, block in enumerate(blocks):
    open(f"{sys.argv[2]}/example-{i}.sh", "w").write(block)
PY
n=0
for example in "$data"/example-*.sh; do
    n=$((n + 1))
    echo "== docs/api.md example $n"
    bash -euo pipefail -x "$example" > "$data/out" 2>&1 || { cat "$data/out"; exit 1; }
done
echo "ran $n docs/api.md examples"
