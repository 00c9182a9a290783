//! The Markdown section: targets first, then one table per workload, the
//! plots, the machine and the command.

use std::fmt::Write;

use super::plots::Plot;
use super::{Report, SystemReport};
use crate::procfs::CpuUsage;
use crate::workload::uncontended::Uncontended;

use super::headline::{self, spread, Spread, RIVALS as PEERS};

fn ms(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v >= 100.0 {
        int(v.round() as usize)
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A count with thousands separators.
fn int(v: usize) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn secs(v: Option<f64>) -> String {
    v.map_or("never".into(), |s| format!("{s:.2} s"))
}

fn bytes(v: f64) -> String {
    if v.abs() >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", v / 1024.0 / 1024.0)
    } else if v.abs() >= 1024.0 {
        format!("{:.2} KiB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// UTC "YYYY-MM-DD HH:MM" from Unix seconds.
pub fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let rem = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// One row of the targets table.
pub struct Target {
    pub what: String,
    pub raftlock: String,
    pub best_peer: String,
    pub ratio: String,
    pub goal: String,
    pub met: Option<bool>,
}

/// The herd checks: does a release cost the same, and is the successor
/// granted as fast, with many waiters queued as with few? Read between
/// the smallest and the largest waiter counts of raftlock's herd rows.
pub fn targets(r: &Report) -> Vec<Target> {
    let mut out = Vec::new();
    let Some(mine) = r.system("raftlock") else {
        return out;
    };
    let counts = |s: &SystemReport| {
        let lo = s.herd.iter().map(|h| h.waiters).min()?;
        let hi = s.herd.iter().map(|h| h.waiters).max()?;
        (hi > lo).then_some((lo, hi))
    };
    let Some((lo, hi)) = counts(mine) else {
        return out;
    };
    type Figure = fn(&crate::workload::herd::Herd) -> Option<f64>;
    let at =
        |s: &SystemReport, w: usize, g: Figure| s.herd.iter().find(|h| h.waiters == w).and_then(g);
    let rounds = r.params.herd_rounds.max(1) as f64;
    // CPU times come in 10 ms ticks per process and sample: 3 members.
    let resolution = 30.0 / rounds;
    let checks: [(&str, Figure, String, f64); 2] = [
        (
            "server CPU per release",
            |h| h.net_cpu_ms_per_release(),
            format!("same (±25% or ±{} ms)", ms(resolution)),
            resolution,
        ),
        (
            "release sent → successor granted, p50",
            |h| Some(h.handoff.p50_ms),
            "same (±25% or ±0.5 ms)".into(),
            0.5,
        ),
    ];
    for (what, g, goal, slack) in checks {
        let one = at(mine, lo, g);
        let many = at(mine, hi, g);
        let met = match (one, many) {
            (Some(a), Some(b)) => Some(b <= a * 1.25 + slack),
            _ => None,
        };
        let peers: Vec<String> = PEERS
            .iter()
            .filter_map(|p| {
                let s = r.system(p)?;
                let row = |w: usize| s.herd.iter().find(|h| h.waiters == w).map(g);
                Some(match (row(lo)?, row(hi)?) {
                    (Some(a), Some(b)) => format!("{} → {} ms ({p})", ms(a), ms(b)),
                    (a, b) => {
                        let shown = |v: Option<f64>| {
                            v.map_or("below idle".into(), |v| format!("{} ms", ms(v)))
                        };
                        format!("{} → {} ({p})", shown(a), shown(b))
                    }
                })
            })
            .collect();
        out.push(Target {
            what: format!("{what}, {} → {} waiters", int(lo), int(hi)),
            raftlock: match (one, many) {
                (Some(a), Some(b)) => format!("{} → {} ms", ms(a), ms(b)),
                _ => "–".into(),
            },
            best_peer: if peers.is_empty() {
                "–".into()
            } else {
                peers.join("; ")
            },
            ratio: match (one, many) {
                (Some(a), Some(b)) if a > 0.0 => format!("{:.2}×", b / a),
                _ => "–".into(),
            },
            goal,
            met,
        });
    }
    out
}

pub fn render(r: &Report, plots: &[Plot], plot_dir: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Results\n");
    let _ = writeln!(
        o,
        "Run {} → {}, on the machine described below. Command:\n\n```sh\n{}\n```\n",
        utc(r.started_unix),
        utc(r.finished_unix),
        r.command
    );
    let versions: Vec<String> = r
        .systems
        .iter()
        .map(|s| format!("{}: {}", s.system, s.version))
        .collect();
    let _ = writeln!(o, "Versions: {}.\n", versions.join("; "));

    headline_table(&mut o, r);
    let checks = targets(r);
    if !checks.is_empty() {
        let _ = writeln!(
            o,
            "\n### Herd: a release with many waiters queued costs what it costs with few\n"
        );
        let _ = writeln!(o, "| metric | raftlock | rivals | ratio | target | met |");
        let _ = writeln!(o, "|---|---|---|---|---|---|");
    }
    for t in checks {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            t.what, t.raftlock, t.best_peer, t.ratio, t.goal, met
        );
    }

    pairs(&mut o, r);
    uncontended(&mut o, r);
    scale(&mut o, r);
    put(&mut o, r);
    contended(&mut o, r);
    failover(&mut o, r);
    sessions(&mut o, r);
    herd(&mut o, r);
    restart(&mut o, r);

    if !plots.is_empty() {
        let _ = writeln!(o, "\n### Plots\n");
        for p in plots {
            let _ = writeln!(o, "![{}]({}/{})\n", p.title, plot_dir, p.file);
        }
    }
    let notes: Vec<String> = r
        .systems
        .iter()
        .flat_map(|s| s.notes.iter().map(move |n| format!("- {}: {n}", s.system)))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(o, "\n### Skipped or failed\n\n{}", notes.join("\n"));
    }
    let m = &r.machine;
    let _ = writeln!(
        o,
        "\n### Machine\n\n\
         | | |\n|---|---|\n\
         | cores (nproc) | {} |\n| CPU | {} |\n| memory | {:.1} GiB |\n| kernel | {} |\n\
         | data directories | {} |\n\
         | fsync (4 KiB append + fsync, 300×) | p50 {} ms, p99 {} ms, mean {} ms |\n\
         | 1-min load average at start / end | {:.2} / {:.2} |\n",
        m.nproc,
        m.cpu_model,
        m.mem_total_gib,
        m.kernel,
        m.filesystem,
        ms(m.fsync_p50_ms),
        ms(m.fsync_p99_ms),
        ms(m.fsync_mean_ms),
        m.loadavg_start,
        m.loadavg_end
    );
    let _ = writeln!(
        o,
        "Load generator, servers and other people's work share these cores; every\n\
         table has an *others* column: CPU used by processes that are neither the\n\
         servers nor the load generator during that measurement (in cores).\n\
         The raw numbers, CDF points included, are in `{plot_dir}/results.json`."
    );
    o
}

fn lat(s: &crate::stats::LatencySummary) -> String {
    format!("{} / {} / {}", ms(s.p50_ms), ms(s.p99_ms), ms(s.max_ms))
}

/// "median (min–max)" of one figure over runs, or just the value for one run.
fn spread_text(v: &[f64], fmt: impl Fn(f64) -> String) -> String {
    match spread(v) {
        None => "–".into(),
        Some(Spread { median, n: 1, .. }) => fmt(median),
        Some(s) => format!("{} ({}–{})", fmt(s.median), fmt(s.min), fmt(s.max)),
    }
}

fn med(v: &[f64]) -> f64 {
    spread(v).map_or(f64::NAN, |s| s.median)
}

fn pinning(pinned: bool) -> &'static str {
    if pinned {
        "pinned"
    } else {
        "no"
    }
}

/// Distinct (pinned, clients) keys in order, unpinned first.
/// The rows of `rows` grouped by `key`, in key order: one table row each.
fn grouped<T, K: Ord + Copy>(rows: &[T], key: impl Fn(&T) -> K) -> Vec<(K, Runs<'_, T>)> {
    let mut k: Vec<K> = rows.iter().map(&key).collect();
    k.sort_unstable();
    k.dedup();
    k.into_iter()
        .map(|k| (k, Runs(rows.iter().filter(|x| key(x) == k).collect())))
        .collect()
}

/// The runs behind one table row, and how their columns are summed up.
struct Runs<'a, T>(Vec<&'a T>);

