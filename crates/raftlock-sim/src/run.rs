//! One simulated run: a cluster, its clients and the nemesis on one thread
//! and simulated time, then the checks.

use std::cell::RefCell;
use std::sync::Once;
use std::time::{Duration, Instant};

use raftlock_jepsen::checker::linear::LinearConfig;
use raftlock_jepsen::{check_history, CheckOptions, CheckResult, History, Verdict, Workload};
use sha2::{Digest, Sha256};

use crate::cluster::{found, start_member, watch_leaders};
use crate::faults::{heal, nemesis, Fault};
use crate::locks::lock_client;
use crate::workload::client;
use crate::world::WorldRef;

/// What a run does.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The seed every random choice comes from.
    pub seed: u64,
    /// Members of the cluster.
    pub members: u64,
    /// Concurrent register clients.
    pub clients: usize,
    /// Concurrent lock clients (sessions, keepalives, one lock); with none
    /// the node's session machinery is not started either.
    pub lock_clients: usize,
    /// Simulated time under faults.
    pub duration: Duration,
    /// The faults to draw from (empty: none).
    pub faults: Vec<Fault>,
    /// Sync the committed log id openraft saves at once (true), or only
    /// with the next log sync, as `raftlock-storage` does (false).
    pub committed_synced: bool,
    /// Read a restarted member's vote back as saved, committed (true), or
    /// uncommitted, as `raftlock-storage` does (false): a committed vote
    /// naming the member itself makes openraft restore it as leader of
    /// the same term at once.
    pub restore_leadership: bool,
}

impl RunConfig {
    /// The default run for `seed`: 3 members, 4 register clients, 3 lock
    /// clients, 10 simulated seconds under every fault.
    pub fn new(seed: u64) -> Self {
        RunConfig {
            seed,
            members: 3,
            clients: 4,
            lock_clients: 3,
            duration: Duration::from_secs(10),
            faults: Fault::ALL.to_vec(),
            committed_synced: true,
            restore_leadership: false,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunReport {
    /// The run's configuration.
    pub config: RunConfig,
    /// Register client operations and faults.
    pub history: History,
    /// Lock client operations and faults.
    pub lock_history: History,
    /// Sessions the cluster expired.
    pub expiries: u64,
    /// Keepalives acknowledged.
    pub keepalives: u64,
    /// The history checkers' results.
    pub checks: Vec<CheckResult>,
    /// Invariants violated during the run.
    pub violations: Vec<String>,
    /// Faults injected.
    pub faults: u64,
    /// Leader ids seen (a term may have more than one).
    pub terms: usize,
    /// Terms led under more than one leader id (legal in openraft 0.9).
    pub shared_terms: usize,
    /// Unsynced disk writes lost to crashes.
    pub lost_writes: u64,
    /// Unsynced writes torn by crashes (cut off when the member reopened).
    pub torn_writes: u64,
    /// Log sync batches that failed with an injected EIO or ENOSPC.
    pub failed_syncs: u64,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// Real time it took.
    pub real: Duration,
    /// SHA-256 of the history and the violations: equal for equal seeds.
    pub hash: String,
}

impl RunReport {
    /// True when no checker found the history invalid and no invariant broke.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.checks.iter().all(|c| c.verdict != Verdict::Invalid)
    }

    /// Locks granted.
    pub fn grants(&self) -> usize {
        self.lock_history
            .events()
            .iter()
            .filter(|e| {
                e.kind == raftlock_jepsen::EventType::Ok && e.f == raftlock_jepsen::F::Acquire
            })
            .count()
    }

    /// Register client operations that completed `ok`.
    pub fn ok_ops(&self) -> usize {
        self.history
            .events()
            .iter()
            .filter(|e| e.kind == raftlock_jepsen::EventType::Ok)
            .count()
    }
}

/// How long after healing the cluster must commit a write again.
const RECOVERY: Duration = Duration::from_secs(5);

thread_local! {
    /// Panics of tasks of the run on this thread (openraft asserts its own
    /// invariants, e.g. that a follower's log never goes back): tokio
    /// catches them in the task, the run counts them as violations.
    static PANICS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Routes panics on a thread inside [`run`] to [`PANICS`]; others go to
/// the hook that was there before.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let recorded = PANICS
                .try_with(|p| match p.borrow_mut().as_mut() {
                    Some(list) => {
                        list.push(info.to_string().replace('\n', " "));
                        true
                    }
                    None => false,
                })
                .unwrap_or(false);
            if !recorded {
                previous(info);
            }
        }));
    });
}

/// Runs `config` on a fresh single-threaded runtime with paused time.
pub fn run(config: RunConfig) -> anyhow::Result<RunReport> {
    install_panic_hook();
    PANICS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let result = run_inner(config);
    PANICS.with(|p| *p.borrow_mut() = None);
    result
}

