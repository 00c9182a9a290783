//! The run's check on itself: rows that cannot be trusted fail the run
//! before a ratio is published from them. Per system and row (workload,
//! client count, pinned or not):
//!
//! - **spread**: throughput across runs of the same row must stay within
//!   [`Limits::max_spread`] (max ÷ min); a row that gives 3.6 in one run
//!   and 285 in another measured a stall, not the system;
//! - **CPU spread**: server CPU per operation across runs, likewise;
//! - **CPU in line with the system's other rows**: a lock cycle is two
//!   writes (acquire, release) and at most one read, so its server CPU is
//!   between one and [`Limits::max_cycle_per_put`] times the same
//!   system's CPU per put at the same client count (4.5: etcd's acquire
//!   is a txn, dearer than a put, and gives up to 3.9×); far outside, the
//!   client or the set-up drives the server differently on one row;
//! - **stall**: no single uncontended acquire or release, or put, takes
//!   longer than [`Limits::stall_ms`] (nothing contends for it).
//!
//! CPU checks skip rows whose servers used under [`MIN_CPU_S`] seconds
//! (10 ms ticks make per-operation figures of a short phase noise).

use std::fmt;

use crate::report::{Report, SystemReport};

/// Below this much server CPU in a phase, per-operation CPU is not judged.
pub const MIN_CPU_S: f64 = 1.0;

/// What the check tolerates.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest max ÷ min of a row's throughput (and CPU per operation)
    /// across runs.
    pub max_spread: f64,
    /// Largest lock-cycle CPU ÷ put CPU at the same client count.
    pub max_cycle_per_put: f64,
    /// Smallest lock-cycle CPU ÷ put CPU (a cycle has two writes).
    pub min_cycle_per_put: f64,
    /// Longest single uncontended operation, in ms.
    pub stall_ms: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_spread: 2.0,
            max_cycle_per_put: 4.5,
            min_cycle_per_put: 1.0,
            stall_ms: 2_000.0,
        }
    }
}

/// One row that failed, named as the report names it.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub system: String,
    /// e.g. "uncontended c=1 unpinned".
    pub row: String,
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.system, self.row, self.what)
    }
}

/// One run of one row.
#[derive(Clone, Debug)]
struct Sample {
    rate: f64,
    cpu_us: f64,
    cpu_s: f64,
    max_ms: f64,
    /// Other processes' CPU and steal during the run, in cores.
    other_cores: f64,
}

/// Every run of one row.
struct Row {
    workload: &'static str,
    unit: &'static str,
    clients: usize,
    pinned: bool,
    samples: Vec<Sample>,
}

impl Row {
    fn name(&self) -> String {
        format!(
            "{} c={} {}",
            self.workload,
            self.clients,
            if self.pinned { "pinned" } else { "unpinned" }
        )
    }

    /// Median CPU per operation over the runs that used enough CPU.
    fn median_cpu(&self) -> Option<f64> {
        let mut v: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.cpu_s >= MIN_CPU_S && s.cpu_us.is_finite())
            .map(|s| s.cpu_us)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}

fn push(rows: &mut Vec<Row>, key: (&'static str, &'static str, usize, bool), s: Sample) {
    let (workload, unit, clients, pinned) = key;
    match rows
        .iter_mut()
        .find(|r| r.workload == workload && r.clients == clients && r.pinned == pinned)
    {
        Some(r) => r.samples.push(s),
        None => rows.push(Row {
            workload,
            unit,
            clients,
            pinned,
            samples: vec![s],
        }),
    }
}

fn rows_of(sr: &SystemReport) -> Vec<Row> {
    let mut rows = Vec::new();
    for u in &sr.uncontended {
        let s = Sample {
            rate: u.cycles_per_sec,
            cpu_us: u.server_cpu_us_per_cycle,
            cpu_s: u.cpu.servers_s,
            max_ms: u.acquire.max_ms.max(u.release.max_ms),
            other_cores: u.cpu.other_cores(),
        };
        push(
            &mut rows,
            ("uncontended", "cycles/s", u.clients, u.pinned),
            s,
        );
    }
    for p in &sr.put {
        let s = Sample {
            rate: p.puts_per_sec,
            cpu_us: p.server_cpu_us_per_put,
            cpu_s: p.cpu.servers_s,
            max_ms: p.latency.max_ms,
            other_cores: p.cpu.other_cores(),
        };
        push(&mut rows, ("put", "puts/s", p.clients, p.pinned), s);
    }
    for c in &sr.contended {
        // Waiting for the holder is the workload: no stall limit here.
        let s = Sample {
            rate: c.grants_per_sec,
            cpu_us: c.server_cpu_us_per_grant,
            cpu_s: c.cpu.servers_s,
            max_ms: 0.0,
            other_cores: c.cpu.other_cores(),
        };
        push(&mut rows, ("contended", "grants/s", c.clients, c.pinned), s);
    }
    rows
}

