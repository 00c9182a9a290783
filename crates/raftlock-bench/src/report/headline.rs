//! The headline: the performance goals, each a row that says whether this
//! run met it and by how much it missed or cleared it. Ratio goals pair
//! run *i* of one system with run *i* of its rival (both are the *i*-th
//! fresh cluster of the run) and give the median and spread (min–max) of
//! the per-run ratio; the rival is a named system (ZooKeeper, for the
//! same-client rows) or the best of etcd over gRPC and ZooKeeper over the
//! lean client, each on its fastest client (the etcd gateway row is never
//! a rival). Absolute goals hold one raftlock figure against a bound: the
//! one-client acquire p50, and the "nothing given up" checks against the
//! values published before (failover gap, memory per session, contended
//! handoff p99).

use super::SystemReport;
use crate::report::Report;
use crate::workload::put::Put;
use crate::workload::uncontended::Uncontended;

/// The rivals a "best rival" row compares with.
pub const RIVALS: [&str; 2] = ["etcd", "zookeeper"];
/// The rows against ZooKeeper alone.
const ZOOKEEPER: [&str; 1] = ["zookeeper"];

/// The client count the throughput and CPU goals are stated at; a run
/// without it (a smoke run) uses its largest.
pub const GOAL_CLIENTS: usize = 64;

/// The published values the "nothing given up" rows must not fall behind.
pub const PREVIOUS_FAILOVER_GAP_S: f64 = 0.30;
pub const PREVIOUS_RSS_PER_SESSION_BYTES: f64 = 1200.0;
pub const PREVIOUS_HANDOFF_P99_MS: f64 = 1.2;
/// The one-client acquire p50 goal.
pub const ACQUIRE_P50_GOAL_MS: f64 = 0.5;

/// Median and range of a handful of values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

/// A figure's (run, value) pairs for one system.
pub type PerRun = Vec<(usize, f64)>;

/// What a row holds its figure against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// The median of the per-run ratio mine ÷ rival must reach this
    /// (at least, or at most when lower is better).
    Ratio(f64),
    /// Mine's median must be at most (or at least) this, in the row's unit.
    Absolute(f64),
}

/// One figure: how to read it per run from a system's results, and who
/// it is held against.
pub struct Figure {
    pub what: String,
    pub lower_is_better: bool,
    /// (run, value) pairs.
    pub per_run: Box<dyn Fn(&SystemReport) -> PerRun>,
    pub unit: &'static str,
    /// The system whose figure this is.
    pub mine: &'static str,
    /// Whom it is compared with: the best of these in the run.
    pub rivals: &'static [&'static str],
    pub goal: Option<Goal>,
    /// How the goal reads ("≥ 2× ZooKeeper's"); with an absolute goal,
    /// the value published before when that is the bound.
    pub goal_text: String,
}

/// A computed headline row.
pub struct Row {
    pub what: String,
    pub lower_is_better: bool,
    pub unit: &'static str,
    pub mine_name: &'static str,
    pub mine: Option<Spread>,
    pub rival: Option<(String, Spread)>,
    /// The rivals the figure names that have no value in this run.
    pub missing: Vec<&'static str>,
    pub ratio: Option<Spread>,
    pub goal: Option<Goal>,
    pub goal_text: String,
}

/// How far a row's figure is from its goal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gap {
    /// Ratio goals: the factor the median ratio is short of the goal by
    /// (`short`) or clears it by.
    Factor { short: bool, by: f64 },
    /// Absolute goals: the difference, in the row's unit.
    Absolute { short: bool, by: f64 },
}

impl Row {
    /// Met when the median (of the ratio, or of mine) reaches the goal;
    /// None when a figure it needs is missing from the run.
    pub fn met(&self) -> Option<bool> {
        Some(!self.gap()?.short())
    }

    pub fn gap(&self) -> Option<Gap> {
        let goal = self.goal?;
        match goal {
            Goal::Ratio(g) => {
                let r = self.ratio?.median;
                if r <= 0.0 || g <= 0.0 {
                    return None;
                }
                let (short, by) = if self.lower_is_better {
                    (r > g, if r > g { r / g } else { g / r })
                } else {
                    (r < g, if r < g { g / r } else { r / g })
                };
                Some(Gap::Factor { short, by })
            }
            Goal::Absolute(g) => {
                let v = self.mine?.median;
                let short = if self.lower_is_better { v > g } else { v < g };
                Some(Gap::Absolute {
                    short,
                    by: (v - g).abs(),
                })
            }
        }
    }
}

