//! `zk-crosscheck`: the bench's own ZooKeeper lock rows held against a
//! client the bench did not write, on one cluster, interleaved. One
//! three-member ZooKeeper cluster (the same set-up as `compare`) serves,
//! round after round and per client count, the bench's `uncontended`
//! workload and then the same loop on kazoo (`bench/zk_kazoo_lock.py`,
//! kazoo's `Lock` recipe: create an ephemeral sequential node, list the
//! children, delete); the order alternates every round so a drift in the
//! machine's load falls on both. Server CPU is measured the same way for
//! both (the members' /proc utime+stime over the measured window).
//!
//! Without `--python` only the bench's rows run: a time series of one
//! cluster, which shows what warming a fresh cluster changes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::backend::zookeeper::Zookeeper;
use crate::cluster::{Cluster, System, Tools};
use crate::procfs::CpuSample;
use crate::progress::say;
use crate::workload::uncontended;

pub struct CrossArgs {
    pub tools: Tools,
    pub scratch: PathBuf,
    pub pidfile: PathBuf,
    /// The Python with kazoo installed; none: the bench's rows only.
    pub python: Option<PathBuf>,
    pub script: PathBuf,
    pub kazoo_procs: usize,
    pub clients: Vec<usize>,
    pub secs: f64,
    pub rounds: usize,
    /// Seconds of unreported load first (0: none); `None`: until settled.
    pub warm_up_secs: Option<f64>,
}

/// One measured phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Phase {
    pub client: String,
    pub round: usize,
    pub clients: usize,
    /// Seconds since the cluster was ready, at the phase's start.
    pub at_s: f64,
    pub cycles_per_sec: f64,
    pub acquire_p50_ms: f64,
    pub acquire_p99_ms: f64,
    pub max_ms: f64,
    pub server_cpu_us_per_cycle: f64,
    pub errors: u64,
    /// Other processes' CPU meanwhile, in cores (this machine is shared).
    pub other_cores: f64,
}

/// What the kazoo script prints at the end.
#[derive(Deserialize)]
struct KazooResult {
    cycles: u64,
    secs: f64,
    errors: u64,
    acquire_p50_ms: f64,
    acquire_p99_ms: f64,
    acquire_max_ms: f64,
    release_max_ms: f64,
}

pub async fn run(a: CrossArgs) -> anyhow::Result<Vec<Phase>> {
    std::fs::create_dir_all(&a.scratch)?;
    let dir = a.scratch.join("zookeeper-crosscheck");
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = Cluster::start(System::Zookeeper, &a.tools, &dir, &a.pidfile, &[]).await?;
    let ready = std::time::Instant::now();
    let result = rounds(&a, &cluster, ready).await;
    cluster.stop().await;
    result
}