impl<T> Runs<'_, T> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn col(&self, g: impl Fn(&T) -> f64) -> Vec<f64> {
        self.0.iter().map(|x| g(x)).collect()
    }

    /// Median of the runs' percentiles.
    fn med_ms(&self, g: impl Fn(&T) -> f64) -> String {
        ms(med(&self.col(g)))
    }

    fn spread_num(&self, g: impl Fn(&T) -> f64) -> String {
        spread_text(&self.col(g), num)
    }

    fn spread_us(&self, g: impl Fn(&T) -> f64) -> String {
        spread_text(&self.col(g), |x| format!("{} µs", num(x)))
    }

    fn sum(&self, g: impl Fn(&T) -> u64) -> u64 {
        self.0.iter().map(|x| g(x)).sum()
    }

    /// The busiest run's other processes, in cores.
    fn others(&self, g: impl Fn(&T) -> &CpuUsage) -> f64 {
        self.col(|x| g(x).other_cores())
            .into_iter()
            .fold(0.0, f64::max)
    }
}

/// A figure in its row's unit.
fn in_unit(unit: &str, v: f64) -> String {
    match unit {
        "ms" => format!("{} ms", ms(v)),
        "µs" => format!("{} µs", num(v)),
        "B" => bytes(v),
        u => format!("{}{u}", num(v)),
    }
}

