//! One test run, start to finish: start the cluster, run the clients and
//! the nemesis for the time limit, heal, check that the cluster recovers
//! (quiet phase with final reads), check the history, write the report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tokio::sync::watch;

use crate::checker::linear::LinearConfig;
use crate::checker::{check_history, CheckOptions, CheckResult, Verdict, Workload};
use crate::control::{log_tail, Cluster, ClusterOptions, ClusterTiming};
use crate::nemesis::{self, Fault, Pacing};
use crate::report::results::overall;
use crate::report::{write_run_report, RunResults};
use crate::runlog::RunLog;
use crate::workload::route::Routing;
use crate::workload::{spawn_clients, Ctx, Settings};

mod quiet;

/// How long clients get to finish their last op and end their sessions
/// after the time limit, before they are cut off (their open ops then
/// count as `info`).
const WIND_DOWN: Duration = Duration::from_secs(60);

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// What the clients do.
    pub workload: Workload,
    /// Faults the nemesis may inject.
    pub faults: Vec<Fault>,
    /// Length of the fault phase.
    pub time_limit: Duration,
    /// Client tasks.
    pub concurrency: usize,
    /// Seeds the op mix and the fault schedule.
    pub seed: u64,
    /// Cluster members at the start.
    pub nodes: usize,
    /// Spare member ids the `membership` nemesis may add (only with that
    /// nemesis).
    pub spares: usize,
    /// The `raftlock` binary.
    pub raftlock_bin: PathBuf,
    /// How clients reach the cluster: sticky (default), random, or
    /// embedded in the members' processes.
    pub clients: Routing,
    /// `raftlock-jepsen` itself, which runs the members in the embedded
    /// mode (`raftlock-jepsen member`).
    pub member_bin: PathBuf,
    /// Runs go to `<store>/<workload>-<time>-s<seed>/`.
    pub store: PathBuf,
    /// Client knobs.
    pub settings: Settings,
    /// Fault pacing.
    pub pacing: Pacing,
    /// Cluster timing.
    pub timing: ClusterTiming,
    /// Linearizability search budget.
    pub linear: LinearConfig,
}

impl TestOptions {
    /// Defaults for `workload`: 3 nodes, 10 clients, 60 s, seed 0, no
    /// faults, the binary next to this one, runs under `jepsen/store`.
    pub fn new(workload: Workload) -> TestOptions {
        TestOptions {
            workload,
            faults: Vec::new(),
            time_limit: Duration::from_secs(60),
            concurrency: 10,
            seed: 0,
            nodes: 3,
            spares: 2,
            raftlock_bin: crate::control::default_raftlock_bin(),
            clients: Routing::default(),
            member_bin: crate::control::default_member_bin(),
            store: crate::control::setup::workspace_root().join("jepsen/store"),
            settings: Settings {
                sessions: workload != Workload::Register,
                ..Settings::default()
            },
            pacing: Pacing::default(),
            timing: ClusterTiming::default(),
            linear: LinearConfig::default(),
        }
    }

    /// The command line that replays this run.
    pub fn replay_command(&self) -> String {
        let nemesis = if self.faults.is_empty() {
            "none".to_string()
        } else {
            self.faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "raftlock-jepsen test --workload {} --clients {} --nemesis {nemesis} \
             --time-limit {} --concurrency {} --nodes {} --seed {}{}",
            workload_name(self.workload),
            self.clients,
            self.time_limit.as_secs(),
            self.concurrency,
            self.nodes,
            self.seed,
            if self.settings.inject_zk_no_relist {
                " --inject-zk-no-relist"
            } else if self.settings.inject_etcd_no_requery {
                " --inject-etcd-no-requery"
            } else {
                ""
            }
        )
    }
}

/// The name of a workload on the command line.
pub fn workload_name(w: Workload) -> &'static str {
    match w {
        Workload::Register => "register",
        Workload::Mutex => "mutex",
        Workload::Fenced => "fenced",
        Workload::RwLock => "rwlock",
        Workload::Semaphore => "semaphore",
        Workload::LockDelay => "lock-delay",
        Workload::MultiLock => "multilock",
        Workload::ZkMutex => "zk-mutex",
        Workload::EtcdMutex => "etcd-mutex",
    }
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct TestOutcome {
    /// The run's directory (report, history, node logs).
    pub dir: PathBuf,
    /// Every checker valid → valid.
    pub verdict: Verdict,
    /// Each checker's result, the recovery check last.
    pub results: Vec<CheckResult>,
    /// Client operations in the history.
    pub operations: usize,
    /// Faults injected.
    pub faults: usize,
    /// Membership changes: completed adds, completed removes, failed.
    pub membership: (usize, usize, usize),
    /// The one-screen summary.
    pub summary: String,
}