impl Gap {
    pub fn short(self) -> bool {
        match self {
            Gap::Factor { short, .. } | Gap::Absolute { short, .. } => short,
        }
    }
}

/// The row of figure `f`: mine, the best of its rivals, the per-run ratio.
pub fn row(r: &Report, f: &Figure) -> Row {
    let values = |name: &str| r.system(name).map(|s| (f.per_run)(s)).unwrap_or_default();
    let mine = values(f.mine);
    let only = |v: &[(usize, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let better = |a: f64, b: f64| if f.lower_is_better { a < b } else { a > b };
    let mut rival: Option<(String, PerRun, Spread)> = None;
    let mut missing = Vec::new();
    for &name in f.rivals {
        let v = values(name);
        let Some(sp) = spread(&only(&v)) else {
            missing.push(name);
            continue;
        };
        if rival
            .as_ref()
            .is_none_or(|(_, _, b)| better(sp.median, b.median))
        {
            rival = Some((name.to_string(), v, sp));
        }
    }
    let ratio = rival.as_ref().and_then(|(_, theirs, _)| {
        let ratios: Vec<f64> = mine
            .iter()
            .filter_map(|(run, m)| {
                let (_, t) = theirs.iter().find(|(r, _)| r == run)?;
                (*t > 0.0).then(|| m / t)
            })
            .collect();
        spread(&ratios)
    });
    Row {
        what: f.what.clone(),
        lower_is_better: f.lower_is_better,
        unit: f.unit,
        mine_name: f.mine,
        mine: spread(&only(&mine)),
        rival: rival.map(|(n, _, s)| (n, s)),
        missing,
        ratio,
        goal: f.goal,
        goal_text: f.goal_text.clone(),
    }
}

/// "1 client", "64 clients".
pub fn clients(c: usize) -> String {
    if c == 1 {
        "1 client".into()
    } else {
        format!("{c} clients")
    }
}

/// The client count the goals are read at in this run.
pub fn goal_clients(counts: &[usize]) -> usize {
    if counts.contains(&GOAL_CLIENTS) {
        GOAL_CLIENTS
    } else {
        counts.iter().copied().max().unwrap_or(0)
    }
}

/// Uncontended cycles/s of `c` clients, per run, unpinned.
pub fn cycles(c: usize) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    uncontended_of(c, false, |u| u.cycles_per_sec)
}

/// Uncontended server CPU per cycle of `c` clients, per run, unpinned.
pub fn cpu_per_cycle(c: usize) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    uncontended_of(c, false, |u| u.server_cpu_us_per_cycle)
}

/// Puts/s of `c` clients, per run, unpinned.
pub fn puts(c: usize) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    put_of(c, false, |p| p.puts_per_sec)
}

/// Server CPU per put of `c` clients, per run, unpinned.
pub fn cpu_per_put(c: usize) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    put_of(c, false, |p| p.server_cpu_us_per_put)
}

