//! The embeddable node: start, bootstrap, background tasks, shutdown.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use openraft::storage::RaftLogStorage;
use raftlock_storage::{Durability, SledLogConfig, SledLogStore};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::config::{ConfigError, NodeConfig};
use crate::disk::disk_space::DiskSpace;
use crate::disk::identity::IdentityFile;
use crate::ops::waiters::WaiterRegistry;
use crate::raft::state_machine::{Shared, StateMachineStore};
use crate::raft::typ::{NodeId, Raft, TypeConfig};
use crate::replica::group;
use crate::replica::keepalives::Keepalives;
use crate::replica::proposer::Proposer;
use crate::replica::raft_slot::{Incarnation, RaftSlot};
use crate::replica::Replica;
use crate::sessions::quorum::QuorumClock;
use crate::sessions::tracker::{SessionTracker, TokioClock};
use crate::shutdown::Shutdown;
use crate::transport::network::{Network, PeerClient};
use crate::transport::peer_guard::PeerGuard;

/// A running raftlock replica inside the caller's tokio runtime. Cheap to
/// clone; every clone is a handle to the same node.
#[derive(Clone)]
pub struct Node {
    /// The Raft side every operation goes through.
    pub(crate) replica: Arc<Replica>,
    /// What only starting and stopping the node needs.
    lifecycle: Arc<Lifecycle>,
}

/// The node's running parts that no operation touches.
struct Lifecycle {
    /// Where the internal routes are served.
    raft_addr: SocketAddr,
    /// The data directory's free space (and the full-disk fault hook).
    disk_space: DiskSpace,
    /// Background tasks, aborted on shutdown.
    tasks: Tasks,
}

/// Background tasks of the node, aborted on shutdown. Cheap to clone: the
/// storage supervisor adds the tasks of each Raft it rebuilds.
#[derive(Clone, Default)]
pub(crate) struct Tasks(Arc<Mutex<Vec<JoinHandle<()>>>>);