/// "median (min–max)" in the row's unit, or the value alone for one run.
fn spread_in(unit: &str, s: &Spread) -> String {
    match s.n {
        _ if s.min == s.max => in_unit(unit, s.median),
        _ => format!(
            "{} ({}–{})",
            in_unit(unit, s.median),
            in_unit(unit, s.min),
            in_unit(unit, s.max)
        ),
    }
}

fn ratio_text(s: Option<&Spread>) -> String {
    s.map_or("–".into(), |s| match s.n {
        1 => format!("{:.2}×", s.median),
        _ => format!("{:.2}× ({:.2}–{:.2})", s.median, s.min, s.max),
    })
}

fn headline_table(o: &mut String, r: &Report) {
    let runs = r.params.runs.max(1);
    let _ = writeln!(
        o,
        "### Headline: the performance goals\n\n\
         Each goal against this run. Ratio goals: raftlock ÷ rival per run (run *i* against \
         run *i*, each a fresh cluster), the median and range (min–max) over up to {runs} \
         run(s); *same ZooKeeper client* is raftlock's ZooKeeper door driven by the ZooKeeper \
         rows' client and recipe, *fastest client* is raftlock over HTTP against the best of \
         etcd over native gRPC and ZooKeeper over the lean pipelined client. The other goals are \
         raftlock's figure alone: the one-client acquire p50, and three checks that nothing was \
         given up, against the values published before. Unpinned runs; server CPU = \
         utime+stime of all three members from /proc, per operation. *Gap*: the factor (or \
         amount) the median falls short of the goal by, or clears it by.\n"
    );
    let _ = writeln!(
        o,
        "| goal | better | raftlock | rival | ratio (range) | target | met | gap |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for row in headline::rows(r) {
        let met = match row.met() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let absent = |n: &str| {
            if r.system(n).is_some() {
                format!("no {n} figure")
            } else {
                format!("{n} not in this run")
            }
        };
        let mine = row.mine.as_ref().map_or_else(
            || absent(row.mine_name),
            |s| match row.mine_name {
                "raftlock" => spread_in(row.unit, s),
                n => format!("{} ({n})", spread_in(row.unit, s)),
            },
        );
        let rival = match (&row.rival, row.missing.as_slice()) {
            (Some((n, s)), []) => format!("{} ({n})", spread_in(row.unit, s)),
            (Some((n, s)), missing) => format!(
                "{} ({n}; {})",
                spread_in(row.unit, s),
                missing
                    .iter()
                    .map(|m| absent(m))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, missing) => missing
                .iter()
                .map(|m| absent(m))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let gap = match row.gap() {
            Some(headline::Gap::Factor { short: true, by }) => format!("short by {by:.2}×"),
            Some(headline::Gap::Factor { short: false, by }) => format!("{by:.2}× to spare"),
            Some(headline::Gap::Absolute { short: true, by }) => {
                format!("{} over", in_unit(row.unit, by))
            }
            Some(headline::Gap::Absolute { short: false, by }) => {
                format!("{} to spare", in_unit(row.unit, by))
            }
            None => match row.goal {
                Some(headline::Goal::Ratio(_)) if row.rival.is_none() => {
                    "no rival figure in this run".into()
                }
                _ => "–".into(),
            },
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.what,
            if row.lower_is_better {
                "lower"
            } else {
                "higher"
            },
            mine,
            rival,
            ratio_text(row.ratio.as_ref()),
            row.goal_text,
            met,
            gap
        );
    }
}

/// The same-client tables: raftlock's doors against the servers they
/// speak for, wherever both of a pair are in the run.
fn pairs(o: &mut String, r: &Report) {
    for (mine, theirs) in headline::PAIRS {
        let rows = headline::pair_rows(r, mine, theirs);
        if rows.is_empty() {
            continue;
        }
        let client = match theirs {
            "zookeeper" => {
                "the bench's lean pipelined ZooKeeper client and its lock recipe (ephemeral \
                 sequential node, watch on the predecessor; puts as setData)"
            }
            _ => {
                "the bench's native gRPC etcd client and clientv3's `concurrency.Mutex` recipe \
                 (puts as `Put`)"
            }
        };
        let _ = writeln!(o, "\n### Same client: {mine} ÷ {theirs}\n");
        let _ = writeln!(
            o,
            "The same client and recipe against both servers: {client}, once against \
             raftlock's door and once against {theirs} itself, so the ratio is the servers' \
             alone. Median over runs (range in brackets); the ratio is {mine} ÷ {theirs} run \
             by run.\n"
        );
        let _ = writeln!(o, "| figure | better | {mine} | {theirs} | ratio (range) |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for row in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                row.what,
                if row.lower_is_better {
                    "lower"
                } else {
                    "higher"
                },
                row.mine
                    .as_ref()
                    .map_or("–".into(), |s| spread_in(row.unit, s)),
                row.rival
                    .as_ref()
                    .map_or("–".into(), |(_, s)| spread_in(row.unit, s)),
                ratio_text(row.ratio.as_ref()),
            );
        }
    }
}