/// The goals, in the order the report lists them.
pub fn figures(r: &Report) -> Vec<Figure> {
    let c = goal_clients(&r.params.clients);
    let p = goal_clients(&r.params.put_clients);
    vec![
        Figure {
            what: format!("server CPU per lock cycle, {}", clients(c)),
            lower_is_better: true,
            per_run: cpu_per_cycle(c),
            unit: "µs",
            mine: "raftlock",
            rivals: &ZOOKEEPER,
            goal: Some(Goal::Ratio(0.5)),
            goal_text: "≤ 0.5× ZooKeeper's".into(),
        },
        Figure {
            what: format!("server CPU per put, {}", clients(p)),
            lower_is_better: true,
            per_run: cpu_per_put(p),
            unit: "µs",
            mine: "raftlock",
            rivals: &ZOOKEEPER,
            goal: Some(Goal::Ratio(0.5)),
            goal_text: "≤ 0.5× ZooKeeper's".into(),
        },
        Figure {
            what: format!(
                "lock cycles/s, {}, same ZooKeeper client (raftlock-zk)",
                clients(c)
            ),
            lower_is_better: false,
            per_run: cycles(c),
            unit: "/s",
            mine: "raftlock-zk",
            rivals: &ZOOKEEPER,
            goal: Some(Goal::Ratio(2.0)),
            goal_text: "≥ 2× ZooKeeper's".into(),
        },
        Figure {
            what: format!("lock cycles/s, {}, each on its fastest client", clients(c)),
            lower_is_better: false,
            per_run: cycles(c),
            unit: "/s",
            mine: "raftlock",
            rivals: &RIVALS,
            goal: Some(Goal::Ratio(2.0)),
            goal_text: "≥ 2× the best rival's".into(),
        },
        Figure {
            what: format!("puts/s, {}", clients(p)),
            lower_is_better: false,
            per_run: puts(p),
            unit: "/s",
            mine: "raftlock",
            rivals: &ZOOKEEPER,
            goal: Some(Goal::Ratio(1.5)),
            goal_text: "≥ 1.5× ZooKeeper's".into(),
        },
        Figure {
            what: "acquire p50, 1 client".into(),
            lower_is_better: true,
            per_run: Box::new(|s| {
                s.uncontended
                    .iter()
                    .filter(|u| u.clients == 1 && !u.pinned)
                    .map(|u| (u.run, u.acquire.p50_ms))
                    .collect()
            }),
            unit: "ms",
            mine: "raftlock",
            rivals: &RIVALS,
            goal: Some(Goal::Absolute(ACQUIRE_P50_GOAL_MS)),
            goal_text: format!("≤ {ACQUIRE_P50_GOAL_MS} ms"),
        },
        Figure {
            what: "largest grant gap after leader kill -9".into(),
            lower_is_better: true,
            per_run: Box::new(|s| {
                s.failover
                    .iter()
                    .map(|f| (0, f.largest_gap_s * 1000.0))
                    .collect()
            }),
            unit: "ms",
            mine: "raftlock",
            rivals: &RIVALS,
            goal: Some(Goal::Absolute(PREVIOUS_FAILOVER_GAP_S * 1000.0)),
            goal_text: "no worse than before (0.28–0.30 s)".into(),
        },
        Figure {
            what: "memory (RSS) per session holding one lock".into(),
            lower_is_better: true,
            per_run: Box::new(|s| {
                s.sessions
                    .iter()
                    .max_by_key(|x| x.sessions)
                    .map(|x| (0, x.rss_per_session_bytes))
                    .into_iter()
                    .collect()
            }),
            unit: "B",
            mine: "raftlock",
            rivals: &RIVALS,
            goal: Some(Goal::Absolute(PREVIOUS_RSS_PER_SESSION_BYTES)),
            goal_text: "no worse than before (1.2 KB)".into(),
        },
        Figure {
            what: format!(
                "contended handoff p99, {} clients, one lock",
                r.params.contended_clients
            ),
            lower_is_better: true,
            per_run: Box::new(|s| {
                s.contended
                    .iter()
                    .filter(|c| !c.pinned)
                    .map(|c| (c.run, c.handoff.p99_ms))
                    .collect()
            }),
            unit: "ms",
            mine: "raftlock",
            rivals: &RIVALS,
            goal: Some(Goal::Absolute(PREVIOUS_HANDOFF_P99_MS)),
            goal_text: "no worse than before (1.2 ms)".into(),
        },
    ]
}

pub fn rows(r: &Report) -> Vec<Row> {
    figures(r).iter().map(|f| row(r, f)).collect()
}

/// The same-client pairs: raftlock's door ÷ the server it speaks for,
/// driven by one client and recipe.
pub const PAIRS: [(&str, &str); 2] = [("raftlock-zk", "zookeeper"), ("raftlock-etcd", "etcd")];

