//! Workloads: concurrent clients that drive a cluster and record every
//! operation as invoke → ok/fail/info.
//!
//! - [`lock`]: the `mutex`, `fenced`, `rwlock` and `semaphore` clients (sessions, acquire,
//!   release, and for `fenced` an increment in [`store::FencedStore`]);
//! - [`multilock`]: transfers between accounts under multi-locks, with
//!   guarded writes, and audits of every account under one multi-lock;
//! - [`holder`]: what those two share: the cycle of sessions, an
//!   acquire's answer, the release retried while there is no leader;
//! - [`register`]: get/set/cas on a few keys through the nodes API;
//! - [`session`]: a session with its keepalive task, the Rust client's
//!   loss rule, and the bookkeeping that turns a lost session into a
//!   `lost`/`expire` op;
//! - [`route`]: which member each request goes to (sticky by default,
//!   random, or embedded in a member's process);
//! - [`zk_mutex`]: the `fenced` workload through the members' ZooKeeper
//!   doors, with ZooKeeper's lock recipe;
//! - [`etcd_mutex`]: the `fenced` workload through the members' etcd
//!   doors, with etcd's lock recipe (clientv3's `concurrency.Mutex`).
//!
//! Process ids are never reused: a client whose op ended `info`, or whose
//! session is gone, continues under a fresh id ([`Ctx::next_pid`]).

pub mod etcd_mutex;
pub mod holder;
pub mod lock;
pub mod multilock;
pub mod register;
pub mod route;
pub mod session;
pub mod store;
pub mod zk_mutex;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::api::Api;
use crate::checker::Workload;
use crate::control::roster::Roster;
use crate::runlog::RunLog;
use route::{Route, Routing};

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
    /// Injected client bug for the `rwlock` workload's self-test: writers
    /// acquire in read mode (and record a write hold), so they share the
    /// lock with readers and each other. The checker must catch it.
    pub inject_rw_read_for_write: bool,
    /// The `semaphore` workload's limit N.
    pub permits: u64,
    /// Injected client bug for the `semaphore` workload's self-test: odd
    /// clients acquire a second semaphore (the wrong name) while recording
    /// the shared one, so up to 2N hold at once. The checker must catch it.
    pub inject_sem_wrong_name: bool,
    /// The `lock-delay` workload's delay (docs/api.md, "Lock-delay").
    pub lock_delay_ms: u64,
    /// Injected client bug for the `lock-delay` workload's self-test:
    /// clients record the delay but ask the server for none, so a lost
    /// holder's lock is handed on at once. The checker must catch it.
    pub inject_no_lock_delay: bool,
    /// The `multilock` workload's accounts.
    pub accounts: usize,
    /// Each account's balance before the first transfer.
    pub initial_balance: i64,
    /// Injected client bug for the `multilock` workload's self-test: odd
    /// clients lock only the account they take from, while recording both,
    /// and write the other without its guard. Transfers then race on the
    /// unlocked account; the checker must catch it.
    pub inject_multi_one_lock: bool,
    /// Injected client bug for the `zk-mutex` workload's self-test: a
    /// waiter takes its predecessor's deletion event for the lock without
    /// listing the directory again. The checkers must catch it.
    pub inject_zk_no_relist: bool,
    /// Injected client bug for the `etcd-mutex` workload's self-test: a
    /// waiter takes the deletion of the key it watches (its immediate
    /// predecessor) for the lock without reading again whether an older
    /// key is left. The checkers must catch it.
    pub inject_etcd_no_requery: bool,
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
            inject_rw_read_for_write: false,
            permits: 3,
            inject_sem_wrong_name: false,
            lock_delay_ms: 1_000,
            inject_no_lock_delay: false,
            accounts: 4,
            initial_balance: 100,
            inject_multi_one_lock: false,
            inject_zk_no_relist: false,
            inject_etcd_no_requery: false,
        }
    }
}

/// One client's member, and what the nemesis can do to the client.
#[derive(Debug)]
pub struct ClientControl {
    /// The member(s) this client's requests go to.
    pub route: Route,
    /// True while the client holds the lock (as it believes).
    pub holding: AtomicBool,
    /// True while the client is paused: it stops sending keepalives and,
    /// at its next pause point (while holding the lock), stalls.
    pub pause: watch::Sender<bool>,
    /// True while the client must keep a lock it holds (or gets) until
    /// told otherwise or until its session is lost, keepalives going on:
    /// a long critical section, set by the `isolate-leader` nemesis.
    pub long_hold: watch::Sender<bool>,
}