fn spread(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let v: Vec<f64> = values.collect();
    if v.len() < 2 {
        return None;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, hi))
}

/// Every problem in `report` (empty: the run may be published).
pub fn check(report: &Report, limits: &Limits) -> Vec<Problem> {
    report
        .systems
        .iter()
        .flat_map(|sr| check_system(sr, limits))
        .collect()
}

fn check_system(sr: &SystemReport, limits: &Limits) -> Vec<Problem> {
    let rows = rows_of(sr);
    let mut out = Vec::new();
    let mut problem = |row: &Row, what: String| {
        out.push(Problem {
            system: sr.system.clone(),
            row: row.name(),
            what,
        })
    };
    for row in &rows {
        let n = row.samples.len();
        let busiest = row
            .samples
            .iter()
            .map(|s| s.other_cores)
            .fold(0.0, f64::max);
        let why = if busiest > crate::disturbance::DISTURBED_CORES {
            format!(
                "; the machine was busy elsewhere in a run ({busiest:.2} cores of other \
                 processes and steal after re-measuring)"
            )
        } else {
            String::new()
        };
        if let Some((lo, hi)) = spread(row.samples.iter().map(|s| s.rate)) {
            if !(lo > 0.0 && hi / lo <= limits.max_spread) {
                problem(
                    row,
                    format!(
                        "{} ranges {lo:.1}–{hi:.1} over {n} runs ({}; limit {:.1}×): \
                         a stall or a disturbance, not a measurement{why}",
                        row.unit,
                        ratio_text(lo, hi),
                        limits.max_spread
                    ),
                );
            }
        }
        let judged = row
            .samples
            .iter()
            .filter(|s| s.cpu_s >= MIN_CPU_S && s.cpu_us.is_finite());
        if let Some((lo, hi)) = spread(judged.map(|s| s.cpu_us)) {
            if !(lo > 0.0 && hi / lo <= limits.max_spread) {
                problem(
                    row,
                    format!(
                        "server CPU per operation ranges {lo:.0}–{hi:.0} µs across runs \
                         ({}; limit {:.1}×){why}",
                        ratio_text(lo, hi),
                        limits.max_spread
                    ),
                );
            }
        }
        if let Some(worst) = row
            .samples
            .iter()
            .map(|s| s.max_ms)
            .max_by(f64::total_cmp)
            .filter(|&m| m > limits.stall_ms)
        {
            problem(
                row,
                format!(
                    "one operation took {:.1} s with nothing contending for it \
                     (limit {:.1} s): a stall",
                    worst / 1000.0,
                    limits.stall_ms / 1000.0
                ),
            );
        }
    }
    for cycle in rows.iter().filter(|r| r.workload == "uncontended") {
        let Some(put) = rows.iter().find(|r| {
            r.workload == "put" && r.clients == cycle.clients && r.pinned == cycle.pinned
        }) else {
            continue;
        };
        let (Some(c), Some(p)) = (cycle.median_cpu(), put.median_cpu()) else {
            continue;
        };
        if p <= 0.0 {
            continue;
        }
        let r = c / p;
        if r > limits.max_cycle_per_put || r < limits.min_cycle_per_put {
            problem(
                cycle,
                format!(
                    "server CPU per lock cycle ({c:.0} µs) is {r:.1}× its CPU per put \
                     ({p:.0} µs) at the same client count; a cycle is two writes and at \
                     most one read, so {:.1}–{:.1}× is in line: this row drives the \
                     server differently",
                    limits.min_cycle_per_put, limits.max_cycle_per_put
                ),
            );
        }
    }
    out
}