/// How cost grows with the number of concurrent sessions.
fn scale(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.scale.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Scale: lock cycles/s and server CPU per cycle by concurrent sessions\n"
    );
    let _ = writeln!(
        o,
        "The uncontended loop (each session its own lock, acquire → release) with 1 to \
         {} sessions at once, one run, unpinned, on one warmed cluster per system (the \
         counts the uncontended table has are its first run's rows; the others are \
         measured for {} s). *CPU growth* is server CPU per cycle ÷ the same system's at the \
         smallest count.\n",
        int(r.params.scale_sessions.iter().copied().max().unwrap_or(0)),
        r.params.scale_secs
    );
    let _ = writeln!(o, "| system | sessions | cycles/s | acquire p50 / p99, ms | server CPU per cycle | CPU growth | errors | others, cores |");
    let _ = writeln!(o, "|---|---:|---:|---|---:|---:|---:|---:|");
    for s in &r.systems {
        let mut rows: Vec<&Uncontended> = s.scale.iter().collect();
        rows.sort_by_key(|u| u.clients);
        let base = rows.first().map(|u| u.server_cpu_us_per_cycle);
        for u in rows {
            let growth = match base {
                Some(b) if b > 0.0 => format!("{:.2}×", u.server_cpu_us_per_cycle / b),
                _ => "–".into(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} / {} | {} µs | {} | {} | {:.2} |",
                s.system,
                int(u.clients),
                num(u.cycles_per_sec),
                ms(u.acquire.p50_ms),
                ms(u.acquire.p99_ms),
                num(u.server_cpu_us_per_cycle),
                growth,
                u.errors,
                u.cpu.other_cores()
            );
        }
    }
}