fn run_inner(config: RunConfig) -> anyhow::Result<RunReport> {
    let real = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let (world, simulated) = rt.block_on(simulate(&config))?;
    drop(rt);
    let (lock_history, expiries, keepalives) = world.with(|w| {
        (
            in_time_order(&w.lock_history),
            w.sessions.expiries,
            w.sessions.keepalives,
        )
    });
    let (history, violations, faults, terms, shared_terms, lost_writes, torn_writes, failed_syncs) =
        world.with(|w| {
            let mut per_term = std::collections::BTreeMap::<u64, usize>::new();
            for l in w.oracle.leaders.keys() {
                *per_term.entry(l.term).or_default() += 1;
            }
            (
                w.history.clone(),
                w.oracle.violations.clone(),
                w.faults,
                w.oracle.leaders.len(),
                per_term.values().filter(|&&n| n > 1).count(),
                w.nodes.values().map(|m| m.disk.lost_writes()).sum(),
                w.nodes.values().map(|m| m.disk.torn_writes()).sum(),
                w.failed_syncs,
            )
        });
    let opts = CheckOptions {
        workload: Some(Workload::Register),
        // A step budget, not a time limit: the verdict must replay.
        linear: LinearConfig {
            max_steps: 20_000_000,
            time_limit: None,
        },
    };
    let mut violations = violations;
    let panics = PANICS.with(|p| p.borrow_mut().as_mut().map(std::mem::take));
    violations.extend(
        panics
            .unwrap_or_default()
            .into_iter()
            .map(|p| format!("a task panicked: {p}")),
    );
    let mut checks = check_history(&history, &opts)?;
    if config.lock_clients > 0 {
        // Mutual exclusion (the mutex model, a holder counted until it
        // observed its loss) and grant tokens increasing per lock.
        let lock_opts = CheckOptions {
            workload: Some(Workload::Fenced),
            ..opts
        };
        checks.extend(check_history(&lock_history, &lock_opts)?);
    }
    let hash = history_hash(&[&history, &lock_history], &violations);
    Ok(RunReport {
        config,
        history,
        lock_history,
        expiries,
        keepalives,
        checks,
        violations,
        faults,
        terms,
        shared_terms,
        lost_writes,
        torn_writes,
        failed_syncs,
        simulated,
        real: real.elapsed(),
        hash,
    })
}

async fn simulate(config: &RunConfig) -> anyhow::Result<(WorldRef, Duration)> {
    let start = tokio::time::Instant::now();
    let ids: Vec<u64> = (1..=config.members).collect();
    let world = WorldRef::new(config.seed, &ids);
    world.with(|w| {
        w.committed_synced = config.committed_synced;
        w.restore_leadership = config.restore_leadership;
        w.lock_clients = config.lock_clients;
    });
    for &id in &ids {
        start_member(&world, id)
            .await
            .map_err(|e| anyhow::anyhow!("member {id}: {e}"))?;
    }
    found(&world, 1).await.map_err(|e| anyhow::anyhow!(e))?;
    let watcher = tokio::spawn(watch_leaders(world.clone(), Duration::from_millis(5)));
    let clients: Vec<_> = (0..config.clients)
        .map(|_| tokio::spawn(client(world.clone())))
        .chain((0..config.lock_clients).map(|i| tokio::spawn(lock_client(world.clone(), i))))
        .collect();
    nemesis(world.clone(), config.faults.clone(), config.duration).await;
    heal(&world).await;
    // Healed, the cluster must make progress again.
    recovered(&world).await;
    world.with(|w| w.stopping = true);
    for c in clients {
        let _ = c.await;
    }
    watcher.abort();
    let rafts: Vec<_> = world.with(|w| w.ids().into_iter().filter_map(|id| w.raft(id)).collect());
    for r in rafts {
        let _ = r.shutdown().await;
    }
    Ok((world, start.elapsed()))
}

/// Checks that a healed cluster commits a write within [`RECOVERY`].
async fn recovered(world: &WorldRef) {
    let deadline = tokio::time::Instant::now() + RECOVERY;
    while tokio::time::Instant::now() < deadline {
        let leader = crate::cluster::leader(world).and_then(|l| world.with(|w| w.raft(l)));
        if let Some(raft) = leader {
            let blank = raftlock_node::Proposal(vec![]);
            let write = tokio::time::timeout(Duration::from_millis(500), raft.client_write(blank));
            if let Ok(Ok(_)) = write.await {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    world.with(|w| {
        w.violation(format!(
            "liveness: no write committed within {RECOVERY:?} of healing"
        ))
    });
}

/// `history` with its events in time order (a lock client's loss is
/// recorded with the earlier time it was observed at), indexes renumbered;
/// events of one time keep their order.
fn in_time_order(history: &History) -> History {
    let mut events = history.events().to_vec();
    events.sort_by_key(|e| e.time);
    let mut out = History::new();
    for e in events {
        out.push(e);
    }
    out
}

/// A digest of everything a run produced, to compare runs bit for bit.
fn history_hash(histories: &[&History], violations: &[String]) -> String {
    let mut h = Sha256::new();
    for history in histories {
        for e in history.events() {
            h.update(serde_json::to_vec(e).unwrap_or_default());
            h.update(b"\n");
        }
    }
    for v in violations {
        h.update(v.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