/// The apples-to-apples figures of one pair (`mine` against `theirs`):
/// every client count the run measured, unpinned and pinned.
pub fn pair_figures(r: &Report, mine: &'static str, theirs: &'static str) -> Vec<Figure> {
    let rival: &'static [&'static str] = match theirs {
        "zookeeper" => &ZOOKEEPER,
        _ => &["etcd"],
    };
    let mut out = Vec::new();
    let pins: Vec<bool> = r.params.pin.runs().to_vec();
    let fig = |what: String, lower: bool, unit: &'static str, per_run| Figure {
        what,
        lower_is_better: lower,
        per_run,
        unit,
        mine,
        rivals: rival,
        goal: None,
        goal_text: String::new(),
    };
    for &pinned in &pins {
        let pl = if pinned { ", pinned" } else { "" };
        for &c in &r.params.clients {
            out.push(fig(
                format!("lock cycles/s, {}{pl}", clients(c)),
                false,
                "/s",
                uncontended_of(c, pinned, |u| u.cycles_per_sec),
            ));
            out.push(fig(
                format!("server CPU per lock cycle, {}{pl}", clients(c)),
                true,
                "µs",
                uncontended_of(c, pinned, |u| u.server_cpu_us_per_cycle),
            ));
            out.push(fig(
                format!("acquire p50, {}{pl}", clients(c)),
                true,
                "ms",
                uncontended_of(c, pinned, |u| u.acquire.p50_ms),
            ));
            out.push(fig(
                format!("acquire p99, {}{pl}", clients(c)),
                true,
                "ms",
                uncontended_of(c, pinned, |u| u.acquire.p99_ms),
            ));
        }
        for &c in &r.params.put_clients {
            out.push(fig(
                format!("puts/s, {}{pl}", clients(c)),
                false,
                "/s",
                put_of(c, pinned, |p| p.puts_per_sec),
            ));
            out.push(fig(
                format!("server CPU per put, {}{pl}", clients(c)),
                true,
                "µs",
                put_of(c, pinned, |p| p.server_cpu_us_per_put),
            ));
        }
    }
    out
}

fn uncontended_of(
    c: usize,
    pinned: bool,
    g: fn(&Uncontended) -> f64,
) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    per_run(
        c,
        pinned,
        |s| &s.uncontended,
        |u| (u.clients, u.pinned, u.run),
        g,
    )
}

fn put_of(c: usize, pinned: bool, g: fn(&Put) -> f64) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    per_run(c, pinned, |s| &s.put, |p| (p.clients, p.pinned, p.run), g)
}

/// `g` of each row of `rows` measured with `c` clients and `pinned`, by
/// run; `at` reads a row's (clients, pinned, run).
fn per_run<T: 'static>(
    c: usize,
    pinned: bool,
    rows: fn(&SystemReport) -> &[T],
    at: fn(&T) -> (usize, bool, usize),
    g: fn(&T) -> f64,
) -> Box<dyn Fn(&SystemReport) -> PerRun> {
    Box::new(move |s| {
        rows(s)
            .iter()
            .filter_map(|x| match at(x) {
                (clients, p, run) if clients == c && p == pinned => Some((run, g(x))),
                _ => None,
            })
            .collect()
    })
}

