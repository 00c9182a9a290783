//! The headline: for each figure, raftlock against the best rival on its
//! fastest client (etcd over gRPC, ZooKeeper over the lean client; the
//! etcd gateway row is not a rival here), as the median over the runs and
//! the spread (min–max) of the per-run ratio. Run i of raftlock is paired
//! with run i of the rival: both are the i-th fresh cluster of the run.

use super::SystemReport;
use crate::report::Report;

/// The rivals the headline compares with.
pub const RIVALS: [&str; 2] = ["etcd", "zookeeper"];

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
type PerRun = Vec<(usize, f64)>;

/// One figure: how to read it per run from a system's results.
pub struct Figure {
    pub what: String,
    pub lower_is_better: bool,
    /// (run, value) pairs.
    pub per_run: Box<dyn Fn(&SystemReport) -> PerRun>,
    pub unit: &'static str,
    /// The target for the ratio, if any: (ratio, text).
    pub goal: Option<(f64, &'static str)>,
}

/// A computed headline row.
pub struct Row {
    pub what: String,
    pub lower_is_better: bool,
    pub unit: &'static str,
    pub raftlock: Option<Spread>,
    pub rival: Option<(String, Spread)>,
    pub ratio: Option<Spread>,
    pub goal: Option<(f64, &'static str)>,
}

impl Row {
    /// Met when the median ratio reaches the goal.
    pub fn met(&self) -> Option<bool> {
        let (goal, _) = self.goal?;
        let r = self.ratio?.median;
        Some(if self.lower_is_better {
            r <= goal
        } else {
            r >= goal
        })
    }
}

pub fn row(r: &Report, f: &Figure) -> Row {
    let values = |name: &str| r.system(name).map(|s| (f.per_run)(s)).unwrap_or_default();
    let mine = values("raftlock");
    let only = |v: &[(usize, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let better = |a: f64, b: f64| if f.lower_is_better { a < b } else { a > b };
    let mut rival: Option<(String, PerRun, Spread)> = None;
    for name in RIVALS {
        let v = values(name);
        let Some(sp) = spread(&only(&v)) else {
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
        raftlock: spread(&only(&mine)),
        rival: rival.map(|(n, _, s)| (n, s)),
        ratio,
        goal: f.goal,
    }
}

fn pin_label(pinned: bool) -> &'static str {
    if pinned {
        ", pinned"
    } else {
        ""
    }
}

/// The headline figures, in the order the report lists them.
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut out = Vec::new();
    let pins: Vec<bool> = r.params.pin.runs().to_vec();
    let clients = r.params.clients.clone();
    let put_clients = r.params.put_clients.clone();
    let max_c = clients.iter().copied().max().unwrap_or(0);
    let max_p = put_clients.iter().copied().max().unwrap_or(0);
    out.push(Figure {
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
        goal: None,
    });
    for &pinned in &pins {
        for &c in &clients {
            out.push(Figure {
                what: format!("lock+unlock cycles/s, {c} clients{}", pin_label(pinned)),
                lower_is_better: false,
                per_run: Box::new(move |s| {
                    s.uncontended
                        .iter()
                        .filter(|u| u.clients == c && u.pinned == pinned)
                        .map(|u| (u.run, u.cycles_per_sec))
                        .collect()
                }),
                unit: "/s",
                goal: (c == max_c && !pinned).then_some((2.0, "≥ 2×")),
            });
        }
        for &c in &put_clients {
            out.push(Figure {
                what: format!("put/s, {c} clients{}", pin_label(pinned)),
                lower_is_better: false,
                per_run: Box::new(move |s| {
                    s.put
                        .iter()
                        .filter(|p| p.clients == c && p.pinned == pinned)
                        .map(|p| (p.run, p.puts_per_sec))
                        .collect()
                }),
                unit: "/s",
                goal: (c == max_p && !pinned).then_some((1.0, "≥ 1×")),
            });
        }
        out.push(Figure {
            what: format!(
                "contended acquisitions/s, {} clients, one lock{}",
                r.params.contended_clients,
                pin_label(pinned)
            ),
            lower_is_better: false,
            per_run: Box::new(move |s| {
                s.contended
                    .iter()
                    .filter(|c| c.pinned == pinned)
                    .map(|c| (c.run, c.grants_per_sec))
                    .collect()
            }),
            unit: "/s",
            goal: (!pinned).then_some((1.5, "≥ 1.5×")),
        });
    }
    // CPU per operation, unpinned (pinned runs add the same figures in
    // the detail tables).
    let cpu_pinned = !pins.contains(&false);
    for &c in &clients {
        out.push(Figure {
            what: format!("server CPU per lock cycle (2 writes), {c} clients"),
            lower_is_better: true,
            per_run: Box::new(move |s| {
                s.uncontended
                    .iter()
                    .filter(|u| u.clients == c && u.pinned == cpu_pinned)
                    .map(|u| (u.run, u.server_cpu_us_per_cycle))
                    .collect()
            }),
            unit: "µs",
            goal: (c == 1 || c == max_c).then_some((0.5, "≤ 0.5×")),
        });
    }
    for &c in &put_clients {
        out.push(Figure {
            what: format!("server CPU per put, {c} clients"),
            lower_is_better: true,
            per_run: Box::new(move |s| {
                s.put
                    .iter()
                    .filter(|p| p.clients == c && p.pinned == cpu_pinned)
                    .map(|p| (p.run, p.server_cpu_us_per_put))
                    .collect()
            }),
            unit: "µs",
            goal: Some((0.5, "≤ 0.5×")),
        });
    }
    out
}

pub fn rows(r: &Report) -> Vec<Row> {
    figures(r).iter().map(|f| row(r, f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;
    use crate::workload::put::Put;

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

    #[test]
    fn ratio_pairs_runs_against_the_best_rival() {
        let r = Report {
            started_unix: 0,
            finished_unix: 0,
            command: String::new(),
            machine: Machine::default(),
            params: crate::workload::Params::parse_defaults(),
            systems: vec![
                system("raftlock", &[100.0, 200.0, 300.0]),
                system("etcd", &[50.0, 50.0, 50.0]),
                system("zookeeper", &[100.0, 100.0, 100.0]),
                // Not a rival: its row must not be picked even if best.
                system("etcd-gateway", &[1000.0, 1000.0, 1000.0]),
            ],
        };
        let f = figures(&r)
            .into_iter()
            .find(|f| f.what == "put/s, 64 clients")
            .map(|f| row(&r, &f));
        let Some(row) = f else {
            panic!("no put/s row");
        };
        let (name, best) = row.rival.clone().unwrap_or_default();
        assert_eq!(name, "zookeeper");
        assert_eq!(best.median, 100.0);
        let ratio = row.ratio.map(|s| (s.median, s.min, s.max));
        assert_eq!(ratio, Some((2.0, 1.0, 3.0)));
        assert_eq!(row.met(), Some(true));
    }
}
