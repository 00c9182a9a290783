//! What /proc says about the servers, the bench itself and the machine:
//! resident memory (VmRSS), CPU time (utime+stime) and the whole machine's
//! busy time, so every measurement can say how much CPU *other* processes
//! took meanwhile (this machine is shared).

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Linux reports CPU times in USER_HZ ticks, 100 per second on every
/// architecture we run on.
pub const TICKS_PER_SEC: f64 = 100.0;

/// VmRSS of a process in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// utime+stime of a process (all its threads), in ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&text)
}

fn parse_stat_cpu(text: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces; fields after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Busy ticks of the whole machine (all CPUs): everything but idle and iowait.
pub fn machine_busy_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice
    let steal = *v.get(7).unwrap_or(&0);
    let busy = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)? + steal;
    Some((busy, steal))
}

/// CPU time of a JVM's JIT compiler threads (`C1 CompilerThre…`,
/// `C2 CompilerThre…`), in ticks; 0 for a process that has none.
pub fn jit_ticks(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter(|stat| {
            let name = stat
                .split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'))
                .map_or("", |(name, _)| name);
            name.contains("CompilerThre")
        })
        .filter_map(|stat| parse_stat_cpu(&stat))
        .sum()
}

/// The 1-minute load average.
pub fn loadavg1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Sum of RSS over these processes (missing ones count 0).
pub fn rss_each(pids: &[u32]) -> Vec<u64> {
    pids.iter().map(|&p| rss_bytes(p).unwrap_or(0)).collect()
}

/// A point in time for CPU accounting.
#[derive(Clone)]
pub struct CpuSample {
    at: Instant,
    servers: Vec<u64>,
    bench: u64,
    machine: u64,
    steal: u64,
}

impl CpuSample {
    pub fn take(pids: &[u32]) -> Self {
        let machine = machine_busy_ticks().unwrap_or((0, 0));
        Self {
            at: Instant::now(),
            servers: pids.iter().map(|&p| cpu_ticks(p).unwrap_or(0)).collect(),
            bench: cpu_ticks(std::process::id()).unwrap_or(0),
            machine: machine.0,
            steal: machine.1,
        }
    }

    /// CPU used between `self` and a later sample of the same processes.
    pub fn until(&self, later: &CpuSample) -> CpuUsage {
        let sec = |t: u64| t as f64 / TICKS_PER_SEC;
        let per_server: Vec<f64> = self
            .servers
            .iter()
            .zip(&later.servers)
            .map(|(a, b)| sec(b.saturating_sub(*a)))
            .collect();
        let servers: f64 = per_server.iter().sum();
        let bench = sec(later.bench.saturating_sub(self.bench));
        let machine = sec(later.machine.saturating_sub(self.machine));
        CpuUsage {
            wall_s: later.at.duration_since(self.at).as_secs_f64(),
            servers_s: servers,
            per_server_s: per_server,
            bench_s: bench,
            other_s: (machine - servers - bench).max(0.0),
            steal_s: sec(later.steal.saturating_sub(self.steal)),
        }
    }
}

/// CPU seconds used in a window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CpuUsage {
    pub wall_s: f64,
    /// All server members together.
    pub servers_s: f64,
    pub per_server_s: Vec<f64>,
    /// This load generator.
    pub bench_s: f64,
    /// CPU the measured processes could not have: every other process on
    /// the machine (other people's builds), and time the hypervisor gave
    /// to other machines (steal, also in `steal_s`): noise.
    pub other_s: f64,
    /// Of `other_s`, the hypervisor's steal time.
    #[serde(default)]
    pub steal_s: f64,
}

impl CpuUsage {
    /// All members' CPU per operation, in microseconds (NaN for none).
    pub fn per_op_us(&self, ops: u64) -> f64 {
        if ops == 0 {
            f64::NAN
        } else {
            self.servers_s * 1e6 / ops as f64
        }
    }

    /// Other processes' CPU as a number of busy cores.
    pub fn other_cores(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.other_s / self.wall_s
        } else {
            0.0
        }
    }
}

/// This process's soft limit on open files.
pub fn fd_limit() -> Option<usize> {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _)| usize::try_from(soft).unwrap_or(usize::MAX))
}

/// How many local ports `net.ipv4.ip_local_port_range` gives a connect
/// towards one address and port.
pub fn ephemeral_ports() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<usize>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    Some(hi.saturating_sub(lo) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_in_name() {
        let line = "42 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu(line), Some(333));
    }

    #[test]
    fn cpu_per_operation() {
        let u = CpuUsage {
            servers_s: 0.5,
            ..Default::default()
        };
        assert!((u.per_op_us(1000) - 500.0).abs() < 1e-9);
        assert!(u.per_op_us(0).is_nan());
    }

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        assert!(rss_bytes(me).is_some_and(|r| r > 0));
        assert!(cpu_ticks(me).is_some());
        assert!(machine_busy_ticks().is_some());
    }
}
