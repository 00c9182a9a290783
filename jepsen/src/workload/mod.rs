//! Workloads: concurrent clients that drive a cluster and record every
//! operation as invoke → ok/fail/info.
//!
//! - [`lock`]: the `mutex` and `fenced` clients (sessions, acquire,
//!   release, and for `fenced` an increment in [`store::FencedStore`]);
//! - [`register`]: get/set/cas on a few keys through the nodes API;
//! - [`session`]: a session with its keepalive task and the bookkeeping
//!   that turns a lost session into an `expire` op.
//!
//! Process ids are never reused: a client whose op ended `info`, or whose
//! session is gone, continues under a fresh id ([`Ctx::next_pid`]).

pub mod lock;
pub mod register;
pub mod session;
pub mod store;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::Api;
use crate::checker::Workload;
use crate::runlog::RunLog;

/// Knobs of the client side.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Session TTL asked for by lock clients.
    pub ttl_ms: u64,
    /// The lock every `mutex`/`fenced` client contends for.
    pub lock: String,
    /// The fenced counter's key.
    pub counter: String,
    /// Longest `wait_ms` of an acquire (each picks 500..=this).
    pub max_wait_ms: u64,
    /// Longest time a holder keeps the lock before releasing.
    pub max_hold_ms: u64,
    /// Register keys in use at once.
    pub key_slots: usize,
    /// Operations per register key before it is retired for a fresh one
    /// (keeps each key's linearizability search small, as Jepsen's
    /// independent keys do).
    pub ops_per_key: u64,
    /// True when clients hold sessions (the lock workloads): only then
    /// does the client-pause nemesis apply.
    pub sessions: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ttl_ms: 3_000,
            lock: "jepsen/lock".into(),
            counter: "counter".into(),
            max_wait_ms: 2_000,
            max_hold_ms: 100,
            key_slots: 3,
            ops_per_key: 200,
            sessions: true,
        }
    }
}

/// What the nemesis can do to one client.
#[derive(Debug)]
pub struct ClientControl {
    /// True while the client holds the lock (as it believes).
    pub holding: AtomicBool,
    /// True while the client is paused: it stops sending keepalives and,
    /// at its next pause point (while holding the lock), stalls.
    pub pause: watch::Sender<bool>,
}

impl Default for ClientControl {
    fn default() -> Self {
        ClientControl {
            holding: AtomicBool::new(false),
            pause: watch::channel(false).0,
        }
    }
}

impl ClientControl {
    /// True while the nemesis pauses this client.
    pub fn paused(&self) -> bool {
        *self.pause.borrow()
    }

    /// Stalls until the nemesis lets go (at once when not paused).
    pub async fn wait_unpaused(&self) {
        let mut rx = self.pause.subscribe();
        let _ = rx.wait_for(|p| !*p).await;
    }
}

/// Everything the clients of one run share.
#[derive(Debug)]
pub struct Ctx {
    /// The history.
    pub log: Arc<RunLog>,
    /// The cluster's API.
    pub api: Api,
    /// Member ids; each op goes to a random one.
    pub nodes: Vec<u64>,
    /// Client knobs.
    pub settings: Settings,
    /// One per client task.
    pub clients: Vec<ClientControl>,
    /// The fenced workload's counter.
    pub store: store::FencedStore,
    /// The register workload's keys.
    pub keys: register::KeySpace,
    /// Next process id.
    pids: AtomicU64,
    /// Becomes true when clients must stop issuing new operations.
    stop: watch::Receiver<bool>,
}

impl Ctx {
    /// A context for `concurrency` clients; `stop` ends the run.
    pub fn new(
        log: Arc<RunLog>,
        api: Api,
        nodes: Vec<u64>,
        settings: Settings,
        concurrency: usize,
        stop: watch::Receiver<bool>,
    ) -> Ctx {
        let keys = register::KeySpace::new(settings.key_slots, settings.ops_per_key);
        Ctx {
            log,
            api,
            nodes,
            settings,
            clients: (0..concurrency).map(|_| ClientControl::default()).collect(),
            store: store::FencedStore::default(),
            keys,
            pids: AtomicU64::new(0),
            stop,
        }
    }

    /// A process id never used before.
    pub fn next_pid(&self) -> u64 {
        self.pids.fetch_add(1, Ordering::Relaxed)
    }

    /// Process ids handed out so far.
    pub fn pids_used(&self) -> u64 {
        self.pids.load(Ordering::Relaxed)
    }

    /// True once the run's time is up.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// A random member.
    pub fn pick_node(&self, rng: &mut StdRng) -> u64 {
        self.nodes[rng.random_range(0..self.nodes.len())]
    }

    /// Sleeps `d`, or less if the run stops meanwhile.
    pub async fn pause_for(&self, d: Duration) {
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    }
}

/// Spawns one task per client for `workload`; each gets its own RNG
/// derived from `seed`, so the op mix replays.
pub fn spawn_clients(workload: Workload, ctx: &Arc<Ctx>, seed: u64) -> Vec<JoinHandle<()>> {
    (0..ctx.clients.len())
        .map(|idx| {
            let rng = StdRng::seed_from_u64(
                seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(idx as u64 + 1)),
            );
            let ctx = Arc::clone(ctx);
            match workload {
                Workload::Mutex => tokio::spawn(lock::client(ctx, idx, false, rng)),
                Workload::Fenced => tokio::spawn(lock::client(ctx, idx, true, rng)),
                Workload::Register => tokio::spawn(register::client(ctx, rng)),
            }
        })
        .collect()
}

/// Backs off after an answer that says "not now" (no leader, refused
/// connection), so a partitioned client does not spin.
pub async fn backoff(ctx: &Ctx, rng: &mut StdRng) {
    ctx.pause_for(Duration::from_millis(rng.random_range(20..100)))
        .await;
}