async fn rounds(
    a: &CrossArgs,
    cluster: &Cluster,
    ready: std::time::Instant,
) -> anyhow::Result<Vec<Phase>> {
    let b = Zookeeper::new(&cluster.addrs());
    let pids = cluster.pids();
    let leader = cluster.leader().await?;
    match a.warm_up_secs {
        None => {
            crate::warmup::until_settled(&b, &pids, leader, 3).await;
        }
        Some(secs) if secs > 0.0 => {
            uncontended::run(&b, &pids, leader, 3, crate::warmup::CLIENTS, secs, false, 0)
                .await
                .context("warm-up")?;
        }
        Some(_) => {}
    }
    let mut out = Vec::new();
    for round in 0..a.rounds.max(1) {
        for &c in &a.clients {
            let kazoo_first = round % 2 == 1 && a.python.is_some();
            for step in 0..2 {
                let kazoo = (step == 0) == kazoo_first;
                let leader = cluster.leader().await?;
                let at_s = ready.elapsed().as_secs_f64();
                let phase = if kazoo {
                    let Some(python) = &a.python else { continue };
                    let hosts: Vec<String> = (0..c)
                        .map(|i| cluster.addrs()[(leader + i) % 3].clone())
                        .collect();
                    kazoo_phase(python, a, &pids, &hosts, round, c, at_s).await?
                } else {
                    let u = uncontended::run(&b, &pids, leader, 3, c, a.secs, false, round).await?;
                    Phase {
                        client: "bench".into(),
                        round,
                        clients: c,
                        at_s,
                        cycles_per_sec: u.cycles_per_sec,
                        acquire_p50_ms: u.acquire.p50_ms,
                        acquire_p99_ms: u.acquire.p99_ms,
                        max_ms: u.acquire.max_ms.max(u.release.max_ms),
                        server_cpu_us_per_cycle: u.server_cpu_us_per_cycle,
                        errors: u.errors,
                        other_cores: u.cpu.other_cores(),
                    }
                };
                say(format!(
                    "  {:>5} c={:<3} round {round}: {:7.0} cycles/s, p50 {:.2} ms, p99 {:.2} ms, \
                     max {:.0} ms, {:5.0} µs server CPU/cycle, others {:.1} cores",
                    phase.client,
                    c,
                    phase.cycles_per_sec,
                    phase.acquire_p50_ms,
                    phase.acquire_p99_ms,
                    phase.max_ms,
                    phase.server_cpu_us_per_cycle,
                    phase.other_cores
                ));
                out.push(phase);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    Ok(out)
}

async fn kazoo_phase(
    python: &std::path::Path,
    a: &CrossArgs,
    pids: &[u32],
    hosts: &[String],
    round: usize,
    clients: usize,
    at_s: f64,
) -> anyhow::Result<Phase> {
    let mut child = tokio::process::Command::new(python)
        .arg(&a.script)
        .arg("--hosts")
        .arg(hosts.join(","))
        .arg("--secs")
        .arg(a.secs.to_string())
        .arg("--procs")
        .arg(a.kazoo_procs.max(1).to_string())
        .arg("--tag")
        .arg(format!("k{round}-"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", python.display()))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        bail!("kazoo script: no pipes");
    };
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .context("kazoo script: no `ready` within 120 s")??;
    if first.as_deref() != Some("ready") {
        bail!("kazoo script said {first:?} instead of `ready`");
    }
    let cpu0 = CpuSample::take(pids);
    stdin.write_all(b"go\n").await?;
    stdin.flush().await?;
    let limit = Duration::from_secs_f64(a.secs + 60.0);
    let line = tokio::time::timeout(limit, lines.next_line())
        .await
        .context("kazoo script: no result")??
        .ok_or_else(|| anyhow::anyhow!("kazoo script ended without a result"))?;
    let cpu = cpu0.until(&CpuSample::take(pids));
    let r: KazooResult =
        serde_json::from_str(&line).with_context(|| format!("kazoo script said {line:?}"))?;
    let status = child.wait().await?;
    if !status.success() {
        bail!("kazoo script exited with {status}");
    }
    Ok(Phase {
        client: "kazoo".into(),
        round,
        clients,
        at_s,
        cycles_per_sec: r.cycles as f64 / r.secs.max(1e-9),
        acquire_p50_ms: r.acquire_p50_ms,
        acquire_p99_ms: r.acquire_p99_ms,
        max_ms: r.acquire_max_ms.max(r.release_max_ms),
        server_cpu_us_per_cycle: cpu.per_op_us(r.cycles),
        errors: r.errors,
        other_cores: cpu.other_cores(),
    })
}

/// Per client count: bench ÷ kazoo per round (cycles/s and CPU per
/// cycle), with the median and range, as a Markdown table.
pub fn summary(phases: &[Phase]) -> String {
    let mut counts: Vec<usize> = phases.iter().map(|p| p.clients).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut s = String::from(
        "| clients | bench cycles/s | kazoo cycles/s | bench ÷ kazoo (median, range) | \
         bench CPU µs/cycle | kazoo CPU µs/cycle | bench ÷ kazoo CPU (median, range) | \
         bench acquire p99 ms (worst) |\n|---|---|---|---|---|---|---|---|\n",
    );
    for c in counts {
        let of = |who: &str| -> Vec<&Phase> {
            phases
                .iter()
                .filter(|p| p.clients == c && p.client == who)
                .collect()
        };
        let (bench, kazoo) = (of("bench"), of("kazoo"));
        let pairs = |f: fn(&Phase) -> f64| -> Vec<f64> {
            bench
                .iter()
                .filter_map(|b| {
                    kazoo
                        .iter()
                        .find(|k| k.round == b.round)
                        .map(|k| f(b) / f(k))
                })
                .filter(|r| r.is_finite())
                .collect()
        };
        let med = |v: Vec<f64>| -> String {
            if v.is_empty() {
                return "–".into();
            }
            let mut v = v;
            v.sort_by(f64::total_cmp);
            format!("{:.2} ({:.2}–{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let list = |v: &[&Phase], f: fn(&Phase) -> f64| -> String {
            v.iter()
                .map(|p| format!("{:.0}", f(p)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let worst_p99 = bench
            .iter()
            .map(|p| p.acquire_p99_ms)
            .fold(0.0f64, f64::max);
        s += &format!(
            "| {c} | {} | {} | {} | {} | {} | {} | {worst_p99:.1} |\n",
            list(&bench, |p| p.cycles_per_sec),
            list(&kazoo, |p| p.cycles_per_sec),
            med(pairs(|p| p.cycles_per_sec)),
            list(&bench, |p| p.server_cpu_us_per_cycle),
            list(&kazoo, |p| p.server_cpu_us_per_cycle),
            med(pairs(|p| p.server_cpu_us_per_cycle)),
        );
    }
    s
}
