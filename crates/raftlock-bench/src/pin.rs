//! CPU affinity for the pinned runs: every member of the cluster on one
//! core, the load generator on another, so the figures say what one
//! server core does (the servers cannot borrow the load generator's core,
//! nor it theirs). Members get their set at exec (`Cluster`); the bench
//! moves all of its own threads.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Context};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// Which runs of the latency workloads to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PinMode {
    /// Unpinned only.
    Off,
    /// Pinned only.
    On,
    /// Unpinned, then pinned.
    Both,
}

impl PinMode {
    /// The `pinned` flags to run, in order.
    pub fn runs(self) -> &'static [bool] {
        match self {
            PinMode::Off => &[false],
            PinMode::On => &[true],
            PinMode::Both => &[false, true],
        }
    }
}

/// The servers' core and the load generator's.
pub const SERVER_CPU: usize = 0;
pub const BENCH_CPU: usize = 1;

/// `None` for an empty list (no restriction).
pub fn cpu_set(cpus: &[usize]) -> anyhow::Result<Option<CpuSet>> {
    if cpus.is_empty() {
        return Ok(None);
    }
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .with_context(|| format!("CPU {c} out of range"))?;
    }
    Ok(Some(set))
}

/// The CPUs this process could use when it started (before any pinning
/// of ours; an outer `taskset` is respected): what "unpinned" restores.
pub fn all_cpus() -> Vec<usize> {
    static AT_START: OnceLock<Vec<usize>> = OnceLock::new();
    AT_START
        .get_or_init(|| {
            let set = sched_getaffinity(Pid::from_raw(0)).ok();
            let cpus: Vec<usize> = (0..CpuSet::count())
                .filter(|&c| set.as_ref().is_some_and(|s| s.is_set(c).unwrap_or(false)))
                .collect();
            if cpus.is_empty() {
                vec![0]
            } else {
                cpus
            }
        })
        .clone()
}

/// Confines every thread of this process to `cpus` (threads started
/// later inherit it from the thread that starts them).
pub fn pin_self(cpus: &[usize]) -> anyhow::Result<()> {
    let Some(set) = cpu_set(cpus)? else {
        return Ok(());
    };
    let tasks = Path::new("/proc/self/task");
    let entries =
        std::fs::read_dir(tasks).with_context(|| format!("cannot list {}", tasks.display()))?;
    for e in entries.filter_map(Result::ok) {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else {
            continue;
        };
        // A thread that just exited is fine to miss.
        if let Err(err) = sched_setaffinity(Pid::from_raw(tid), &set) {
            if err != nix::errno::Errno::ESRCH {
                bail!("sched_setaffinity({tid}): {err}");
            }
        }
    }
    Ok(())
}

/// Does this process have the two cores a pinned run needs?
pub fn can_pin() -> bool {
    let cpus = all_cpus();
    cpus.contains(&SERVER_CPU) && cpus.contains(&BENCH_CPU)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affinity_of_self() -> CpuSet {
        nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap_or_else(|_| CpuSet::new())
    }

    #[test]
    fn pinning_moves_every_thread_and_back() {
        if !can_pin() {
            return;
        }
        let before = affinity_of_self();
        let _ = all_cpus();
        // A thread that exists before the call and reads its set after.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = wait.recv();
            affinity_of_self()
        });
        assert!(pin_self(&[BENCH_CPU]).is_ok());
        let _ = go.send(());
        let mine = affinity_of_self();
        let theirs = other.join().unwrap_or_else(|_| CpuSet::new());
        for set in [mine, theirs] {
            assert_eq!(set.is_set(BENCH_CPU), Ok(true));
            assert_eq!(set.is_set(SERVER_CPU), Ok(false));
        }
        assert!(pin_self(&all_cpus()).is_ok());
        assert_eq!(
            affinity_of_self().is_set(SERVER_CPU),
            before.is_set(SERVER_CPU)
        );
    }
}
