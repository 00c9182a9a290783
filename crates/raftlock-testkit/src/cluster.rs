//! Members in this process on loopback ports the OS picked, each serving
//! the real HTTP API (`raftlock_server::serve`) on its own listener, over
//! a [`LocalCluster`] (which owns the members' Raft side).

use std::path::Path;

use raftlock_node::core::StateMachine;
use raftlock_node::{ClusterSettings, Consistency, LocalCluster, Node, NodeId};
use raftlock_server::ApiConfig;
use reqwest::Method;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Mutex, MutexGuard};
use tokio::task::JoinHandle;

use crate::http::Reply;
use crate::WAIT;

/// Clusters in one test binary run one at a time: several three-member
/// clusters on a 2-core machine starve each other's elections.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// Timing for tests: elections within a second, short session TTLs
/// allowed, no fsync (a test that needs durability turns it on).
pub fn fast_settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        session_ttl_min_ms: 200,
        fsync: false,
        ..ClusterSettings::default()
    }
}

/// What to start.
#[derive(Clone)]
pub struct Options {
    /// Members, ids `1..=size`.
    pub size: u64,
    /// Every member's cluster settings.
    pub settings: ClusterSettings,
    /// The API every member serves; `None`: no HTTP API (members are used
    /// through their [`Node`]s only).
    pub api: Option<ApiConfig>,
}

impl Default for Options {
    /// Three members with [`fast_settings`], each serving the default API.
    fn default() -> Self {
        Options {
            size: 3,
            settings: fast_settings(),
            api: Some(ApiConfig::default()),
        }
    }
}

struct Server {
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

/// A running test cluster. Member `id`'s things are at index `id - 1`.
pub struct TestCluster {
    // Field order is drop order: APIs, then members, then their files.
    servers: Vec<Option<Server>>,
    /// The members' Raft side (stop, restart, isolate).
    pub local: LocalCluster,
    /// `http://127.0.0.1:port` of member `id`'s API at `id - 1` (empty
    /// without an API).
    pub urls: Vec<String>,
    /// A client for the APIs.
    pub http: reqwest::Client,
    api: Option<ApiConfig>,
    dir: Option<tempfile::TempDir>,
    _serial: MutexGuard<'static, ()>,
}

impl TestCluster {
    /// Starts a cluster with data in a fresh temporary directory (removed
    /// on drop) and waits for an agreed leader.
    pub async fn start(options: Options) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cluster = Self::start_in(dir.path(), options).await;
        cluster.dir = Some(dir);
        cluster
    }

    /// As [`start`](Self::start), with member `id`'s data in
    /// `dir/node-{id}` (prepared by the caller, e.g. each on its own
    /// tmpfs); the caller owns `dir`.
    pub async fn start_in(dir: &Path, options: Options) -> TestCluster {
        let serial = SERIAL.lock().await;
        let mut listeners = Vec::new();
        let mut api_addrs = Vec::new();
        for _ in 0..options.size {
            if options.api.is_some() {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
                api_addrs.push(listener.local_addr().expect("addr").to_string());
                listeners.push(listener);
            } else {
                api_addrs.push("127.0.0.1:0".to_string());
            }
        }
        let local = LocalCluster::start_with_api_addrs(dir, api_addrs, options.settings)
            .await
            .expect("cluster starts");
        let urls = listeners
            .iter()
            .map(|l| format!("http://{}", l.local_addr().expect("addr")))
            .collect();
        let mut cluster = TestCluster {
            servers: (0..options.size).map(|_| None).collect(),
            local,
            urls,
            http: crate::http::client(),
            api: options.api,
            dir: None,
            _serial: serial,
        };
        for (id, listener) in (1..).zip(listeners) {
            cluster.serve(id, listener);
        }
        cluster.leader().await;
        cluster
    }

