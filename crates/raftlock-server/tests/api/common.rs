//! A real three-node cluster in this process, each node serving the API
//! with `raftlock_server::serve` on its own port-0 listener, driven with
//! reqwest (and, where reqwest would normalize a URL, a raw socket).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use raftlock_core::{QueueKind, SessionId, StateMachine};
use raftlock_node::{ClusterSettings, Consistency, Member, Node, NodeConfig};
use raftlock_server::{serve, ApiConfig};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::tmpfs::{MountError, Tmpfs};

/// Upper bound for anything that should happen "soon".
pub const WAIT: Duration = Duration::from_secs(10);

/// Clusters in this binary run one at a time: several three-node clusters
/// on a 2-core machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Server {
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

pub struct TestCluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub nodes: Vec<Option<Node>>,
    /// `http://127.0.0.1:port` of each node's API.
    pub urls: Vec<String>,
    servers: Vec<Option<Server>>,
    pub http: reqwest::Client,
    /// Each member's data directory on its own tmpfs (`start_on_tmpfs`);
    /// empty otherwise. Unmounted before `_dir` is removed (field order).
    pub tmpfs: Vec<Tmpfs>,
    _dir: tempfile::TempDir,
}

fn settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        session_ttl_min_ms: 200,
        fsync: false,
        leader_wait_ms: 1_500,
        ..ClusterSettings::default()
    }
}

/// A JSON reply: status, and the body parsed (Null when empty).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    /// Asserts an API error: status, code, JSON content type and shape.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str, what: &str) {
        assert_eq!(self.status.as_u16(), status, "{what}: {}", self.body);
        assert_eq!(self.body["error"], code, "{what}: {}", self.body);
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: message missing in {}",
            self.body
        );
        let content_type = self.headers.get("content-type").map(|v| v.as_bytes());
        assert_eq!(content_type, Some(&b"application/json"[..]), "{what}");
    }

    /// Asserts a success status and returns the body.
    #[track_caller]
    pub fn expect(&self, status: u16, what: &str) -> &Value {
        assert_eq!(self.status.as_u16(), status, "{what}: {}", self.body);
        &self.body
    }
}

impl TestCluster {
    pub async fn start() -> TestCluster {
        Self::start_with(ApiConfig::default()).await
    }

    /// A cluster whose API servers all use `api`.
    pub async fn start_with(api: ApiConfig) -> TestCluster {
        let serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(serial, dir, Vec::new(), api, settings()).await
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
        let serial = SERIAL.lock().await;
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
        let settings = ClusterSettings {
            fsync: true,
            snapshot_every_entries,
            ..settings()
        };
        Some(Self::start_in(serial, dir, mounts, ApiConfig::default(), settings).await)
    }

    async fn start_in(
        serial: tokio::sync::MutexGuard<'static, ()>,
        dir: tempfile::TempDir,
        tmpfs: Vec<Tmpfs>,
        api: ApiConfig,
        settings: ClusterSettings,
    ) -> TestCluster {
        let mut raft_listeners = Vec::new();
        let mut api_listeners = Vec::new();
        let mut members = BTreeMap::new();
        for id in 1..=3u64 {
            let raft = TcpListener::bind("127.0.0.1:0").await.expect("bind raft");
            let api = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
            members.insert(
                id,
                Member {
                    api_addr: api.local_addr().expect("addr").to_string(),
                    raft_addr: raft.local_addr().expect("addr").to_string(),
                    incarnation: 0,
                },
            );
            raft_listeners.push(raft);
            api_listeners.push(api);
        }
        let starts: Vec<_> = raft_listeners
            .into_iter()
            .enumerate()
            .map(|(i, listener)| {
                let id = i as u64 + 1;
                let config = NodeConfig {
                    id,
                    members: members.clone(),
                    data_dir: PathBuf::from(dir.path()).join(format!("node-{id}")),
                    settings: settings.clone(),
                    peer_overrides: BTreeMap::new(),
                    tls: None,
                };
                tokio::spawn(Node::start_with_listener(config, listener))
            })
            .collect();
        let mut nodes = Vec::new();
        for start in starts {
            nodes.push(start.await.expect("join").expect("node starts"));
        }
        let mut urls = Vec::new();
        let mut servers = Vec::new();
        for (node, listener) in nodes.iter().zip(api_listeners) {
            urls.push(format!("http://{}", listener.local_addr().expect("addr")));
            let (stop, stopped) = oneshot::channel::<()>();
            let task = tokio::spawn(serve(node.clone(), listener, api.clone(), async move {
                let _ = stopped.await;
            }));
            servers.push(Some(Server { stop, task }));
        }
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("http client");
        let cluster = TestCluster {
            _serial: serial,
            nodes: nodes.into_iter().map(Some).collect(),
            urls,
            servers,
            http,
            tmpfs,
            _dir: dir,
        };
        cluster.leader().await;
        cluster
    }

    pub fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().expect("node is running")
    }

    /// Index (0-based) of the leader once every running node agrees.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen: Vec<_> = self
                .nodes
                .iter()
                .flatten()
                .map(|n| n.status().leader_id)
                .collect();
            if let Some(Some(leader)) = seen.first() {
                let running = self.nodes.iter().flatten().any(|n| n.id() == *leader);
                if running && seen.iter().all(|l| *l == Some(*leader)) {
                    return (*leader - 1) as usize;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The whole replicated state, read linearizably through a running node.
    pub async fn state(&self) -> StateMachine {
        let node = self.nodes.iter().flatten().next().expect("a running node");
        node.read(Consistency::Linearizable, |s| s.clone())
            .await
            .expect("linearizable read")
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
        let mut request = self.http.request(method, format!("{}{path}", self.urls[i]));
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{path}: body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    /// A JSON request (or none when `body` is `None`).
    pub async fn call(&self, i: usize, method: Method, path: &str, body: Option<Value>) -> Reply {
        match body {
            Some(body) => {
                let bytes = serde_json::to_vec(&body).expect("json");
                self.raw_call(i, method, path, Some("application/json"), Some(bytes))
                    .await
            }
            None => self.raw_call(i, method, path, None, None).await,
        }
    }

    pub async fn get(&self, i: usize, path: &str) -> Reply {
        self.call(i, Method::GET, path, None).await
    }

    pub async fn post(&self, i: usize, path: &str, body: Value) -> Reply {
        self.call(i, Method::POST, path, Some(body)).await
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

    /// Acquires `lock` for `session` through node `i`; returns the body.
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
        if let Some(server) = self.servers[i].take() {
            let _ = server.stop.send(());
            let result = tokio::time::timeout(WAIT, server.task)
                .await
                .expect("graceful shutdown finishes promptly")
                .expect("join");
            result.expect("serve returns Ok");
        }
    }

    pub async fn stop_node(&mut self, i: usize) {
        self.stop_api(i).await;
        if let Some(node) = self.nodes[i].take() {
            node.shutdown().await;
        }
    }

    pub async fn shutdown(mut self) {
        for i in 0..3 {
            self.stop_node(i).await;
        }
    }
}

/// Sends `request` verbatim (reqwest would normalize `..` and `%2e%2e`)
/// and returns (status, parsed JSON body).
pub async fn raw_http(url: &str, request: &str) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .expect("response in time")
        .expect("read");
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, body)
}

/// Polls `condition` until it holds or `WAIT` passes.
pub async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
