#!/usr/bin/env bash
# Interleaved A/B of raftlock builds: the same load generator runs each
# build's three-member cluster in turn, round after round, the order
# rotating every round (A B C, B C A, C A B, ...), so a drift of the
# machine's speed falls on every build alike. Prints, per figure, each
# build's median and the ratio of every build to the first, round by
# round (median and range). How docs/benchmarks.md's "Levers tried"
# figures were made. Not part of CI.
#
#   bench/ab.sh ROUNDS OUT_DIR BIN_A BIN_B [BIN_C ...] [-- raftlock-bench compare flags]
#
#   # the default: 5 rounds of the uncontended loop at 1 and 64 clients,
#   # puts at 64 clients and 10,000 idle sessions, servers pinned to CPU 0
#   bench/ab.sh 5 /tmp/ab /tmp/raftlock-main target/release/raftlock
#
#   bench/ab.sh --summary OUT_DIR     # print the table of an earlier run again
#
# Each BIN is a `raftlock` release binary (copy it aside before building
# the next one). Wants a quiet machine: run nothing else meanwhile (the
# report's `others` column in each run's results.json says how busy it was).
set -euo pipefail

bench=${RAFTLOCK_BENCH:-target/release/raftlock-bench}
here=$(cd "$(dirname "$0")" && pwd)

summary() {
    python3 - "$1" <<'EOF'
import collections, glob, json, os, statistics, sys

root = sys.argv[1]
labels = [l.strip() for l in open(os.path.join(root, "labels"))]
figures = collections.OrderedDict()  # name -> label -> round -> value


def put(name, label, rnd, value):
    figures.setdefault(name, {}).setdefault(label, {})[rnd] = value


for d in sorted(glob.glob(os.path.join(root, "r*-*"))):
    rnd, label = os.path.basename(d).split("-", 1)
    try:
        with open(os.path.join(d, "results.json")) as f:
            system = json.load(f)["systems"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"{d}: no results ({e})", file=sys.stderr)
        continue
    for u in system.get("uncontended", []):
        c = u["clients"]
        put(f"lock cycles/s, {c} clients", label, rnd, u["cycles_per_sec"])
        put(f"server CPU µs per cycle, {c} clients", label, rnd, u["server_cpu_us_per_cycle"])
        put(f"acquire p50 ms, {c} clients", label, rnd, u["acquire"]["p50_ms"])
    for p in system.get("put", []):
        c = p["clients"]
        put(f"puts/s, {c} clients", label, rnd, p["puts_per_sec"])
        put(f"server CPU µs per put, {c} clients", label, rnd, p["server_cpu_us_per_put"])
    for s in system.get("sessions", []):
        put(f"RSS bytes per session, {s['sessions']}", label, rnd, s["rss_per_session_bytes"])

base = labels[0]
head = "| figure | " + " | ".join(f"{l} median" for l in labels)
head += "".join(f" | {l} ÷ {base} (median, range)" for l in labels[1:]) + " |"
print(head)
print("|" + "---|" * (1 + 2 * len(labels) - 1))
for name, by_label in figures.items():
    row = [name]
    for l in labels:
        vals = list(by_label.get(l, {}).values())
        row.append(f"{statistics.median(vals):.2f}" if vals else "–")
    for l in labels[1:]:
        ratios = [v / by_label[base][r] for r, v in by_label.get(l, {}).items()
                  if r in by_label.get(base, {}) and by_label[base][r]]
        row.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
                   if ratios else "–")
    print("| " + " | ".join(row) + " |")
EOF
}

if [[ ${1:-} == --summary ]]; then
    summary "$2"
    exit 0
fi

if [[ $# -lt 4 ]]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
rounds=$1
out=$2
shift 2
bins=()
while [[ $# -gt 0 && $1 != -- ]]; do
    bins+=("$(realpath "$1")")
    shift
done
[[ ${1:-} == -- ]] && shift
flags=("$@")
if [[ ${#flags[@]} -eq 0 ]]; then
    flags=(--pin on --workloads uncontended,put,sessions --clients 1,64 --put-clients 64
        --uncontended-secs 6 --put-secs 8 --sessions-window-secs 5)
fi
[[ -x $bench ]] || { echo "no $bench: cargo build --release -p raftlock-bench" >&2; exit 2; }

mkdir -p "$out"
labels=(A B C D E F G H)
: > "$out/labels"
for i in "${!bins[@]}"; do
    echo "${labels[$i]}" >> "$out/labels"
    echo "${labels[$i]} = ${bins[$i]}" | tee -a "$out/builds"
done
n=${#bins[@]}
for round in $(seq 1 "$rounds"); do
    for step in $(seq 0 $((n - 1))); do
        i=$(((step + round) % n))
        dir=$out/r$round-${labels[$i]}
        mkdir -p "$dir"
        echo "$(date -u +%T) round $round of $rounds: ${labels[$i]}"
        "$bench" compare --raftlock-bin "${bins[$i]}" --systems raftlock --runs 1 \
            --no-self-check --out-dir "$dir" --pidfile "$dir/pids" "${flags[@]}" \
            > "$dir/log" 2>&1 || echo "  failed: see $dir/log" >&2
    done
done
summary "$out"
echo "(${here#"$PWD"/}/ab.sh --summary $out prints this again)"