/// Size of each member's data tmpfs in runs with the `disk-fill` fault:
/// room for minutes of log and snapshots, filled in a blink.
const DATA_TMPFS_MB: u64 = 64;

/// The cluster a run of `opts` needs, or why the combination of
/// workload, clients and faults cannot run (before anything starts):
///
/// - a disk fault (`disk-full`, `slow-fsync`) or embedded clients: every
///   member, the spares too, is a `raftlock-jepsen member` process (the
///   fault hooks and the embedded clients live there), otherwise
///   `raftlock serve`; both serve the ZooKeeper and etcd doors the
///   cluster file gives them, so `zk-mutex` and `etcd-mutex` take every
///   fault (but not embedded clients: they speak to the doors);
/// - `membership`: two spare ids, which join with `--join` as the same
///   kind of process as the founders;
/// - `disk-fill`: every member's data directory, the spares' too, on a
///   tmpfs of its own (mounting needs root: refused at start otherwise).
pub fn cluster_options(opts: &TestOptions, log_dir: PathBuf) -> anyhow::Result<ClusterOptions> {
    anyhow::ensure!(opts.nodes >= 1, "--nodes must be at least 1");
    anyhow::ensure!(opts.concurrency >= 1, "--concurrency must be at least 1");
    let embedded = opts.clients == Routing::Embedded;
    anyhow::ensure!(
        !embedded || opts.workload != Workload::Register,
        "--clients embedded runs every workload but register (its reads and writes are the HTTP API's)"
    );
    let zookeeper = opts.workload == Workload::ZkMutex;
    let etcd = opts.workload == Workload::EtcdMutex;
    if zookeeper || etcd {
        let (name, door) = if zookeeper {
            ("zk-mutex", "ZooKeeper")
        } else {
            ("etcd-mutex", "etcd")
        };
        anyhow::ensure!(
            !embedded,
            "--workload {name} speaks {door} to the members' doors: not with --clients embedded"
        );
    }
    let membership = opts.faults.contains(&Fault::Membership);
    Ok(ClusterOptions {
        nodes: opts.nodes,
        spares: if membership { opts.spares } else { 0 },
        bin: opts.raftlock_bin.clone(),
        // Disk faults go through the members' fault hooks.
        member_bin: (embedded || opts.faults.iter().any(|f| f.is_disk()))
            .then(|| opts.member_bin.clone()),
        embedded,
        log_dir,
        timing: opts.timing.clone(),
        zookeeper,
        etcd,
        data_tmpfs_mb: opts
            .faults
            .iter()
            .any(|f| f.needs_tmpfs())
            .then_some(DATA_TMPFS_MB),
    })
}