fn uncontended(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.uncontended.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Uncontended: each client its own session and lock, acquire → release loop\n"
    );
    let _ = writeln!(o, "Median over runs (range in brackets); latencies are the median of the runs' percentiles.\n");
    let _ = writeln!(o, "| system | pinned | clients | runs | cycles/s | acquire p50 / p99, ms | release p50 / p99, ms | server CPU per cycle | errors | others, cores |");
    let _ = writeln!(o, "|---|---|---:|---:|---:|---|---|---:|---:|---:|");
    for s in &r.systems {
        for ((pinned, c), v) in grouped(&s.uncontended, |u| (u.pinned, u.clients)) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} | {:.2} |",
                s.system,
                pinning(pinned),
                c,
                v.len(),
                v.spread_num(|u| u.cycles_per_sec),
                v.med_ms(|u| u.acquire.p50_ms),
                v.med_ms(|u| u.acquire.p99_ms),
                v.med_ms(|u| u.release.p50_ms),
                v.med_ms(|u| u.release.p99_ms),
                v.spread_us(|u| u.server_cpu_us_per_cycle),
                v.sum(|u| u.errors),
                v.others(|u| &u.cpu)
            );
        }
    }
}

fn put(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.put.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Put: each client writes its own key / node in a loop ({} bytes)\n",
        crate::workload::put::VALUE_BYTES
    );
    let _ = writeln!(o, "raftlock `PUT /v1/nodes/…`, etcd `Put`, ZooKeeper `setData`. Median over runs (range in brackets).\n");
    let _ = writeln!(o, "| system | pinned | clients | runs | puts/s | latency p50 / p99, ms | server CPU per put | errors | others, cores |");
    let _ = writeln!(o, "|---|---|---:|---:|---:|---|---:|---:|---:|");
    for s in &r.systems {
        for ((pinned, c), v) in grouped(&s.put, |p| (p.pinned, p.clients)) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} / {} | {} | {} | {:.2} |",
                s.system,
                pinning(pinned),
                c,
                v.len(),
                v.spread_num(|p| p.puts_per_sec),
                v.med_ms(|p| p.latency.p50_ms),
                v.med_ms(|p| p.latency.p99_ms),
                v.spread_us(|p| p.server_cpu_us_per_put),
                v.sum(|p| p.errors),
                v.others(|p| &p.cpu)
            );
        }
    }
}

fn contended(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.contended.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Contended: {} clients, one lock\n",
        r.params.contended_clients
    );
    let _ = writeln!(
        o,
        "Handoff = the previous holder's release answered → the next holder's acquire answered \
         (0 when the grant arrived first; *grant first* counts those). Median over runs (range \
         in brackets); violations, regressions and errors summed over runs.\n"
    );
    let _ = writeln!(o, "| system | pinned | runs | grants/s | handoff p50 / p99, ms | grant first | acquire wait p50 / p99, ms | server CPU per grant | mutual exclusion violations | token regressions | errors | others, cores |");
    let _ = writeln!(
        o,
        "|---|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|"
    );
    for s in &r.systems {
        for (pinned, v) in grouped(&s.contended, |c| c.pinned) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} / {} | {:.0}% | {} / {} | {} | {} | {} | {} | {:.2} |",
                s.system,
                pinning(pinned),
                v.len(),
                v.spread_num(|c| c.grants_per_sec),
                v.med_ms(|c| c.handoff.p50_ms),
                v.med_ms(|c| c.handoff.p99_ms),
                100.0
                    * med(&v
                        .col(|c| c.grant_before_release_answer as f64
                            / c.handoff.count.max(1) as f64)),
                v.med_ms(|c| c.acquire.p50_ms),
                v.med_ms(|c| c.acquire.p99_ms),
                v.spread_us(|c| c.server_cpu_us_per_grant),
                v.sum(|c| c.mutual_exclusion_violations),
                v.sum(|c| c.token_regressions),
                v.sum(|c| c.errors),
                v.others(|c| &c.cpu)
            );
        }
    }
}

