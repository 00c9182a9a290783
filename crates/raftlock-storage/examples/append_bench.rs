//! Per-append latency of `SledLogStore`: the time from `append` to
//! openraft's durability callback, for several batch sizes and both
//! durability modes, next to the raw `fdatasync` latency of the same disk.
//!
//! ```text
//! cargo run --release -p raftlock-storage --example append_bench
//! cargo run --release -p raftlock-storage --example append_bench -- \
//!     --dir /mnt/disk/bench --mode fsync --batch 16 --appends 3 --verbose
//! ```
//!
//! Options: `--dir PATH` (default: the system temp dir; the file system
//! measured is the one holding it), `--mode fsync|flush` and `--batch N`
//! (default: all of fsync/flush × 1/16/256), `--appends N` (per
//! configuration, default 1000), `--entry-bytes N` (payload per entry,
//! default 100), `--verbose` (a marker line on stderr around each append, to
//! line up with `strace` output).

use std::io::Cursor;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorageExt;
use openraft::{Entry, EntryPayload};
use raftlock_storage::{Durability, SledLogConfig, SledLogStore};

openraft::declare_raft_types!(BenchConfig);

struct Args {
    /// Parent directory of the benchmark databases.
    dir: PathBuf,
    modes: Vec<Durability>,
    batches: Vec<u64>,
    appends: u64,
    entry_bytes: usize,
    verbose: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        dir: std::env::temp_dir(),
        modes: vec![Durability::Fsync, Durability::FlushOnly],
        batches: vec![1, 16, 256],
        appends: 1000,
        entry_bytes: 100,
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => args.dir = value()?.into(),
            "--mode" => {
                args.modes = vec![match value()?.as_str() {
                    "fsync" => Durability::Fsync,
                    "flush" => Durability::FlushOnly,
                    other => return Err(format!("--mode fsync|flush, not {other}")),
                }]
            }
            "--batch" => {
                args.batches = vec![value()?.parse().map_err(|e| format!("--batch: {e}"))?]
            }
            "--appends" => {
                args.appends = value()?.parse().map_err(|e| format!("--appends: {e}"))?
            }
            "--entry-bytes" => {
                args.entry_bytes = value()?
                    .parse()
                    .map_err(|e| format!("--entry-bytes: {e}"))?
            }
            "--verbose" => args.verbose = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.appends == 0 {
        return Err("--appends must be at least 1".into());
    }
    Ok(args)
}

/// `p`-th percentile (0..=100) of sorted, non-empty samples.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Baseline of the disk under `parent`: one 4 KiB `pwrite` into an existing
/// file followed by `fdatasync`, the floor of any durable append.
fn fdatasync_probe(parent: &Path, samples: u64) -> anyhow::Result<Vec<Duration>> {
    let dir = tempfile::Builder::new()
        .prefix("fsync-probe-")
        .tempdir_in(parent)?;
    let file = std::fs::File::create(dir.path().join("probe"))?;
    let block = [0x5au8; 4096];
    // Preallocated, so the probe measures data syncs, not file growth.
    for i in 0..64 {
        file.write_all_at(&block, i * 4096)?;
    }
    file.sync_all()?;
    let mut lat = Vec::with_capacity(samples as usize);
    for i in 0..samples {
        file.write_all_at(&block, (i % 64) * 4096)?;
        let t = Instant::now();
        file.sync_data()?;
        lat.push(t.elapsed());
    }
    lat.sort();
    Ok(lat)
}

async fn run_one(args: &Args, mode: Durability, batch: u64) -> anyhow::Result<()> {
    // A fresh database per configuration, so sizes do not carry over.
    let dir = tempfile::Builder::new()
        .prefix("append-bench-")
        .tempdir_in(&args.dir)?;
    let config = SledLogConfig::new(dir.path()).with_durability(mode);
    let mut store = SledLogStore::<BenchConfig>::open(&config)?;
    let payload = "x".repeat(args.entry_bytes);

    let mut latencies = Vec::with_capacity(args.appends as usize);
    let started = Instant::now();
    let mut next_index = 1;
    for n in 0..args.appends {
        let entries: Vec<Entry<BenchConfig>> = (next_index..next_index + batch)
            .map(|index| Entry {
                log_id: openraft::testing::log_id(1, 0, index),
                payload: EntryPayload::Normal(payload.clone()),
            })
            .collect();
        next_index += batch;
        if args.verbose {
            eprintln!("--- append {n}: {batch} entries, begin");
        }
        let t = Instant::now();
        store.blocking_append(entries).await?;
        latencies.push(t.elapsed());
        if args.verbose {
            eprintln!("--- append {n}: acknowledged");
        }
    }
    let total = started.elapsed();
    latencies.sort();
    println!(
        "{:<9} {:>5} {:>7} {:>9.0} {:>9.0} {:>9.0} {:>11.0} {:>8}",
        format!("{mode:?}"),
        batch,
        args.appends,
        micros(percentile(&latencies, 50)),
        micros(percentile(&latencies, 99)),
        micros(percentile(&latencies, 100)),
        (args.appends * batch) as f64 / total.as_secs_f64(),
        store.sync_stats().barriers,
    );
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = parse_args().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&args.dir)?;

    let probe = fdatasync_probe(&args.dir, 500)?;
    println!(
        "disk baseline in {}: pwrite 4 KiB + fdatasync p50 {:.0} µs, p99 {:.0} µs",
        args.dir.display(),
        micros(percentile(&probe, 50)),
        micros(percentile(&probe, 99)),
    );
    println!(
        "entry payload {} B; latency = append() until the durability callback",
        args.entry_bytes
    );
    println!(
        "{:<9} {:>5} {:>7} {:>9} {:>9} {:>9} {:>11} {:>8}",
        "mode", "batch", "appends", "p50 µs", "p99 µs", "max µs", "entries/s", "barriers"
    );
    for &mode in &args.modes {
        for &batch in &args.batches {
            run_one(&args, mode, batch).await?;
        }
    }
    Ok(())
}
