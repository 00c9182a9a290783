#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (not in CI: CI replays the
# corpus through `cargo test -p raftlock-fuzz-cases`).
#
#   fuzz/run.sh [seconds per target, default 60] [target ...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly compiler; on
# stable, RUSTC_BOOTSTRAP=1 (set below) lets libFuzzer's flags through.
# New interesting inputs land in fuzz/corpus/<target>/, crashes in
# fuzz/artifacts/<target>/. Before committing, shrink the corpus:
#   RUSTC_BOOTSTRAP=1 cargo fuzz cmin <target>
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -O
status=0
mkdir -p target
for target in "${targets[@]}"; do
    echo "== $target: ${seconds}s"
    log="target/run-$target.log"
    # Inputs up to 64 KiB; 2 GiB of RSS at most (a decoder that allocates
    # what a length prefix claims is a finding too); 10 s per input.
    if cargo fuzz run -O "$target" -- \
        -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 >"$log" 2>&1; then
        grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "$log" || true
    else
        grep -E "^(==|SUMMARY|artifact_prefix|Test unit)|panicked" "$log" || tail -20 "$log"
        echo "!! $target found a crash: see fuzz/artifacts/$target/ and $log"
        status=1
    fi
done
exit $status
