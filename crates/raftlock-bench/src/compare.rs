//! The whole comparison: for each system, fresh clusters for each group
//! of workloads (latency, sessions, failover, restart), the same workload
//! code through that system's backend; results saved after every system.
//! The latency group (uncontended, put, contended) runs `--runs` times on
//! a fresh cluster each, unpinned and/or pinned (`--pin`); herd runs on
//! the first unpinned one.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::backend::etcd::Etcd;
use crate::backend::raftlock::Raftlock;
use crate::backend::zookeeper::Zookeeper;
use crate::backend::Backend;
use crate::cluster::{Cluster, System, Tools};
use crate::disturbance;
use crate::pin;
use crate::procfs::CpuUsage;
use crate::progress::say;
use crate::report::{self, Report, SystemReport};
use crate::warmup;
use crate::workload::{contended, failover, herd, put, restart, sessions, uncontended, Params};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Workload {
    Uncontended,
    Put,
    Contended,
    Herd,
    /// The uncontended loop at `--scale-sessions` concurrent sessions.
    Scale,
    Sessions,
    Failover,
    Restart,
}

/// raftlock's ZooKeeper door serves at most this many connections per
/// member (raftlock-zookeeper's `DoorConfig`, not configurable from the
/// cluster file); a ZooKeeper session is a connection.
const DOOR_MAX_CONNECTIONS: usize = 1024;

/// The systems that are raftlock behind a protocol door: they run only
/// `--door-workloads` (the latency ones by default), `--door-runs` times.
pub fn is_door(system: System) -> bool {
    matches!(system, System::RaftlockZk | System::RaftlockEtcd)
}

/// ZooKeeper sessions are TCP connections: above this many, one client
/// machine runs out of ephemeral ports towards three servers.
const ZK_MAX_SESSIONS: usize = 20_000;

pub struct Run {
    pub tools: Tools,
    pub params: Params,
    pub systems: Vec<System>,
    pub workloads: Vec<Workload>,
    /// What the door systems run (intersected with `workloads`).
    pub door_workloads: Vec<Workload>,
    pub scratch: PathBuf,
    pub pidfile: PathBuf,
    pub out_dir: PathBuf,
    pub command: String,
    pub keep_data: bool,
}

// A report's timestamp, shown to people; no deadline depends on it.
#[allow(clippy::disallowed_methods)]
fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub async fn compare(run: Run) -> anyhow::Result<Report> {
    std::fs::create_dir_all(&run.scratch)?;
    let mut report = Report {
        started_unix: now_unix(),
        finished_unix: 0,
        command: run.command.clone(),
        machine: crate::machine::describe(&run.scratch),
        params: run.params.clone(),
        systems: Vec::new(),
    };
    say(format!(
        "machine: {} cores, {}; fsync p50 {:.2} ms",
        report.machine.nproc, report.machine.cpu_model, report.machine.fsync_p50_ms
    ));
    for &system in &run.systems {
        say(format!("== {}", system.name()));
        let sr = match system {
            System::Raftlock => run_system(system, &|a| ready(Raftlock::new(&a)), &run).await,
            System::EtcdGateway => run_system(system, &|a| ready(Etcd::new(&a)), &run).await,
            System::Zookeeper | System::RaftlockZk => {
                let make = |a: Vec<String>| ready(Ok(Zookeeper::of(system, &a)));
                run_system(system, &make, &run).await
            }
            #[cfg(feature = "etcd-grpc")]
            System::Etcd | System::RaftlockEtcd => {
                use crate::backend::etcd_grpc::EtcdGrpc;
                run_system(
                    system,
                    &|a| Box::pin(async move { EtcdGrpc::new(&a, system).await }),
                    &run,
                )
                .await
            }
            #[cfg(not(feature = "etcd-grpc"))]
            System::Etcd | System::RaftlockEtcd => SystemReport {
                system: system.name().to_string(),
                notes: vec![
                    "not measured: this raftlock-bench was built without the `etcd-grpc` \
                     feature (bench/compare.sh builds with it; `--systems etcd-gateway` \
                     measures etcd through its JSON gateway)"
                        .into(),
                ],
                ..Default::default()
            },
        };
        report.systems.push(sr);
        report.finished_unix = now_unix();
        report.machine.loadavg_end = crate::procfs::loadavg1();
        report::save_json(&report, &run.out_dir)?;
    }
    Ok(report)
}