fn ratio_text(lo: f64, hi: f64) -> String {
    if lo > 0.0 {
        format!("{:.1}×", hi / lo)
    } else {
        "a run with none".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::CpuUsage;
    use crate::stats::LatencySummary;
    use crate::workload::put::Put;
    use crate::workload::uncontended::Uncontended;

    fn lat(max_ms: f64) -> LatencySummary {
        LatencySummary {
            max_ms,
            ..Default::default()
        }
    }

    fn cpu(servers_s: f64) -> CpuUsage {
        CpuUsage {
            servers_s,
            wall_s: 5.0,
            ..Default::default()
        }
    }

    fn cycles(clients: usize, run: usize, per_sec: f64, cpu_us: f64, max_ms: f64) -> Uncontended {
        Uncontended {
            clients,
            run,
            cycles_per_sec: per_sec,
            server_cpu_us_per_cycle: cpu_us,
            acquire: lat(max_ms),
            release: lat(1.0),
            cpu: cpu(per_sec * 5.0 * cpu_us / 1e6),
            ..Default::default()
        }
    }

    fn puts(clients: usize, run: usize, per_sec: f64, cpu_us: f64) -> Put {
        Put {
            clients,
            run,
            puts_per_sec: per_sec,
            server_cpu_us_per_put: cpu_us,
            latency: lat(5.0),
            cpu: cpu(per_sec * 5.0 * cpu_us / 1e6),
            ..Default::default()
        }
    }

    fn report(system: &str, uncontended: Vec<Uncontended>, put: Vec<Put>) -> Report {
        Report {
            started_unix: 0,
            finished_unix: 0,
            command: String::new(),
            machine: Default::default(),
            params: crate::workload::Params::parse_defaults(),
            systems: vec![SystemReport {
                system: system.into(),
                uncontended,
                put,
                ..Default::default()
            }],
        }
    }

    /// Rows as a steady system gives them (raftlock's and etcd's shape:
    /// small spreads, a cycle ~2–3 puts of CPU).
    fn steady() -> (Vec<Uncontended>, Vec<Put>) {
        let u = vec![
            cycles(1, 0, 696.0, 1795.0, 8.0),
            cycles(1, 1, 698.0, 1734.0, 42.0),
            cycles(1, 2, 757.0, 1664.0, 4.0),
            cycles(64, 0, 5465.0, 240.0, 119.0),
            cycles(64, 1, 5410.0, 228.0, 336.0),
            cycles(64, 2, 5625.0, 233.0, 27.0),
        ];
        let p = vec![
            puts(1, 0, 1271.0, 986.0),
            puts(1, 1, 1161.0, 983.0),
            puts(1, 2, 1253.0, 951.0),
            puts(64, 0, 11599.0, 107.0),
            puts(64, 1, 10069.0, 120.0),
            puts(64, 2, 11022.0, 116.0),
        ];
        (u, p)
    }

    #[test]
    fn steady_rows_pass() {
        let (u, p) = steady();
        let got = check(&report("raftlock", u, p), &Limits::default());
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_wild_spread_fails_and_names_the_row() {
        let (mut u, p) = steady();
        // The stalled one-client row: 3.6, 285, 43 cycles/s.
        u[0] = cycles(1, 0, 3.6, 1700.0, 8.0);
        u[1] = cycles(1, 1, 285.0, 1700.0, 8.0);
        u[2] = cycles(1, 2, 43.0, 1700.0, 8.0);
        let got = check(&report("zookeeper", u, p), &Limits::default());
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].system, "zookeeper");
        assert_eq!(got[0].row, "uncontended c=1 unpinned");
        assert!(got[0].what.contains("3.6–285.0"), "{}", got[0]);
    }

    #[test]
    fn a_run_with_no_throughput_is_wild() {
        let (mut u, p) = steady();
        u[3] = cycles(64, 0, 0.0, f64::NAN, 0.0);
        let got = check(&report("zookeeper", u, p), &Limits::default());
        assert!(
            got.iter().any(|g| g.row == "uncontended c=64 unpinned"),
            "{got:?}"
        );
    }

    #[test]
    fn cpu_out_of_line_with_puts_fails() {
        let (mut u, p) = steady();
        // Steady throughput, but 861 µs per cycle against 116 µs per put.
        for (i, x) in u.iter_mut().skip(3).enumerate() {
            *x = cycles(64, i, 2123.0, 861.0 - i as f64, 50.0);
        }
        let got = check(&report("zookeeper", u, p), &Limits::default());
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].row, "uncontended c=64 unpinned");
        assert!(got[0].what.contains("per put"), "{}", got[0]);
    }

    #[test]
    fn cpu_spread_across_runs_fails() {
        let (mut u, p) = steady();
        u[4] = cycles(64, 1, 5410.0, 600.0, 50.0);
        let got = check(&report("etcd", u, p), &Limits::default());
        assert!(
            got.iter()
                .any(|g| g.row == "uncontended c=64 unpinned" && g.what.contains("across runs")),
            "{got:?}"
        );
    }

    #[test]
    fn a_single_stall_fails_even_in_one_run() {
        let (mut u, p) = steady();
        u.truncate(1);
        u[0] = cycles(1, 0, 696.0, 1795.0, 14_745.0);
        let got = check(&report("zookeeper", u, p), &Limits::default());
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].what.contains("14.7 s"), "{}", got[0]);
    }

    #[test]
    fn short_phases_are_not_judged_on_cpu() {
        // A smoke run: 1-second phases, a handful of ticks of CPU.
        let mut u = vec![cycles(1, 0, 500.0, 9000.0, 5.0)];
        u[0].cpu.servers_s = 0.2;
        let mut p = vec![puts(1, 0, 900.0, 1000.0)];
        p[0].cpu.servers_s = 0.3;
        let got = check(&report("zookeeper", u, p), &Limits::default());
        assert!(got.is_empty(), "{got:?}");
    }
}
