//! Test glue over `LocalCluster`: one cluster at a time per test binary,
//! fast elections, and a condition poller.

#![allow(dead_code)]

use std::time::Duration;

use raftlock_node::core::{QueueKind, SessionId};
use raftlock_node::{ClusterSettings, Grant, LocalCluster, Node, NodeError, OpenedSession};

pub const WAIT: Duration = Duration::from_secs(10);

/// Clusters in one test binary run one at a time: several three-node
/// clusters on a 2-core machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Cluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub inner: LocalCluster,
    _dir: tempfile::TempDir,
}

pub fn settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        snapshot_every_entries: 500,
        session_ttl_min_ms: 200,
        ..ClusterSettings::default()
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,raftlock_node=info".into()),
        )
        .with_test_writer()
        .try_init();
}

impl Cluster {
    pub async fn start(size: u64, settings: ClusterSettings) -> Cluster {
        init_tracing();
        let serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = LocalCluster::start(dir.path(), size, settings)
            .await
            .expect("cluster starts");
        let cluster = Cluster {
            _serial: serial,
            inner,
            _dir: dir,
        };
        cluster.leader().await;
        cluster
    }

    pub fn node(&self, id: u64) -> &Node {
        self.inner.node(id)
    }

    pub fn running(&self) -> impl Iterator<Item = &Node> {
        self.inner.running()
    }

    pub async fn leader(&self) -> u64 {
        self.inner.leader(WAIT).await.expect("an agreed leader")
    }

    pub async fn stop(&mut self, id: u64) {
        self.inner.stop(id).await;
    }

    pub async fn restart(&mut self, id: u64) {
        self.inner.restart(id).await.expect("restart");
    }

    pub async fn shutdown(mut self) {
        self.inner.shutdown().await;
    }
}

/// Polls `condition` (a state check, not a timing guess) until it holds.
pub async fn eventually<F: FnMut() -> bool>(what: &str, timeout: Duration, mut condition: F) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A lock held by one session with a second session waiting behind it.
pub struct Queued {
    pub holder: OpenedSession,
    pub grant: Grant,
    pub waiter: OpenedSession,
    /// The waiter's acquire (up to 60 s).
    pub waiting: tokio::task::JoinHandle<Result<Grant, NodeError>>,
}

/// Takes `lock` for a session with `holder_ttl`, then queues a second
/// session (60 s TTL) behind it, both through `node`.
pub async fn holder_and_waiter(node: &Node, lock: &str, holder_ttl: Duration) -> Queued {
    let (holder, grant) = holding(node, "holder", holder_ttl, lock).await;
    let waiter = node
        .open_session("waiter", Duration::from_secs(60))
        .await
        .expect("open waiter");
    let waiting = acquire_in_task(node, lock, waiter.id, Duration::from_secs(60));
    Queued {
        holder,
        grant,
        waiter,
        waiting,
    }
}

/// Acquires `lock` for `session` through `node` in a task of its own,
/// waiting up to `wait`.
pub fn acquire_in_task(
    node: &Node,
    lock: &str,
    session: SessionId,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<Grant, NodeError>> {
    let (node, lock) = (node.clone(), lock.to_string());
    tokio::spawn(async move {
        node.acquire(QueueKind::Lock, &lock, session, vec![], wait)
            .await
    })
}

/// Opens a session of `owner` with `ttl` through `node`, and takes
/// `lock` with it (waiting up to `WAIT`).
pub async fn holding(
    node: &Node,
    owner: &str,
    ttl: Duration,
    lock: &str,
) -> (OpenedSession, Grant) {
    let session = node.open_session(owner, ttl).await.expect("open");
    let grant = node
        .acquire(QueueKind::Lock, lock, session.id, vec![], WAIT)
        .await
        .expect("granted");
    (session, grant)
}