/// Makes a system's client from its members' addresses.
type Make<'a, B> =
    &'a dyn Fn(Vec<String>) -> Pin<Box<dyn Future<Output = anyhow::Result<B>> + Send>>;

fn ready<B: Send + 'static>(
    b: anyhow::Result<B>,
) -> Pin<Box<dyn Future<Output = anyhow::Result<B>> + Send>> {
    Box::pin(std::future::ready(b))
}

async fn run_system<B: Backend>(system: System, make: Make<'_, B>, run: &Run) -> SystemReport {
    let mut sr = SystemReport {
        system: system.name().to_string(),
        ..Default::default()
    };
    let door = is_door(system);
    let wants =
        |w: Workload| run.workloads.contains(&w) && (!door || run.door_workloads.contains(&w));
    let p = &run.params;
    let left_out: Vec<String> = run
        .workloads
        .iter()
        .filter(|w| door && !run.door_workloads.contains(w))
        .map(|w| format!("{w:?}").to_lowercase())
        .collect();
    if !left_out.is_empty() {
        sr.notes.push(format!(
            "{} not run: a door system runs only --door-workloads (the replicated core \
             behind the door is the one the raftlock rows measure)",
            left_out.join(", ")
        ));
    }
    let (runs, pin_mode) = if door {
        (p.door_runs, p.door_pin)
    } else {
        (p.runs, p.pin)
    };

    let latency = [
        Workload::Uncontended,
        Workload::Put,
        Workload::Contended,
        Workload::Herd,
        Workload::Scale,
    ];
    if latency.iter().any(|&w| wants(w)) {
        for &pinned in pin_mode.runs() {
            if pinned && !pin::can_pin() {
                sr.notes
                    .push("pinned runs skipped: this machine has one CPU".into());
                continue;
            }
            for n in 0..runs.max(1) {
                // Herd and scale run once, on the first unpinned cluster
                // (the first pinned one when every run is pinned).
                let first = n == 0 && (!pinned || pin_mode == pin::PinMode::On);
                let herd_too = wants(Workload::Herd) && first;
                let scale_too = wants(Workload::Scale) && first;
                let only_extras = !latency[..3].iter().any(|&w| wants(w));
                if only_extras && !herd_too && !scale_too {
                    continue;
                }
                let phase = format!("latency-{}run{n}", if pinned { "pinned-" } else { "" });
                if let Err(e) = set_pinning(pinned) {
                    sr.notes.push(format!("{phase}: {e:#}"));
                    continue;
                }
                if let Some((mut cluster, b)) =
                    start(system, &phase, make, run, &mut sr, pinned).await
                {
                    latency_group(&b, &cluster, run, &mut sr, pinned, n, door).await;
                    if scale_too {
                        scale_group(&b, &cluster, run, &mut sr, pinned).await;
                    }
                    if herd_too {
                        herd_group(&b, &cluster, run, &mut sr).await;
                    }
                    finish(b, &mut cluster, run).await;
                }
                if let Err(e) = set_pinning(false) {
                    sr.notes.push(format!("{phase}: {e:#}"));
                }
            }
        }
    }
    if wants(Workload::Sessions) {
        for &n in &p.sessions {
            if matches!(system, System::Zookeeper | System::RaftlockZk) && n > ZK_MAX_SESSIONS {
                sr.notes.push(format!(
                    "sessions {n}: skipped; a ZooKeeper session is a TCP connection and one \
                     load generator on 127.0.0.1 has ~28k ephemeral ports per server"
                ));
                continue;
            }
            if let Some((mut cluster, b)) =
                start(system, &format!("sessions-{n}"), make, run, &mut sr, false).await
            {
                match sessions::run(&b, &cluster, n, p.sessions_window_secs, p.setup_concurrency)
                    .await
                {
                    Ok(x) => sr.sessions.push(x),
                    Err(e) => sr.notes.push(format!("sessions {n}: {e:#}")),
                }
                finish(b, &mut cluster, run).await;
            }
        }
    }
    if wants(Workload::Failover) {
        if let Some((mut cluster, b)) = start(system, "failover", make, run, &mut sr, false).await {
            match failover::run(
                &b,
                &mut cluster,
                p.contended_clients,
                p.failover_secs,
                p.failover_kill_at_secs,
            )
            .await
            {
                Ok(x) => sr.failover = Some(x),
                Err(e) => sr.notes.push(format!("failover: {e:#}")),
            }
            finish(b, &mut cluster, run).await;
        }
    }
    if wants(Workload::Restart) {
        if let Some((mut cluster, b)) = start(system, "restart", make, run, &mut sr, false).await {
            match restart::run(&b, &mut cluster, p.restart_nodes).await {
                Ok(x) => sr.restart = Some(x),
                Err(e) => sr.notes.push(format!("restart: {e:#}")),
            }
            finish(b, &mut cluster, run).await;
        }
    }
    sr
}

