//! CPU affinity for the full-size overload runs (tests/overload.rs): the
//! members on one core, this test process (the load generator and the
//! lock holder's thread) on the other. Unpinned on a two-core machine the
//! load generator took as much CPU as two members (docs/overload.md), so
//! a member's wait for a CPU mixed the test's load with the product's;
//! pinned, the members' waits are each other's only (and the niced builds
//! of whatever else runs on the machine).
//!
//! A member's own core is set at its spawn by the shared launcher
//! (`raftlock_testkit::process::spawn_pinned`).

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The members' core and the load generator's.
pub const MEMBER_CPU: usize = 0;
pub const LOAD_CPU: usize = 1;

/// The CPUs this thread may run on.
fn allowed() -> Vec<usize> {
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

fn only(cpu: usize) -> Option<CpuSet> {
    let mut set = CpuSet::new();
    set.set(cpu).ok()?;
    Some(set)
}

/// True when this process may use both cores a pinned run needs.
pub fn can_pin() -> bool {
    let cpus = allowed();
    cpus.contains(&MEMBER_CPU) && cpus.contains(&LOAD_CPU)
}

/// Confines every thread of this process to `cpu` (threads started later
/// inherit it from the thread that starts them). Threads that exited
/// meanwhile are skipped.
pub fn pin_process(cpu: usize) -> Result<(), String> {
    let set = only(cpu).ok_or_else(|| format!("CPU {cpu} out of range"))?;
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| e.to_string())?;
    for entry in tasks.filter_map(Result::ok) {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        match sched_setaffinity(Pid::from_raw(tid), &set) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => return Err(format!("sched_setaffinity({tid}): {e}")),
        }
    }
    Ok(())
}

/// Busy and niced time of each CPU so far, in seconds (`/proc/stat`):
/// `(cpu, busy, of which niced)`. Niced time is the other work of the
/// machine (builds run under `nice`), busy includes it.
pub fn cpu_times() -> Vec<(usize, f64, f64)> {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu: usize = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            // user nice system idle iowait irq softirq steal (USER_HZ ticks).
            let v: Vec<f64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
            if v.len() < 8 {
                return None;
            }
            let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
            Some((cpu, busy / 100.0, v[1] / 100.0))
        })
        .collect()
}
