#!/usr/bin/env bash
# The long soak: loops seeds over every workload, client mode
# and nemesis (the disk nemeses `disk-full` and `slow-fsync` included) for a
# fixed time, one run at a time, and keeps the artifacts of every run that
# is not valid. Not part of CI. See jepsen/README.md, "The soak".
#
#   jepsen/soak.sh [--minutes N] [--run-seconds S] [--seed-start K] [--out DIR]
#                  [--no-build] [--keep-all]
#
#   --minutes N       how long to keep starting runs (default 30, or
#                     $SOAK_MINUTES); the run in progress at the deadline
#                     finishes, so the soak ends up to one run later;
#   --run-seconds S   fault phase of each run (default 60);
#   --seed-start K    first seed (default: from the clock, printed);
#   --out DIR         where the soak's runs and summary go (default
#                     jepsen/store/soak-<UTC time>);
#   --no-build        use the binaries already in target/debug;
#   --keep-all        keep every run's directory (default: only runs that
#                     are not valid, exit code != 0, are kept).
#
# Output in DIR: soak.tsv (one line per run: seed, workload, clients,
# nemesis, exit code, ops, faults injected by kind, node restarts, run
# directory), soak.log (every run's one-screen summary) and summary.txt
# (the totals). Exit code: 0 when every run was valid, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${SOAK_MINUTES:-30}"
run_seconds=60
seed=""
out=""
build=1
keep_all=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --run-seconds) run_seconds="$2"; shift 2 ;;
        --seed-start) seed="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --keep-all) keep_all=1; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ -n "$seed" ]] || seed=$(( $(date +%s) % 100000 ))
[[ -n "$out" ]] || out="jepsen/store/soak-$(date -u +%Y%m%dT%H%M%S)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if [[ "$build" == 1 ]]; then
    CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}" cargo build --locked -p raftlock-cli -p raftlock-jepsen
fi
[[ -x target/debug/raftlock-jepsen && -x target/debug/raftlock ]] || {
    echo "target/debug/raftlock and raftlock-jepsen are missing: build them (drop --no-build)" >&2
    exit 2
}
# A copy of both binaries: a rebuild during the soak must not change what
# it tests. The harness runs `raftlock-jepsen member` from its own path.
mkdir -p "$out/bin"
cp target/debug/raftlock target/debug/raftlock-jepsen "$out/bin/"
harness="$out/bin/raftlock-jepsen"
echo "soak: binaries of $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)')" > "$out/soak.log"

# What the soak cycles through: workload, client mode, nemesis. `all` is
# every network and process fault against `raftlock serve`; the rows with
# `disk` run `raftlock-jepsen member` processes, which carry the disk
# fault hooks (jepsen/src/member/fault.rs); `disk-fill` (a real full
# tmpfs under a member) joins them when the soak runs as root.
if [[ "$(id -u)" == 0 ]]; then fill=",disk-fill"; else fill=""; fi
combos=(
    "mutex sticky all"
    "register sticky all,disk$fill"
    "fenced sticky all"
    "mutex embedded disk,kill,pause,partition,client-pause"
    "register random all"
    "fenced sticky all,disk"
    "mutex random all,disk$fill"
    "register sticky disk"
    "fenced embedded all"
    "mutex sticky disk$fill"
    "register sticky all"
    "fenced random all,disk"
    "rwlock embedded kill,pause,partition,client-pause"
    "semaphore sticky all,disk"
    "lock-delay embedded disk$fill,kill,pause,partition,client-pause"
    "multilock sticky all,disk$fill"
)

