#!/usr/bin/env bash
# The deterministic simulator's CI budget (docs/testing.md, ADR 0026):
#  1. a fixed budget of seeds under every fault (register and lock
#     clients), split over two processes, every one of which must pass
#     (runs and faults counted and printed);
#  2. a few seeds run twice, their history hashes compared;
#  3. each injected defect, built behind its feature, caught within its
#     stated number of seeds.
# Exits non-zero if any seed of the budget fails, a hash differs, or a
# defect goes uncaught. Debug build, as `cargo test --workspace` leaves it.
#
#   SIM_SEEDS=500 scripts/sim-check.sh   # the budget (default 500)
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS=${SIM_SEEDS:-500}
JOBS=2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() {
    # $1: features ("" for none); the binary is copied out, as the next
    # build with other features overwrites it.
    local features=$1 name=${1:-plain}
    if [ -n "$features" ]; then
        cargo build --locked -q -p raftlock-sim --bin raftlock-sim --features "$features"
    else
        cargo build --locked -q -p raftlock-sim --bin raftlock-sim
    fi
    cp target/debug/raftlock-sim "$work/sim-$name"
}

t0=$(date +%s)
build ""
t1=$(date +%s)
echo "sim-check: build $((t1 - t0)) s"

# 1. The budget: seeds 0..SEEDS, each process a contiguous half.
per=$(( (SEEDS + JOBS - 1) / JOBS ))
pids=()
for j in $(seq 0 $((JOBS - 1))); do
    first=$((j * per))
    n=$(( SEEDS - first < per ? SEEDS - first : per ))
    "$work/sim-plain" run --first "$first" --seeds "$n" >"$work/budget-$j.txt" 2>&1 &
    pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
t2=$(date +%s)
runs=$(cat "$work"/budget-*.txt | grep -c '^seed .*: pass' || true)
failed=$(cat "$work"/budget-*.txt | grep -c '^seed .*: FAIL' || true)
faults=$(cat "$work"/budget-*.txt | awk '/^[0-9]+ run\(s\), [0-9]+ failed, [0-9]+ faults/ { n += $5 } END { print n + 0 }')
echo "sim-check: $((runs + failed)) seeded runs (0..$SEEDS), $failed failed, $faults faults, $((t2 - t1)) s on $JOBS processes"
if [ "$fail" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$((runs + failed))" -ne "$SEEDS" ]; then
    grep -h -A30 'FAIL' "$work"/budget-*.txt | grep -E '^seed|invariant|replay|    ' | head -60
    echo "sim-check: the seed budget failed"
    exit 1
fi

# 2. Determinism: the same seeds in another process, the same hashes.
hashes() { grep '^seed ' | sed 's/.*| //'; }
a=$(head -n 20 "$work/budget-0.txt" | hashes)
b=$("$work/sim-plain" run --first 0 --seeds 20 | hashes)
if [ "$a" != "$b" ] || [ "$(echo "$a" | wc -l)" -ne 20 ]; then
    echo "sim-check: seeds 0..20 gave other history hashes in a second process"
    diff <(echo "$a") <(echo "$b") || true
    exit 1
fi
echo "sim-check: seeds 0..20 replayed in a second process: the same 20 history hashes"

# 3. Each injected defect caught within its stated seeds:
#    feature | seeds | run arguments
defects=(
    "inject-stale-read|1|--faults all"
    "inject-ack-before-sync|12|--faults power-loss"
    "inject-keepalive-quorum-off-by-one|3|--faults partition,isolate-leader"
    "inject-follower-ack-before-sync|8|--faults power-loss"
)
for d in "${defects[@]}"; do
    IFS='|' read -r feature within args <<<"$d"
    build "$feature"
    # shellcheck disable=SC2086
    out=$("$work/sim-$feature" run --first 0 --seeds "$within" $args || true)
    caught=$(echo "$out" | grep -c '^seed .*: FAIL' || true)
    first_seed=$(echo "$out" | grep -m1 '^seed .*: FAIL' | sed 's/^seed *\([0-9]*\):.*/\1/')
    if [ "$caught" -eq 0 ]; then
        echo "sim-check: defect $feature NOT caught within $within seed(s) ($args)"
        exit 1
    fi
    echo "sim-check: defect $feature caught by $caught of $within seed(s) ($args), first at seed $first_seed"
done
# Leave the default binary in place for whatever runs next.
cargo build --locked -q -p raftlock-sim --bin raftlock-sim
t3=$(date +%s)
echo "sim-check: done in $((t3 - t0)) s ($((t1 - t0)) s first build, $((t2 - t1)) s budget, $((t3 - t2)) s replay and defects)"