impl Tasks {
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Drop the handles of tasks that ended (those of a Raft instance
        // replaced after a full disk), so the list does not grow.
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    async fn abort_all(&self) {
        let tasks: Vec<_> = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
    }
}

/// The tasks that follow one Raft instance's metrics; they end with it,
/// and the storage supervisor starts them again for the next one.
pub(crate) fn spawn_raft_tasks(replica: &Arc<Replica>, tasks: &Tasks) {
    tasks.spawn(crate::sessions::leader::watch_leadership(replica.clone()));
    tasks.spawn(crate::replica::membership::follow_membership(
        replica.clone(),
    ));
}

/// Opens the member's sled log store in its data directory.
fn open_log_store(config: &NodeConfig) -> Result<SledLogStore<TypeConfig>, String> {
    let log_config = SledLogConfig::new(config.data_dir.join("log"))
        .with_cache_capacity_bytes(config.settings.sled_cache_mb * 1024 * 1024)
        .with_durability(if config.settings.fsync {
            Durability::Fsync
        } else {
            Durability::FlushOnly
        })
        // The node gates apply, append acknowledgements and the commit
        // index it sends on `durable` (state_machine.rs, routes.rs,
        // network.rs), so the Raft core need not wait for each sync.
        .with_deferred_durability(true)
        // Purge only what a durable snapshot covers: the state machine
        // raises the floor (state_machine.rs, raftlock_storage::SnapshotFloor).
        .with_snapshot_gated_purge(true);
    SledLogStore::open(&log_config).map_err(|e| e.to_string())
}

/// What building a Raft instance over the member's state machine takes:
/// once at start, and again after a full disk (`storage_watch.rs`).
pub(crate) struct RaftFactory {
    config: Arc<NodeConfig>,
    raft_config: Arc<openraft::Config>,
    peers: PeerClient,
    quorum: Arc<QuorumClock>,
    shared: Arc<Shared>,
}

impl RaftFactory {
    /// A Raft instance over `log_store` and the member's state machine.
    async fn start_raft(&self, log_store: SledLogStore<TypeConfig>) -> Result<Incarnation, String> {
        let durable = log_store.durable_index();
        let sync_stall = log_store.sync_stall();
        let sync_meter = log_store.sync_meter();
        let raft = Raft::new(
            self.config.id,
            self.raft_config.clone(),
            Network {
                client: self.peers.clone(),
                durable: durable.clone(),
                quorum: self.quorum.clone(),
            },
            log_store,
            StateMachineStore::new(self.shared.clone(), durable.clone()),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(Incarnation {
            raft,
            durable,
            sync_stall,
            sync_meter,
        })
    }

    /// Opens the log store again from disk (a fresh sled handle reads what
    /// was durably written; the failed one is gone with its Raft) and
    /// builds a new Raft over it and the state machine in memory.
    pub(crate) async fn reopen(&self) -> Result<Incarnation, ReopenError> {
        let config = self.config.clone();
        // sled's open reads the whole log: off the async workers.
        let mut log_store = tokio::task::spawn_blocking(move || open_log_store(&config))
            .await
            .map_err(|e| ReopenError::Retry(e.to_string()))?
            .map_err(ReopenError::Retry)?;
        let last = log_store
            .get_log_state()
            .await
            .map_err(|e| ReopenError::Retry(e.to_string()))?
            .last_log_id
            .map(|l| l.index);
        self.shared
            .attach_log(log_store.snapshot_floor(), last)
            .map_err(ReopenError::Damaged)?;
        self.start_raft(log_store).await.map_err(ReopenError::Retry)
    }
}

/// Why [`RaftFactory::reopen`] failed.
#[derive(Debug)]
pub(crate) enum ReopenError {
    /// Worth another try later (the disk filled up again, the old handle's
    /// file lock is not released yet, ...).
    Retry(String),
    /// The log on disk cannot continue the state in memory: never retried.
    Damaged(String),
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration cannot start a node.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The Raft port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address to bind.
        addr: String,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The log store could not be opened.
    #[error("data directory {path}: {message}")]
    Storage {
        /// The data directory.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// openraft refused to start (its message).
    #[error("raft: {0}")]
    Raft(String),
    /// The data directory's identity file is damaged, missing or another
    /// member's; the message names the fix.
    #[error("{0}")]
    Identity(String),
    /// The `[tls]` table's files could not be loaded.
    #[error("[tls]: {0}")]
    Tls(#[from] raftlock_tls::TlsError),
}

impl Node {
    /// Binds this member's `raft_addr` and starts the node.
    pub async fn start(config: NodeConfig) -> Result<Node, StartError> {
        config.validate()?;
        let addr = config.me().raft_addr.clone();
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| StartError::Listen { addr, source })?;
        Self::start_with_listener(config, listener).await
    }

    /// Starts the node serving its internal routes on `listener` (tests
    /// bind port 0 first, then write the real addresses into the config).
    pub async fn start_with_listener(
        config: NodeConfig,
        listener: TcpListener,
    ) -> Result<Node, StartError> {
        Self::start_inner(config, listener, true).await
    }

    /// Starts a member that joins a running cluster instead of founding
    /// one: it never initializes a membership, and waits (as a non-voting
    /// bystander) until the leader adds it ([`Node::add_member`] on any
    /// member, `POST /v1/cluster/members`). A member that already belongs
    /// to a cluster (its data directory says so) simply restarts.
    pub async fn join_with_listener(
        config: NodeConfig,
        listener: TcpListener,
    ) -> Result<Node, StartError> {
        Self::start_inner(config, listener, false).await
    }

    async fn start_inner(
        config: NodeConfig,
        listener: TcpListener,
        bootstrap: bool,
    ) -> Result<Node, StartError> {
        config.validate()?;
        // Before the data directory is touched: a bad PEM file fails fast.
        let tls = crate::transport::member_tls::MemberTls::load(&config)?;
        let config = Arc::new(config);
        let storage_err = |message: String| StartError::Storage {
            path: config.data_dir.display().to_string(),
            message,
        };
        let has_log = config.data_dir.join("log").exists();
        std::fs::create_dir_all(&config.data_dir).map_err(|e| storage_err(e.to_string()))?;
        let identity = IdentityFile::open(&config.data_dir, config.id, has_log)
            .map_err(|e| StartError::Identity(e.to_string()))?;
        let guard = Arc::new(PeerGuard::new(identity));
        let log_store = open_log_store(&config).map_err(storage_err)?;
        let snapshot_floor = log_store.snapshot_floor();
        let waiters = Arc::new(WaiterRegistry::default());
        let tracker = Arc::new(SessionTracker::new(Box::new(TokioClock)));
        // Also refuses a log that cannot be replayed from the snapshot on disk.
        let shared = Shared::open(config.data_dir.clone(), waiters, tracker, snapshot_floor)
            .map_err(storage_err)?;

        let s = &config.settings;
        let raft_config = openraft::Config {
            cluster_name: "raftlock".into(),
            heartbeat_interval: s.heartbeat_interval_ms,
            election_timeout_min: s.election_timeout_min_ms,
            election_timeout_max: s.election_timeout_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(s.snapshot_every_entries),
            max_in_snapshot_log_to_keep: 1_000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let peers = PeerClient::new(config.clone(), tls.as_ref().map(|t| t.client.clone()))
            .with_guard(guard.clone());
        let factory = RaftFactory {
            config: config.clone(),
            raft_config: Arc::new(raft_config),
            peers: peers.clone(),
            quorum: Arc::new(QuorumClock::default()),
            shared: shared.clone(),
        };
        let incarnation = factory
            .start_raft(log_store)
            .await
            .map_err(StartError::Raft)?;

        let raft_addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.me().raft_addr.clone(),
            source,
        })?;
        let (proposer, proposals) = Proposer::new();
        let (keepalives, keepalive_queue) = Keepalives::new();
        let node = Node {
            replica: Arc::new(Replica {
                id: config.id,
                config: config.clone(),
                raft: RaftSlot::new(incarnation),
                shared,
                peers,
                proposer,
                keepalives,
                quorum: factory.quorum.clone(),
                membership_change: tokio::sync::Mutex::new(()),
                guard,
                shutdown: Shutdown::new(),
            }),
            lifecycle: Arc::new(Lifecycle {
                raft_addr,
                disk_space: DiskSpace::new(&config.data_dir),
                tasks: Tasks::default(),
            }),
        };
        let replica = &node.replica;
        let tls_server = tls.map(|t| t.server);
        node.spawn(crate::transport::routes::serve(
            replica.clone(),
            listener,
            tls_server,
        ));
        node.spawn(crate::sessions::leader::expire_sessions(replica.clone()));
        node.spawn(group::run(replica.clone(), proposals));
        node.spawn(group::run(replica.clone(), keepalive_queue));
        spawn_raft_tasks(replica, &node.lifecycle.tasks);
        node.spawn(crate::disk::storage_watch::watch_log_storage(
            replica.clone(),
            crate::disk::storage_watch::Recovery {
                factory,
                disk_space: node.lifecycle.disk_space.clone(),
                tasks: node.lifecycle.tasks.clone(),
            },
        ));
        if bootstrap {
            // In the background: the founder waits for every seed to answer.
            node.spawn(crate::raft::founding::found_cluster(replica.clone()));
        }
        tracing::info!(id = config.id, raft = %raft_addr, "node started");
        Ok(node)
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.lifecycle.tasks.spawn(task);
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.replica.id
    }