printf 'run\tseed\tworkload\tclients\tnemesis\texit\tops\tfaults\tdisk_full\tslow_fsync\tdisk_fill\tkills\tpauses\tpartitions\tmembership\trestarts\tseconds\tverdict\tdir\n' > "$out/soak.tsv"
echo "soak: $minutes min of ${run_seconds}s runs from seed $seed into $out" | tee -a "$out/soak.log"
deadline=$(( $(date +%s) + minutes * 60 ))
run=0
failed=0
while (( $(date +%s) < deadline )); do
    read -r workload clients nemesis <<< "${combos[run % ${#combos[@]}]}"
    run=$(( run + 1 ))
    started=$(date +%s)
    set +e
    text=$("$harness" test --workload "$workload" --clients "$clients" --nemesis "$nemesis" \
        --time-limit "$run_seconds" --concurrency 10 --seed "$seed" --store "$out/runs" \
        --raftlock-bin "$out/bin/raftlock" 2>&1)
    code=$?
    set -e
    secs=$(( $(date +%s) - started ))
    printf '\n===== run %d: %s %s %s seed %d: exit %d (%d s)\n%s\n' \
        "$run" "$workload" "$clients" "$nemesis" "$seed" "$code" "$secs" "$text" >> "$out/soak.log"
    dir=$(sed -n 's/^report: \(.*\)\/timeline.html$/\1/p' <<< "$text" | tail -n1)
    ops=$(sed -n 's/^[0-9]* events, \([0-9]*\) operations.*/\1/p' <<< "$text" | head -n1)
    faults=$(sed -n 's/.*faults injected: \([0-9]*\).*/\1/p' <<< "$text" | head -n1)
    restarts=$(sed -n 's/.*node restarts: \([0-9]*\).*/\1/p' <<< "$text" | head -n1)
    # Fault kinds, from the history's nemesis start events.
    count() {
        [[ -n "$dir" && -f "$dir/history.jsonl" ]] || { echo 0; return; }
        grep '"process":"nemesis"' "$dir/history.jsonl" | grep '"f":"start"' \
            | grep -cE "\"value\":\"($1)" || true
    }
    case "$code" in
        0) verdict=valid ;;
        1) verdict=INVALID ;;
        3) verdict=unknown ;;
        *) verdict="error($code)" ;;
    esac
    printf '%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n' \
        "$run" "$seed" "$workload" "$clients" "$nemesis" "$code" "${ops:-0}" "${faults:-0}" \
        "$(count 'disk-full')" "$(count 'slow-fsync')" "$(count 'disk-fill')" "$(count 'kill')" \
        "$(count 'pause')" "$(count 'partition|isolate-leader')" "$(count 'membership')" \
        "${restarts:-0}" "$secs" "$verdict" "${dir:-none}" >> "$out/soak.tsv"
    echo "run $run: $workload $clients $nemesis seed $seed: $verdict, ${ops:-0} ops, ${faults:-0} faults, ${secs} s"
    if [[ "$code" != 0 ]]; then
        failed=$(( failed + 1 ))
        echo "$run seed $seed $workload $clients $nemesis: exit $code, kept in ${dir:-"(no run directory; see soak.log)"}" >> "$out/failures.txt"
    elif [[ "$keep_all" == 0 && -n "$dir" && -d "$dir" ]]; then
        rm -rf "$dir"
    fi
    seed=$(( seed + 1 ))
done

# Totals over soak.tsv.
awk -F'\t' 'NR > 1 {
        runs++; ops += $7; faults += $8; df += $9; sf += $10; k += $11; p += $12;
        part += $13; m += $14; r += $15; secs += $16; v[$17]++
    }
    END {
        printf "runs %d (%.1f min), ops %d, faults %d: disk-full %d, slow-fsync %d, kill %d, pause %d, partition %d, membership %d; node restarts %d\n",
            runs, secs / 60, ops, faults, df, sf, k, p, part, m, r;
        printf "verdicts:"; for (x in v) printf " %s %d", x, v[x]; printf "\n"
    }' "$out/soak.tsv" | tee "$out/summary.txt"
if [[ "$failed" -gt 0 ]]; then
    echo "$failed run(s) not valid: see $out/failures.txt" | tee -a "$out/summary.txt"
    exit 1
fi