impl ClientControl {
    /// Client `idx` of the cluster whose members `roster` lists, routed
    /// by `routing`.
    pub fn new(routing: Routing, roster: Arc<Roster>, idx: usize) -> Self {
        ClientControl {
            route: Route::new(routing, roster, idx),
            holding: AtomicBool::new(false),
            pause: watch::channel(false).0,
            long_hold: watch::channel(false).0,
        }
    }

    /// Waits until no long hold is asked for (at once when none is).
    pub async fn wait_no_long_hold(&self) {
        let mut rx = self.long_hold.subscribe();
        let _ = rx.wait_for(|h| !*h).await;
    }

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
    /// The cluster's public API (final reads, lock state).
    pub api: Api,
    /// Where the clients' requests go: the public API, or the members'
    /// control endpoints in the embedded-client mode (same paths).
    pub client_api: Api,
    /// The members now (changed by the `membership` nemesis).
    pub roster: Arc<Roster>,
    /// Client knobs.
    pub settings: Settings,
    /// One per client task.
    pub clients: Vec<ClientControl>,
    /// The fenced workload's counter.
    pub store: store::FencedStore,
    /// The register workload's keys.
    pub keys: register::KeySpace,
    /// The members' ZooKeeper doors (the `zk-mutex` clients' way in).
    pub zk_doors: zk_mutex::Doors,
    /// The members' etcd doors (the `etcd-mutex` clients' way in).
    pub etcd_doors: zk_mutex::Doors,
    /// Notified whenever a client starts holding the lock (the
    /// `isolate-leader` nemesis waits for a holder on the leader).
    pub holding_changed: Notify,
    /// Next process id.
    pids: AtomicU64,
    /// Becomes true when clients must stop issuing new operations.
    stop: watch::Receiver<bool>,
}

impl Ctx {
    /// A context for `concurrency` clients, whose requests go to
    /// `client_api` routed by `routing`; `stop` ends the run.
    pub fn new(
        log: Arc<RunLog>,
        api: Api,
        client_api: Api,
        roster: Arc<Roster>,
        settings: Settings,
        (concurrency, routing): (usize, Routing),
        stop: watch::Receiver<bool>,
    ) -> Ctx {
        let keys = register::KeySpace::new(settings.key_slots, settings.ops_per_key);
        Ctx {
            log,
            api,
            client_api,
            clients: (0..concurrency)
                .map(|idx| ClientControl::new(routing, Arc::clone(&roster), idx))
                .collect(),
            roster,
            settings,
            store: store::FencedStore::default(),
            keys,
            zk_doors: zk_mutex::Doors::new(),
            etcd_doors: zk_mutex::Doors::new(),
            holding_changed: Notify::new(),
            pids: AtomicU64::new(0),
            stop,
        }
    }

    /// The same context, with the members' ZooKeeper doors.
    pub fn with_zk_doors(self, zk_doors: zk_mutex::Doors) -> Ctx {
        Ctx { zk_doors, ..self }
    }

    /// The same context, with the members' etcd doors.
    pub fn with_etcd_doors(self, etcd_doors: zk_mutex::Doors) -> Ctx {
        Ctx { etcd_doors, ..self }
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

    /// Marks client `idx` as holding the lock or not.
    pub fn set_holding(&self, idx: usize, holding: bool) {
        self.clients[idx].holding.store(holding, Ordering::Relaxed);
        if holding {
            self.holding_changed.notify_waiters();
        }
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
                Workload::Mutex => tokio::spawn(lock::client(ctx, idx, lock::Kind::Mutex, rng)),
                Workload::Fenced => tokio::spawn(lock::client(ctx, idx, lock::Kind::Fenced, rng)),
                Workload::RwLock => tokio::spawn(lock::client(ctx, idx, lock::Kind::RwLock, rng)),
                Workload::Semaphore => {
                    tokio::spawn(lock::client(ctx, idx, lock::Kind::Semaphore, rng))
                }
                Workload::LockDelay => {
                    tokio::spawn(lock::client(ctx, idx, lock::Kind::Delayed, rng))
                }
                Workload::MultiLock => tokio::spawn(multilock::client(ctx, idx, rng)),
                Workload::Register => tokio::spawn(register::client(ctx, idx, rng)),
                Workload::ZkMutex => tokio::spawn(zk_mutex::client(ctx, idx, rng)),
                Workload::EtcdMutex => tokio::spawn(etcd_mutex::client(ctx, idx, rng)),
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