fn failover(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.failover.is_none()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Failover: {} contending clients, leader killed with SIGKILL at {:.0} s\n",
        r.params.contended_clients, r.params.failover_kill_at_secs
    );
    let _ = writeln!(o, "| system | grants/s before | new leader seen after | first grant after kill | largest gap between grants | largest gap before kill | back to half rate | violations | errors |");
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &r.systems {
        if let Some(f) = &s.failover {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {:.2} s | {:.3} s | {} | {} | {} |",
                s.system,
                num(f.pre_kill_grants_per_sec),
                secs(f.new_leader_after_s),
                secs(f.first_grant_after_kill_s),
                f.largest_gap_s,
                f.largest_gap_before_kill_s,
                secs(f.back_to_half_rate_s),
                f.mutual_exclusion_violations,
                f.errors
            );
        }
    }
}

fn sessions(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.sessions.is_empty()) {
        return;
    }
    let _ = writeln!(o, "\n### Sessions: each holding one lock, kept alive\n");
    let _ = writeln!(o, "RSS growth of each member (VmRSS after − before) ÷ sessions; keepalive CPU = all members' CPU in the window minus idle, ÷ keepalives received.\n");
    let _ = writeln!(o, "| system | sessions | RSS/session, mean of members (max) | keepalive period | keepalives/s | server CPU per keepalive | servers' CPU in window (idle) | set-up | errors | others, cores |");
    let _ = writeln!(o, "|---|---:|---|---:|---:|---:|---|---:|---:|---:|");
    for s in &r.systems {
        for x in &s.sessions {
            let _ = writeln!(
                o,
                "| {} | {} | {} ({}) | {:.0} s{} | {} | {:.1} µs | {:.1}% ({:.1}%) | {:.1} s | {} | {:.2} |",
                s.system,
                int(x.sessions),
                bytes(x.rss_per_session_bytes),
                bytes(x.rss_per_session_max_member_bytes),
                x.keepalive_period_s,
                if x.keepalives_counted_by_server { " (library pings)" } else { "" },
                num(x.keepalives_per_sec),
                x.server_cpu_us_per_keepalive,
                x.server_cpu_pct,
                x.idle_cpu_pct,
                x.setup_secs,
                x.errors,
                x.window_cpu.other_cores()
            );
        }
    }
}

fn herd(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.herd.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "\n### Herd: one holder, W waiters on one lock, {} releases\n",
        r.params.herd_rounds
    );
    let _ = writeln!(o, "Each round: the holder releases, the next waiter is granted, the old holder queues again. CPU = all members; net = minus the idle CPU with the waiters parked (mean of 3 s before and after), which is noisy when idle CPU is high (Go/JVM GC with 1,000 parked waiters); \"below idle\" where that baseline exceeded the rounds' CPU, so no net figure stands.\n");
    let _ = writeln!(o, "| system | waiters | release sent → next grant p50 / p99 / max, ms | server CPU per release, net of idle (gross) | idle servers' CPU | queue set-up | others, cores |");
    let _ = writeln!(o, "|---|---:|---|---:|---:|---:|---:|");
    for s in &r.systems {
        for h in &s.herd {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} ({} ms) | {:.1}% | {:.1} s | {:.2} |",
                s.system,
                int(h.waiters),
                lat(&h.handoff),
                h.net_cpu_ms_per_release()
                    .map_or("below idle".into(), |net| format!("{} ms", ms(net))),
                ms(h.server_cpu_ms_per_release_gross),
                h.idle_cpu_pct,
                h.setup_secs,
                h.rounds_cpu.other_cores()
            );
        }
    }
}

