//! The machine a run was measured on: cores, CPU model, memory, kernel,
//! the filesystem under the data directories, and its fsync latency
//! (a loop of 4 KiB append + fsync, which is what every WAL here does).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::stats::Latency;

/// fsync probes in the loop.
const FSYNC_ROUNDS: u32 = 300;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub mem_total_gib: f64,
    pub kernel: String,
    /// Filesystem type and device under the data directories.
    pub filesystem: String,
    pub fsync_p50_ms: f64,
    pub fsync_p99_ms: f64,
    pub fsync_mean_ms: f64,
    pub loadavg_start: f64,
    pub loadavg_end: f64,
}

pub fn describe(dir: &Path) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: f64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let fsync = fsync_latency(dir).unwrap_or_default();
    Machine {
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        mem_total_gib: mem_kb / 1024.0 / 1024.0,
        kernel,
        filesystem: filesystem_of(dir),
        fsync_p50_ms: fsync.p50_ms,
        fsync_p99_ms: fsync.p99_ms,
        fsync_mean_ms: fsync.mean_ms,
        loadavg_start: crate::procfs::loadavg1(),
        loadavg_end: f64::NAN,
    }
}

/// Appends 4 KiB and fsyncs, `FSYNC_ROUNDS` times, in `dir`.
pub fn fsync_latency(dir: &Path) -> std::io::Result<crate::stats::LatencySummary> {
    let path = dir.join("fsync-probe.dat");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let block = [0x5au8; 4096];
    let mut lat = Latency::new();
    for _ in 0..FSYNC_ROUNDS {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_all()?;
        lat.record(t.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(lat.summary())
}

/// "ext4 on /dev/vda" for the mount holding `dir` (longest mount point prefix).
fn filesystem_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        if dir.starts_with(f[1]) && best.as_ref().is_none_or(|(n, _)| f[1].len() > *n) {
            best = Some((
                f[1].len(),
                format!("{} on {} (mounted at {})", f[2], f[0], f[1]),
            ));
        }
    }
    best.map(|(_, s)| s).unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_machine() {
        let dir = std::env::temp_dir();
        assert!(filesystem_of(&dir).contains(" on "));
        let m = Machine {
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            ..Default::default()
        };
        assert!(m.nproc > 0);
    }
}