/// Runs one test.
pub async fn run(opts: &TestOptions) -> anyhow::Result<TestOutcome> {
    let plan = cluster_options(opts, PathBuf::new())?;
    let dir = run_dir(&opts.store, opts.workload, opts.seed)?;
    let membership = opts.faults.contains(&Fault::Membership);
    let cluster = Arc::new(
        Cluster::start(&ClusterOptions {
            log_dir: dir.clone(),
            ..plan
        })
        .await?,
    );
    if let Err(problem) = cluster.wait_healthy(Duration::from_secs(60)).await {
        cluster.shutdown().await;
        let tails: String = cluster
            .ids
            .iter()
            .map(|&id| format!("\n--- node-{id}.log (tail)\n{}", log_tail(&dir, id, 15)))
            .collect();
        anyhow::bail!("the cluster did not become healthy: {problem}{tails}");
    }

    let log = Arc::new(RunLog::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Arc::new(
        Ctx::new(
            Arc::clone(&log),
            cluster.api.clone(),
            cluster
                .control
                .clone()
                .unwrap_or_else(|| cluster.api.clone()),
            Arc::clone(&cluster.roster),
            opts.settings.clone(),
            (opts.concurrency, opts.clients),
            stop_rx.clone(),
        )
        .with_zk_doors(cluster.zk_doors.clone())
        .with_etcd_doors(cluster.etcd_doors.clone()),
    );
    let clients = spawn_clients(opts.workload, &ctx, opts.seed);
    let audit_log = Arc::new(crate::workload::etcd_mutex::AuditLog::default());
    let auditor = (opts.workload == Workload::EtcdMutex).then(|| {
        crate::workload::etcd_mutex::spawn_auditor(Arc::clone(&ctx), Arc::clone(&audit_log))
    });
    let steps = nemesis::schedule(&opts.faults, opts.seed, &opts.pacing, opts.time_limit);
    let nemesis_task = tokio::spawn(nemesis::run(
        Arc::clone(&cluster),
        Arc::clone(&ctx),
        steps,
        stop_rx,
    ));

    tokio::time::sleep(opts.time_limit).await;
    stop_tx.send_replace(true);
    let injected = nemesis_task.await.unwrap_or(0);
    // Belt and braces: the nemesis healed, unless its task failed.
    nemesis::heal(&cluster, &ctx).await;
    let healed = std::time::Instant::now();
    let deadline = tokio::time::Instant::now() + WIND_DOWN;
    for mut client in clients {
        if tokio::time::timeout_at(deadline, &mut client)
            .await
            .is_err()
        {
            client.abort();
        }
    }

    // A grant counts once read: stopping the auditor mid-read loses none.
    if let Some(auditor) = auditor {
        auditor.abort();
    }
    let recovery = quiet::phase(&cluster, &ctx, opts.workload, healed).await;
    let door_audit = if opts.workload == Workload::EtcdMutex {
        Some(quiet::etcd_audit(&cluster, &ctx, &audit_log).await)
    } else {
        None
    };
    cluster.shutdown().await;

    let history = log.history().context("building the history")?;
    let mut results = check_history(
        &history,
        &CheckOptions {
            workload: Some(opts.workload),
            linear: opts.linear.clone(),
        },
    )
    .context("the recorded history is malformed (a harness bug)")?;
    results.extend(door_audit);
    results.push(recovery);
    let files = write_run_report(&dir, &history, &results).context("writing the report")?;
    link_latest(&opts.store, &dir);

    let ops = history.operations().context("pairing operations")?;
    let run = RunResults::new(&history, &ops, &results);
    let starts = cluster.starts().await;
    let restarts: u32 = starts.values().map(|s| s.saturating_sub(1)).sum();
    let changes = cluster.changes.get();
    let membership_line = if membership {
        format!(
            "membership changes: {} adds, {} removes, {} failed; members at the end: {}\n",
            changes.0,
            changes.1,
            changes.2,
            cluster
                .members()
                .iter()
                .map(|i| format!("n{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    } else {
        String::new()
    };
    let summary = format!(
        "raftlock-jepsen test: workload {}, {} nodes, {} {} clients, {} s, seed {}\n\
         nemesis: {}\n\
         replay: {}\n\
         processes: {}, faults injected: {injected}, node restarts: {restarts}\n\
         {membership_line}{}report: {}\n",
        workload_name(opts.workload),
        opts.nodes,
        opts.concurrency,
        opts.clients,
        opts.time_limit.as_secs(),
        opts.seed,
        if opts.faults.is_empty() {
            "none".to_string()
        } else {
            opts.faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        },
        opts.replay_command(),
        ctx.pids_used(),
        run.summary(),
        files.timeline.display()
    );
    Ok(TestOutcome {
        dir,
        verdict: overall(&results),
        results,
        operations: ops.len(),
        faults: injected,
        membership: changes,
        summary,
    })
}

/// A fresh directory `<store>/<workload>-<UTC time>-s<seed>[-n]`.
fn run_dir(store: &Path, workload: Workload, seed: u64) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(store).with_context(|| format!("creating {}", store.display()))?;
    // A directory name for people, not a deadline (docs/design.md, Time).
    #[allow(clippy::disallowed_methods)]
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("{}-{}-s{seed}", workload_name(workload), utc_stamp(secs));
    for n in 0..1000 {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = store.join(name);
        if std::fs::create_dir(&dir).is_ok() {
            return Ok(dir);
        }
    }
    anyhow::bail!("could not create a run directory under {}", store.display())
}

/// `store/latest` → the newest run (best effort, like Jepsen's).
fn link_latest(store: &Path, dir: &Path) {
    let latest = store.join("latest");
    let _ = std::fs::remove_file(&latest);
    if let Some(name) = dir.file_name() {
        let _ = std::os::unix::fs::symlink(name, &latest);
    }
}

/// `YYYYMMDDTHHMMSS` in UTC for seconds since the epoch.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000");
        assert_eq!(utc_stamp(1_735_689_599), "20241231T235959");
    }

    /// Every fault the CLI offers, one by one.
    fn every_fault() -> Vec<Fault> {
        let faults = Fault::parse_list("all,disk,disk-fill").unwrap_or_default();
        assert_eq!(faults.len(), Fault::ALL.len() + Fault::DISK.len() + 1);
        faults
    }

    /// Every combination of faults the CLI offers (each subset of them),
    /// with every client mode and workload, gets a cluster that carries
    /// all of them at once, or is refused before anything starts with a
    /// message that names the problem.
    #[test]
    fn every_nemesis_combination_gets_a_cluster_that_carries_it() {
        let faults = every_fault();
        let workloads: Vec<TestOptions> = [
            Workload::Mutex,
            Workload::Fenced,
            Workload::Register,
            Workload::RwLock,
            Workload::Semaphore,
            Workload::LockDelay,
            Workload::MultiLock,
            Workload::ZkMutex,
            Workload::EtcdMutex,
        ]
        .into_iter()
        .map(TestOptions::new)
        .collect();
        let mut planned = 0;
        for mask in 0u32..(1 << faults.len()) {
            let set: Vec<Fault> = (0..faults.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| faults[i])
                .collect();
            for clients in [Routing::Sticky, Routing::Random, Routing::Embedded] {
                for base in &workloads {
                    let workload = base.workload;
                    let mut o = base.clone();
                    o.faults = set.clone();
                    o.clients = clients;
                    let what = format!("{workload:?} {clients} {set:?}");
                    let plan = match cluster_options(&o, PathBuf::new()) {
                        Ok(plan) => plan,
                        Err(e) => {
                            // The combinations that cannot run: embedded
                            // clients with a workload that speaks the
                            // HTTP API's reads or a door's protocol.
                            let door = matches!(workload, Workload::ZkMutex | Workload::EtcdMutex);
                            assert!(
                                clients == Routing::Embedded
                                    && (workload == Workload::Register || door),
                                "{what}: refused: {e:#}"
                            );
                            let named = if door { "embedded" } else { "register" };
                            assert!(format!("{e:#}").contains(named), "{what}: {e:#}");
                            continue;
                        }
                    };
                    planned += 1;
                    assert_eq!(plan.zookeeper, workload == Workload::ZkMutex, "{what}");
                    assert_eq!(plan.etcd, workload == Workload::EtcdMutex, "{what}");
                    let disk = set.iter().any(|f| f.is_disk());
                    let members = plan.member_bin.is_some();
                    // The fault hooks and embedded clients need member
                    // processes; without them, the shipped binary runs.
                    assert_eq!(members, disk || clients == Routing::Embedded, "{what}");
                    assert_eq!(plan.embedded, clients == Routing::Embedded, "{what}");
                    // Membership changes have spares to add, whatever
                    // else runs (they join as the founders' kind of
                    // process: Cluster::start gives spares control ports).
                    assert_eq!(plan.spares > 0, set.contains(&Fault::Membership), "{what}");
                    assert_eq!(
                        plan.data_tmpfs_mb.is_some(),
                        set.contains(&Fault::DiskFill),
                        "{what}"
                    );
                }
            }
        }
        assert!(planned > 700_000, "{planned}");
    }

    /// Every word `--nemesis` accepts parses, and nothing else does.
    #[test]
    fn every_nemesis_word_parses() {
        for word in [
            "none",
            "all",
            "partition",
            "kill",
            "pause",
            "disk",
            "partition-majority",
        ] {
            assert!(Fault::parse_list(word).is_ok(), "{word}");
        }
        for fault in every_fault() {
            let parsed = Fault::parse_list(fault.name()).unwrap_or_default();
            // `kill` and `pause` are also the names of their groups.
            assert!(parsed.contains(&fault), "{fault}: {parsed:?}");
            assert!(
                parsed.len() == 1 || parsed.len() == 2,
                "{fault}: {parsed:?}"
            );
        }
        let err = Fault::parse_list("all,disks").unwrap_err();
        assert!(err.contains("unknown nemesis \"disks\""), "{err}");
    }

    #[test]
    fn replay_names_everything() {
        let mut o = TestOptions::new(Workload::Fenced);
        o.faults = Fault::parse_list("kill").unwrap_or_default();
        o.seed = 7;
        let cmd = o.replay_command();
        assert!(cmd.contains("--workload fenced"), "{cmd}");
        assert!(cmd.contains("--nemesis kill,kill-leader"), "{cmd}");
        assert!(cmd.contains("--seed 7"), "{cmd}");
    }
}