fn restart(o: &mut String, r: &Report) {
    if r.systems.iter().all(|s| s.restart.is_none()) {
        return;
    }
    let _ = writeln!(o, "\n### Restart: a follower with N held lock nodes, kill -9, start, until it serves a read of the last lock\n");
    let _ = writeln!(o, "| system | lock nodes | its data on disk | restart → serving | RSS after | load time (set-up) |");
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
    for s in &r.systems {
        if let Some(x) = &s.restart {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.2} s | {} | {:.1} s |",
                s.system,
                int(x.nodes),
                bytes(x.data_bytes as f64),
                x.restart_to_serve_s,
                bytes(x.rss_after_restart as f64),
                x.load_secs
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uncontended_at(clients: usize, run: usize, cps: f64) -> Uncontended {
        Uncontended {
            clients,
            run,
            cycles_per_sec: cps,
            server_cpu_us_per_cycle: 1e6 / cps,
            ..Default::default()
        }
    }

    #[test]
    fn door_tables_and_missing_rivals_are_shown() {
        let sys = |name: &str, cps: f64| SystemReport {
            system: name.into(),
            uncontended: (0..2).map(|run| uncontended_at(64, run, cps)).collect(),
            scale: vec![
                uncontended_at(1, 0, cps / 10.0),
                uncontended_at(4096, 0, cps),
            ],
            ..Default::default()
        };
        let r = Report {
            started_unix: 0,
            finished_unix: 0,
            command: String::new(),
            machine: crate::machine::Machine::default(),
            params: crate::workload::Params::parse_defaults(),
            systems: vec![
                sys("raftlock", 3000.0),
                sys("raftlock-zk", 2000.0),
                sys("zookeeper", 1000.0),
            ],
        };
        let md = render(&r, &[], ".");
        assert!(
            md.contains("### Same client: raftlock-zk ÷ zookeeper"),
            "{md}"
        );
        assert!(!md.contains("raftlock-etcd ÷ etcd"));
        assert!(
            md.contains(
                "| lock cycles/s, 64 clients | higher | 2,000/s | 1,000/s | 2.00× (2.00–2.00) |"
            ),
            "{md}"
        );
        // etcd is not in the run: the fastest-client row names it.
        assert!(md.contains("(zookeeper; etcd not in this run)"), "{md}");
        assert!(
            md.contains("| no raftlock figure | no zookeeper figure |"),
            "{md}"
        );
        assert!(md.contains("### Scale"), "{md}");
        assert!(md.contains("| raftlock | 4,096 | 3,000 |"), "{md}");
    }

    /// The committed results render to the committed tables, byte for byte:
    /// pins every table's format against real data from all workloads.
    #[test]
    fn the_committed_results_render_to_the_committed_doc() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let r = crate::report::load_json(&root.join("docs/bench/results.json")).unwrap();
        let doc = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap();
        let md = render(&r, &[], "bench");
        let sections: Vec<&str> = md.split("\n### ").collect();
        assert!(sections.len() > 10, "{md}");
        for s in sections {
            assert!(doc.contains(s), "not in docs/benchmarks.md:\n{s}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13 UTC");
        assert_eq!(num(1234567.0), "1,234,567");
        assert_eq!(num(123.4), "123");
        assert_eq!(bytes(2048.0), "2.00 KiB");
        assert_eq!(int(1), "1");
        assert_eq!(int(50), "50");
        assert_eq!(int(1000), "1,000");
    }

    #[test]
    fn a_herd_row_whose_idle_exceeded_its_rounds_shows_no_net_figure() {
        use crate::workload::herd::Herd;
        let herd = |waiters: usize, net: f64, gross: f64| Herd {
            waiters,
            rounds: 20,
            server_cpu_ms_per_release: net,
            server_cpu_ms_per_release_gross: gross,
            ..Default::default()
        };
        let sys = |name: &str, rows: Vec<Herd>| SystemReport {
            system: name.into(),
            herd: rows,
            ..Default::default()
        };
        let r = Report {
            started_unix: 0,
            finished_unix: 0,
            command: String::new(),
            machine: crate::machine::Machine::default(),
            params: crate::workload::Params::parse_defaults(),
            systems: vec![
                sys("raftlock", vec![herd(1, 8.0, 9.0), herd(1000, 7.0, 8.0)]),
                sys("zookeeper", vec![herd(1, 2.8, 3.0), herd(1000, -2.4, 5.5)]),
            ],
        };
        let md = render(&r, &[], ".");
        assert!(md.contains("| below idle (5.50 ms) |"), "{md}");
        assert!(md.contains("→ below idle (zookeeper)"), "{md}");
        assert!(!md.contains("-2.4"), "{md}");
    }
}