/// The rows of a pair with a figure on both sides, or nothing when either
/// system is not in the run.
pub fn pair_rows(r: &Report, mine: &'static str, theirs: &'static str) -> Vec<Row> {
    if r.system(mine).is_none() || r.system(theirs).is_none() {
        return Vec::new();
    }
    pair_figures(r, mine, theirs)
        .iter()
        .map(|f| row(r, f))
        .filter(|row| row.mine.is_some() && row.rival.is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;
    use crate::workload::put::Put;
    use crate::workload::uncontended::Uncontended;

    #[test]
    fn medians_and_ranges() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap_or_default();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(spread(&[1.0, 4.0]).map(|s| s.median), Some(2.5));
        assert!(spread(&[f64::NAN]).is_none());
    }

    fn system(name: &str, puts: &[f64]) -> SystemReport {
        SystemReport {
            system: name.into(),
            put: puts
                .iter()
                .enumerate()
                .map(|(run, &p)| Put {
                    clients: 64,
                    run,
                    puts_per_sec: p,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn report(systems: Vec<SystemReport>) -> Report {
        Report {
            started_unix: 0,
            finished_unix: 0,
            command: String::new(),
            machine: Machine::default(),
            params: crate::workload::Params::parse_defaults(),
            systems,
        }
    }

    fn find(r: &Report, what: &str) -> Row {
        let f = figures(r).into_iter().find(|f| f.what == what);
        let Some(f) = f else {
            panic!("no row {what}");
        };
        row(r, &f)
    }

    #[test]
    fn puts_are_held_against_zookeeper_run_by_run() {
        let r = report(vec![
            system("raftlock", &[100.0, 200.0, 300.0]),
            system("etcd", &[500.0, 500.0, 500.0]),
            system("zookeeper", &[100.0, 100.0, 100.0]),
            system("etcd-gateway", &[1000.0, 1000.0, 1000.0]),
        ]);
        let row = find(&r, "puts/s, 64 clients");
        // ZooKeeper's, though etcd is faster here: the goal names ZooKeeper.
        let (name, best) = row.rival.clone().unwrap_or_default();
        assert_eq!(name, "zookeeper");
        assert_eq!(best.median, 100.0);
        let ratio = row.ratio.map(|s| (s.median, s.min, s.max));
        assert_eq!(ratio, Some((2.0, 1.0, 3.0)));
        assert_eq!(row.met(), Some(true));
        assert_eq!(
            row.gap(),
            Some(Gap::Factor {
                short: false,
                by: 2.0 / 1.5
            })
        );
    }

    #[test]
    fn a_missing_rival_is_named_and_nothing_is_met() {
        let r = report(vec![system("raftlock", &[100.0])]);
        let row = find(&r, "puts/s, 64 clients");
        assert_eq!(row.missing, vec!["zookeeper"]);
        assert!(row.ratio.is_none() && row.met().is_none());
    }

    fn cycles_system(name: &str, runs: &[(f64, f64)]) -> SystemReport {
        SystemReport {
            system: name.into(),
            uncontended: runs
                .iter()
                .enumerate()
                .map(|(run, &(cps, cpu))| Uncontended {
                    clients: 64,
                    run,
                    cycles_per_sec: cps,
                    server_cpu_us_per_cycle: cpu,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_fastest_client_row_takes_the_best_rival_and_cpu_is_lower_better() {
        let r = report(vec![
            cycles_system("raftlock", &[(3000.0, 90.0), (3000.0, 110.0)]),
            cycles_system("raftlock-zk", &[(2000.0, 100.0), (2000.0, 100.0)]),
            cycles_system("etcd", &[(2000.0, 150.0), (2000.0, 150.0)]),
            cycles_system("zookeeper", &[(1000.0, 300.0), (1000.0, 100.0)]),
        ]);
        let best = find(&r, "lock cycles/s, 64 clients, each on its fastest client");
        assert_eq!(best.rival.as_ref().map(|r| r.0.as_str()), Some("etcd"));
        assert_eq!(best.ratio.map(|s| s.median), Some(1.5));
        assert_eq!(best.met(), Some(false));
        let same = find(
            &r,
            "lock cycles/s, 64 clients, same ZooKeeper client (raftlock-zk)",
        );
        assert_eq!(same.ratio.map(|s| s.median), Some(2.0));
        assert_eq!(same.met(), Some(true));
        let cpu = find(&r, "server CPU per lock cycle, 64 clients");
        // Per run 90/300 and 110/100: median 0.7, not 0.5.
        assert_eq!(cpu.ratio.map(|s| (s.min, s.max)), Some((0.3, 1.1)));
        assert_eq!(cpu.met(), Some(false));
        let Some(Gap::Factor { short: true, by }) = cpu.gap() else {
            panic!("not short: {:?}", cpu.gap());
        };
        assert!((by - 1.4).abs() < 1e-9);
    }

    #[test]
    fn absolute_goals_need_only_raftlock() {
        let mut s = cycles_system("raftlock", &[]);
        s.uncontended = [0.4, 0.7, 0.45]
            .iter()
            .enumerate()
            .map(|(run, &p50)| {
                let mut u = Uncontended {
                    clients: 1,
                    run,
                    ..Default::default()
                };
                u.acquire.p50_ms = p50;
                u
            })
            .collect();
        let r = report(vec![s]);
        let row = find(&r, "acquire p50, 1 client");
        assert_eq!(row.met(), Some(true));
        let Some(Gap::Absolute { short: false, by }) = row.gap() else {
            panic!("not met: {:?}", row.gap());
        };
        assert!((by - 0.05).abs() < 1e-9);
    }

    #[test]
    fn pairs_show_only_when_both_systems_ran() {
        let both = report(vec![
            cycles_system("raftlock-zk", &[(2000.0, 100.0)]),
            cycles_system("zookeeper", &[(1000.0, 200.0)]),
        ]);
        let rows = pair_rows(&both, "raftlock-zk", "zookeeper");
        let cps = rows.iter().find(|r| r.what == "lock cycles/s, 64 clients");
        assert_eq!(cps.and_then(|r| r.ratio).map(|s| s.median), Some(2.0));
        assert!(pair_rows(&both, "raftlock-etcd", "etcd").is_empty());
    }
}