    /// The log store's durability barrier counters now.
    pub(crate) fn sync_stats(&self) -> raftlock_storage::SyncStats {
        self.replica.raft.get().sync_meter.stats()
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection for tests and harnesses: while `stalled`, this
    /// node's log syncs do not complete, as if its disk hung (writes are
    /// still accepted into the log; nothing becomes durable). Its Raft
    /// state is otherwise untouched.
    pub fn stall_log_sync(&self, stalled: bool) {
        self.replica.raft.get().sync_stall.set(stalled);
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection for tests and harnesses: every log sync of this
    /// node takes `delay` longer (zero: back to normal), as on a disk whose
    /// `fdatasync` is slow. Nothing fails; commits that need this member's
    /// acknowledgement are late by as much.
    pub fn slow_log_sync(&self, delay: std::time::Duration) {
        self.replica.raft.get().sync_stall.set_delay(delay);
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection for tests and harnesses: this node's next log sync
    /// fails as if `fdatasync` returned `EIO`. Like a real failure it is
    /// permanent: the member leaves the Raft group and answers
    /// `StorageFailed` until it is restarted (see `storage_watch.rs`).
    pub fn fail_log_sync(&self) {
        self.replica.raft.get().sync_stall.fail_next();
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection for tests and harnesses: this node's next log sync
    /// fails with `ENOSPC`, and its disk counts as full until
    /// [`Node::restore_disk_space`]. Like a real full disk: the member
    /// leaves Raft and answers `DiskFull` meanwhile, then rebuilds its Raft
    /// in place once there is room (see `storage_watch.rs`).
    pub fn fail_log_sync_out_of_space(&self) {
        self.lifecycle.disk_space.set_injected_full(true);
        self.replica.raft.get().sync_stall.fail_next_out_of_space();
    }

    #[cfg(feature = "fault-injection")]
    /// Ends [`Node::fail_log_sync_out_of_space`]: the disk has room again
    /// (if the real one does), so the member reopens its log and rejoins.
    pub fn restore_disk_space(&self) {
        self.lifecycle.disk_space.set_injected_full(false);
    }

    /// How many times this member rebuilt its Raft in place after a full
    /// disk (`storage_watch.rs`), since it started.
    pub fn storage_recoveries(&self) -> u64 {
        self.replica.raft.recoveries()
    }

    /// `Err(StorageFailed)` (or `Err(DiskFull)`) once this node's log disk
    /// failed a durability barrier (for health checks: such a member serves
    /// nothing that needs the log until it is restarted, or, for a full
    /// disk, until it has room again and has reopened its log).
    pub fn check_storage(&self) -> Result<(), crate::NodeError> {
        self.replica.refuse_if_storage_failed()
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection for tests: cut (or restore) this node's outgoing
    /// links to `peers`, as a network partition would. Cut both ends
    /// (see `LocalCluster::isolate`) for a symmetric partition.
    pub fn cut_links(&self, peers: &[NodeId], cut: bool) {
        self.replica.peers.cut_links(peers, cut);
    }

    /// The address the internal routes are served on.
    pub fn raft_addr(&self) -> SocketAddr {
        self.lifecycle.raft_addr
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.replica.config
    }

    /// Stops Raft, the internal server and every background task. Waiting
    /// operations end with `ShuttingDown`.
    pub async fn shutdown(&self) {
        self.replica.shutdown.trigger();
        // A stopped node must not acknowledge keepalives as a leader.
        self.replica.shared.tracker.step_down();
        if let Err(e) = self.replica.raft.current().shutdown().await {
            tracing::warn!("raft shutdown: {e}");
        }
        self.lifecycle.tasks.abort_all().await;
        // The storage supervisor may have swapped in a new Raft between the
        // shutdown above and its abort: stop whatever is current now (a
        // second shutdown of the same instance only reports an error).
        let _ = self.replica.raft.current().shutdown().await;
        tracing::info!(id = self.replica.id, "node stopped");
    }
}
