//! The shared in-process test cluster (`raftlock_testkit::TestCluster`:
//! three members in this process, each serving the API with
//! `raftlock_server::serve` on its own port-0 listener) as these tests
//! address it: members by 0-based index, and data on tmpfs for the
//! full-disk tests.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use raftlock_core::{QueueKind, SessionId};
use raftlock_node::{ClusterSettings, Node};
use raftlock_server::ApiConfig;
use raftlock_testkit::cluster::fast_settings;
use raftlock_testkit::Options;
use reqwest::Method;
use serde_json::{json, Value};

use crate::tmpfs::{MountError, Tmpfs};

pub use raftlock_testkit::http::{raw_http, Reply};
pub use raftlock_testkit::WAIT;

/// The cluster; `c.urls[i]`, `c.http` and `c.state()` come from the
/// shared cluster through `Deref`.
pub struct TestCluster {
    // Field order is drop order: the members, then the mounts, then the
    // directory they are mounted in.
    inner: raftlock_testkit::TestCluster,
    /// Each member's data directory on its own tmpfs (`start_on_tmpfs`);
    /// empty otherwise.
    pub tmpfs: Vec<Tmpfs>,
    _dir: Option<tempfile::TempDir>,
}

fn settings() -> ClusterSettings {
    ClusterSettings {
        leader_wait_ms: 1_500,
        ..fast_settings()
    }
}

fn id(i: usize) -> u64 {
    i as u64 + 1
}

impl Deref for TestCluster {
    type Target = raftlock_testkit::TestCluster;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl DerefMut for TestCluster {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

impl TestCluster {
    pub async fn start() -> TestCluster {
        Self::start_with(ApiConfig::default()).await
    }

    /// A cluster whose API servers all use `api`.
    pub async fn start_with(api: ApiConfig) -> TestCluster {
        let options = Options {
            settings: settings(),
            api: Some(api),
            ..Options::default()
        };
        TestCluster {
            inner: raftlock_testkit::TestCluster::start(options).await,
            tmpfs: Vec::new(),
            _dir: None,
        }
    }

    /// A cluster whose members' data directories each sit on a tmpfs of
    /// `size_mb` MiB (`self.tmpfs[i]`), with real fsyncs. `None`, said
    /// loudly on stderr, when not running as root (mounting needs it; CI
    /// runs as root); a failed mount as root panics.
    pub async fn start_on_tmpfs(size_mb: u64) -> Option<TestCluster> {
        Self::start_on_tmpfs_snapshotting(
            size_mb,
            ClusterSettings::default().snapshot_every_entries,
        )
        .await
    }

    /// [`start_on_tmpfs`](Self::start_on_tmpfs), with a snapshot every
    /// `snapshot_every_entries` applied entries.
    pub async fn start_on_tmpfs_snapshotting(
        size_mb: u64,
        snapshot_every_entries: u64,
    ) -> Option<TestCluster> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut mounts = Vec::new();
        for id in 1..=3u64 {
            match Tmpfs::mount(&dir.path().join(format!("node-{id}")), size_mb) {
                Ok(mount) => mounts.push(mount),
                Err(MountError::NotRoot) => {
                    eprintln!(
                        "SKIPPED: this test mounts a tmpfs for a real full disk and needs \
                         root; run it as root (CI does)"
                    );
                    return None;
                }
                Err(MountError::Failed(e)) => panic!("running as root, yet: {e}"),
            }
        }
        let options = Options {
            settings: ClusterSettings {
                fsync: true,
                snapshot_every_entries,
                ..settings()
            },
            ..Options::default()
        };
        Some(TestCluster {
            inner: raftlock_testkit::TestCluster::start_in(dir.path(), options).await,
            tmpfs: mounts,
            _dir: Some(dir),
        })
    }

    pub fn node(&self, i: usize) -> &Node {
        self.inner.node(id(i))
    }

    /// Index (0-based) of the leader once every running node agrees.
    pub async fn leader(&self) -> usize {
        (self.inner.leader().await - 1) as usize
    }

    /// A request with an optional raw body and content type.
    pub async fn raw_call(
        &self,
        i: usize,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Reply {
        self.inner
            .raw_call(id(i), method, path, content_type, body)
            .await
    }

    /// A JSON request (or none when `body` is `None`).
    pub async fn call(&self, i: usize, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.inner.call(id(i), method, path, body).await
    }

    pub async fn get(&self, i: usize, path: &str) -> Reply {
        self.inner.get(id(i), path).await
    }

    pub async fn post(&self, i: usize, path: &str, body: Value) -> Reply {
        self.inner.post(id(i), path, body).await
    }

    /// Opens a session through node `i`; returns its id.
    pub async fn open_session(&self, i: usize, owner: &str) -> String {
        let reply = self
            .post(i, "/v1/sessions", json!({"ttl_ms": 60_000, "owner": owner}))
            .await;
        reply.expect(201, "open session")["session_id"]
            .as_str()
            .expect("session id")
            .to_string()
    }

    /// Two sessions opened through member `i`'s node itself (no pooled
    /// HTTP connection takes a slot), TTL 60 s: one holding the lock
    /// `held`, one owning nothing.
    pub async fn holder_and_idle(&self, i: usize) -> (SessionId, SessionId) {
        let node = self.node(i);
        let ttl = Duration::from_secs(60);
        let holder = node.open_session("holder", ttl).await.expect("open").id;
        let idle = node.open_session("idle", ttl).await.expect("open").id;
        node.acquire(QueueKind::Lock, "held", holder, vec![], Duration::ZERO)
            .await
            .expect("held");
        (holder, idle)
    }

    /// Acquires `lock` for `session` through node `i`; returns the reply.
    pub async fn acquire(&self, i: usize, lock: &str, session: &str, wait_ms: u64) -> Reply {
        self.post(
            i,
            &format!("/v1/locks/{lock}/acquire"),
            json!({"session_id": session, "wait_ms": wait_ms}),
        )
        .await
    }

    /// Stops node `i`'s API server gracefully; it must finish promptly.
    pub async fn stop_api(&mut self, i: usize) {
        self.inner.stop_api(id(i)).await;
    }

    pub async fn stop_node(&mut self, i: usize) {
        self.inner.stop(id(i)).await;
    }

    pub async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

/// Polls `condition` until it holds or `WAIT` passes.
pub async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    raftlock_testkit::eventually(what, WAIT, condition).await;
}