/// The load generator on its own core (pinned) or on every core.
fn set_pinning(pinned: bool) -> anyhow::Result<()> {
    if pinned {
        pin::pin_self(&[pin::BENCH_CPU])
    } else {
        pin::pin_self(&pin::all_cpus())
    }
}

async fn latency_group<B: Backend>(
    b: &B,
    cluster: &Cluster,
    run: &Run,
    sr: &mut SystemReport,
    pinned: bool,
    n: usize,
    door: bool,
) {
    let p = &run.params;
    let wants =
        |w: Workload| run.workloads.contains(&w) && (!door || run.door_workloads.contains(&w));
    let pids = cluster.pids();
    let members = cluster.members.len();
    let tag = |what: &str| format!("{what}{} run {n}", if pinned { " pinned" } else { "" });
    if wants(Workload::Uncontended) {
        let measure = |leader, c| {
            uncontended::run(b, &pids, leader, members, c, p.uncontended_secs, pinned, n)
        };
        let what = tag("uncontended");
        each_client_count(
            cluster,
            sr,
            &p.clients,
            &what,
            |sr| &mut sr.uncontended,
            |x| &x.cpu,
            measure,
        )
        .await;
    }
    if wants(Workload::Put) {
        let measure = |leader, c| put::run(b, &pids, leader, members, c, p.put_secs, pinned, n);
        each_client_count(
            cluster,
            sr,
            &p.put_clients,
            &tag("put"),
            |sr| &mut sr.put,
            |x| &x.cpu,
            measure,
        )
        .await;
    }
    if wants(Workload::Contended) {
        let got = disturbance::quietest(
            || {
                contended::run(
                    b,
                    &pids,
                    members,
                    p.contended_clients,
                    p.contended_secs,
                    pinned,
                    n,
                )
            },
            |x| &x.cpu,
        )
        .await;
        match got {
            Ok((x, how)) => {
                note_remeasured(sr, how, &tag("contended"));
                sr.contended.push(x);
            }
            Err(e) => sr.notes.push(format!("{}: {e:#}", tag("contended"))),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Says in the report (and on the terminal) that a phase was measured
/// again because the machine was busy elsewhere.
/// `measure(leader, clients)` for each of `counts` (the quietest of its
/// tries, against the leader of the moment) into `rows`; a failure
/// becomes a note tagged `what`.
async fn each_client_count<T, F, Fut>(
    cluster: &Cluster,
    sr: &mut SystemReport,
    counts: &[usize],
    what: &str,
    rows: fn(&mut SystemReport) -> &mut Vec<T>,
    cpu: fn(&T) -> &CpuUsage,
    measure: F,
) where
    F: Fn(usize, usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    for &c in counts {
        let leader = match cluster.leader().await {
            Ok(l) => l,
            Err(e) => {
                sr.notes.push(format!("{what} {c}: {e:#}"));
                continue;
            }
        };
        match disturbance::quietest(|| measure(leader, c), cpu).await {
            Ok((x, how)) => {
                note_remeasured(sr, how, &format!("{what} c={c}"));
                rows(sr).push(x);
            }
            Err(e) => sr.notes.push(format!("{what} {c}: {e:#}")),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn note_remeasured(sr: &mut SystemReport, how: Option<disturbance::Remeasured>, what: &str) {
    if let Some(how) = how {
        let note = how.note(what);
        say(format!("  {note}"));
        sr.notes.push(note);
    }
}

/// The uncontended loop at each `--scale-sessions` count on the first
/// latency cluster (after its uncontended rows, whose counts it takes as
/// measured), skipping (with a note) counts a system cannot take from one
/// load generator.
async fn scale_group<B: Backend>(
    b: &B,
    cluster: &Cluster,
    run: &Run,
    sr: &mut SystemReport,
    pinned: bool,
) {
    let p = &run.params;
    let pids = cluster.pids();
    let members = cluster.members.len();
    let system = cluster.system;
    for &n in &p.scale_sessions {
        if let Some(why) = scale_limit(system, n, members) {
            sr.notes.push(format!("scale {n}: skipped; {why}"));
            continue;
        }
        // A count the uncontended workload just measured on this cluster
        // is that row (the same loop, the same cluster), not measured twice.
        let same = sr
            .uncontended
            .iter()
            .find(|u| u.clients == n && u.pinned == pinned && u.run == 0)
            .cloned();
        if let Some(u) = same {
            sr.scale.push(u);
            continue;
        }
        let leader = match cluster.leader().await {
            Ok(l) => l,
            Err(e) => {
                sr.notes.push(format!("scale {n}: {e:#}"));
                continue;
            }
        };
        match uncontended::run(b, &pids, leader, members, n, p.scale_secs, pinned, 0).await {
            Ok(x) => sr.scale.push(x),
            Err(e) => sr.notes.push(format!("scale {n}: {e:#}")),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Why `system` cannot hold `n` concurrent sessions from this one load
/// generator, if it cannot.
pub fn scale_limit(system: System, n: usize, members: usize) -> Option<String> {
    let per_member = n.div_ceil(members.max(1));
    match system {
        System::Zookeeper if n > ZK_MAX_SESSIONS => Some(format!(
            "a ZooKeeper session is a TCP connection, and one load generator on 127.0.0.1 \
             opens at most {ZK_MAX_SESSIONS} here"
        )),
        System::RaftlockZk if per_member > DOOR_MAX_CONNECTIONS => Some(format!(
            "{per_member} connections per member; raftlock's ZooKeeper door serves at most \
             {DOOR_MAX_CONNECTIONS} per member"
        )),
        _ => None,
    }
}

async fn herd_group<B: Backend>(b: &B, cluster: &Cluster, run: &Run, sr: &mut SystemReport) {
    let p = &run.params;
    let pids = cluster.pids();
    let members = cluster.members.len();
    for &w in &p.herd_waiters {
        if let Some(why) = herd_limit(cluster.system, w, members) {
            sr.notes.push(format!("herd {w}: skipped; {why}"));
            continue;
        }
        match herd::run(b, &pids, members, w, p.herd_rounds).await {
            Ok(x) => sr.herd.push(x),
            Err(e) => sr.notes.push(format!("herd {w}: {e:#}")),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The most waiters the rivals queue on one lock: the 100,000-waiter case
/// (`--long`) is raftlock's alone, a ZooKeeper waiter being a connection.
pub const RIVAL_MAX_WAITERS: usize = 10_000;

/// Why `system` cannot queue `w` waiters from this load generator, if it
/// cannot: over the rivals' bound, over the ZooKeeper door's connections,
/// or (raftlock over HTTP/1.1, one connection per waiting long poll) over
/// this process's file descriptors or the ephemeral ports towards one
/// member.
pub fn herd_limit(system: System, w: usize, members: usize) -> Option<String> {
    let per_member = (w + 1).div_ceil(members.max(1));
    match system {
        System::Etcd | System::EtcdGateway | System::Zookeeper if w > RIVAL_MAX_WAITERS => {
            Some(format!(
                "the rivals queue at most {RIVAL_MAX_WAITERS} waiters in this bench; \
                 more is raftlock's alone"
            ))
        }
        System::RaftlockZk if per_member > DOOR_MAX_CONNECTIONS => Some(format!(
            "{per_member} connections per member; raftlock's ZooKeeper door serves at most \
             {DOOR_MAX_CONNECTIONS} per member"
        )),
        System::Raftlock => {
            let fds = crate::procfs::fd_limit();
            let ports = crate::procfs::ephemeral_ports();
            if fds.is_some_and(|f| f < w + 1024) {
                Some(format!(
                    "one connection per waiting long poll needs {} file descriptors, the limit \
                     is {} (raise `ulimit -n`)",
                    w + 1024,
                    fds.unwrap_or(0)
                ))
            } else if ports.is_some_and(|p| p < per_member + 1024) {
                Some(format!(
                    "{per_member} connections to each member need as many ephemeral ports, \
                     net.ipv4.ip_local_port_range gives {} (widen it)",
                    ports.unwrap_or(0)
                ))
            } else {
                None
            }
        }
        _ => None,
    }
}

async fn start<B: Backend>(
    system: System,
    phase: &str,
    make: Make<'_, B>,
    run: &Run,
    sr: &mut SystemReport,
    pinned: bool,
) -> Option<(Cluster, B)> {
    let dir = run.scratch.join(format!("{}-{phase}", system.name()));
    let _ = std::fs::remove_dir_all(&dir);
    say(format!(
        "  starting a {} cluster for {phase} in {}",
        system.name(),
        dir.display()
    ));
    let cpus: &[usize] = if pinned { &[pin::SERVER_CPU] } else { &[] };
    let cluster = match Cluster::start(system, &run.tools, &dir, &run.pidfile, cpus).await {
        Ok(c) => c,
        Err(e) => {
            sr.notes
                .push(format!("{phase}: cluster did not start: {e:#}"));
            return None;
        }
    };
    if sr.version.is_empty() {
        sr.version = cluster.version().await;
    }
    match make(cluster.addrs()).await {
        Ok(b) => {
            warm_up(&b, &cluster, phase, sr).await;
            Some((cluster, b))
        }
        Err(e) => {
            sr.notes.push(format!("{phase}: client: {e:#}"));
            let mut cluster = cluster;
            cluster.stop().await;
            None
        }
    }
}

/// A fresh cluster serves unrecorded load until it has settled
/// ([`warmup`]), as a cluster that has been running has; one that did not
/// settle is measured anyway and says so in the report.
async fn warm_up<B: Backend>(b: &B, cluster: &Cluster, phase: &str, sr: &mut SystemReport) {
    let Ok(leader) = cluster.leader().await else {
        return;
    };
    let pids = cluster.pids();
    let w = warmup::until_settled(b, &pids, leader, cluster.members.len()).await;
    if !w.settled {
        sr.notes.push(format!(
            "{phase}: the warm-up did not settle in {:.0} s ({} rounds; last round {:.0} µs \
             of server CPU per cycle, {:.0} per put, {:.1}% of the servers' CPU JIT \
             compiling): read this cluster's rows with care",
            w.secs,
            w.rounds,
            w.cycle_cpu_us,
            w.put_cpu_us,
            w.jit_share * 100.0
        ));
    }
}

/// Drops the clients first (a ZooKeeper client whose server went away
/// would keep reconnecting), then stops the cluster.
async fn finish<B: Backend>(b: B, cluster: &mut Cluster, run: &Run) {
    drop(b);
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.stop().await;
    if !run.keep_data {
        let _ = std::fs::remove_dir_all(&cluster.dir);
    }
    // Let the machine settle between phases.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_skips_only_what_a_system_cannot_take() {
        assert!(scale_limit(System::Raftlock, 4096, 3).is_none());
        assert!(scale_limit(System::Zookeeper, 4096, 3).is_none());
        assert!(scale_limit(System::Etcd, 4096, 3).is_none());
        // 1,366 connections per member: over the ZooKeeper door's 1,024.
        assert!(scale_limit(System::RaftlockZk, 4096, 3).is_some());
        assert!(scale_limit(System::RaftlockZk, 3072, 3).is_none());
        assert!(scale_limit(System::Zookeeper, ZK_MAX_SESSIONS + 1, 3).is_some());
    }

    #[test]
    fn the_long_herd_is_raftlocks_alone() {
        assert!(herd_limit(System::Zookeeper, 100_000, 3).is_some());
        assert!(herd_limit(System::Etcd, 100_000, 3).is_some());
        assert!(herd_limit(System::Etcd, 10_000, 3).is_none());
        assert!(herd_limit(System::RaftlockZk, 1000, 3).is_none());
        assert!(herd_limit(System::RaftlockZk, 10_000, 3).is_some());
        assert!(herd_limit(System::Raftlock, 1000, 3).is_none());
    }

    #[test]
    fn door_systems_are_the_two_doors() {
        assert!(is_door(System::RaftlockZk) && is_door(System::RaftlockEtcd));
        assert!(!is_door(System::Raftlock) && !is_door(System::Zookeeper));
    }
}