    fn serve(&mut self, id: NodeId, listener: TcpListener) {
        let Some(api) = self.api.clone() else {
            return;
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let node = self.node(id).clone();
        let task = tokio::spawn(raftlock_server::serve(node, listener, api, async move {
            let _ = stopped.await;
        }));
        self.servers[(id - 1) as usize] = Some(Server { stop, task });
    }

    /// Member `id`; panics if it is stopped (a test's own mistake).
    pub fn node(&self, id: NodeId) -> &Node {
        self.local.node(id)
    }

    /// The running members.
    pub fn running(&self) -> impl Iterator<Item = &Node> {
        self.local.running()
    }

    /// The leader once every running member agrees on a running one;
    /// panics after [`WAIT`].
    pub async fn leader(&self) -> NodeId {
        self.local.leader(WAIT).await.expect("an agreed leader")
    }

    /// The data directory of every member is under this one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(tempfile::TempDir::path)
    }

    /// The whole replicated state, read linearizably through a running
    /// member.
    pub async fn state(&self) -> StateMachine {
        let node = self.running().next().expect("a running member");
        node.read_state(Consistency::Linearizable, |s| s.clone())
            .await
            .expect("linearizable read")
    }

    /// `path` on member `id`'s API.
    pub fn url(&self, id: NodeId, path: &str) -> String {
        format!("{}{path}", self.urls[(id - 1) as usize])
    }

    /// The API of every member whose API runs, in id order.
    pub fn endpoints(&self) -> Vec<String> {
        self.servers
            .iter()
            .zip(&self.urls)
            .filter(|(server, _)| server.is_some())
            .map(|(_, url)| url.clone())
            .collect()
    }

    /// A request to member `id` with an optional raw body and content type.
    pub async fn raw_call(
        &self,
        id: NodeId,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut request = self.http.request(method, self.url(id, path));
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        Reply::of(request, path).await
    }

    /// A JSON request to member `id` (no body when `body` is `None`).
    pub async fn call(&self, id: NodeId, method: Method, path: &str, body: Option<Value>) -> Reply {
        match body {
            Some(body) => {
                let bytes = serde_json::to_vec(&body).expect("json");
                self.raw_call(id, method, path, Some("application/json"), Some(bytes))
                    .await
            }
            None => self.raw_call(id, method, path, None, None).await,
        }
    }

    /// `GET path` on member `id`.
    pub async fn get(&self, id: NodeId, path: &str) -> Reply {
        self.call(id, Method::GET, path, None).await
    }

    /// `POST path` with a JSON body on member `id`.
    pub async fn post(&self, id: NodeId, path: &str, body: Value) -> Reply {
        self.call(id, Method::POST, path, Some(body)).await
    }

    /// Stops member `id`'s API gracefully; it must finish within [`WAIT`].
    pub async fn stop_api(&mut self, id: NodeId) {
        if let Some(server) = self.servers[(id - 1) as usize].take() {
            let _ = server.stop.send(());
            let result = tokio::time::timeout(WAIT, server.task)
                .await
                .expect("graceful shutdown finishes promptly")
                .expect("join");
            result.expect("serve returns Ok");
        }
    }

    /// Stops member `id`'s API, then the member (its data stays).
    pub async fn stop(&mut self, id: NodeId) {
        self.stop_api(id).await;
        self.local.stop(id).await;
    }

    /// Restarts stopped member `id` on its old addresses and data, with
    /// its API (if the cluster has one) on the old port.
    pub async fn restart(&mut self, id: NodeId) {
        self.local.restart(id).await.expect("restart");
        if self.api.is_some() {
            let addr = self.urls[(id - 1) as usize].trim_start_matches("http://");
            let listener = TcpListener::bind(addr).await.expect("bind api again");
            self.serve(id, listener);
        }
    }

    /// Cuts (or, with `false`, restores) every link between member `id`
    /// and the others; its API still answers.
    pub fn isolate(&self, id: NodeId, isolated: bool) {
        self.local.isolate(id, isolated);
    }

    /// Stops every API and member (their data stays).
    pub async fn stop_all(&mut self) {
        for id in 1..=self.servers.len() as NodeId {
            self.stop(id).await;
        }
    }

    /// Stops every API and member, then drops the cluster.
    pub async fn shutdown(mut self) {
        self.stop_all().await;
    }
}
