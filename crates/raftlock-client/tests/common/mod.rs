//! A real three-node cluster in this test process: real sled directories,
//! real sockets on ports the OS picked, real openraft, and (optionally)
//! the real HTTP API in front of each node.

#![allow(dead_code)]

pub mod scenarios;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use raftlock_node::{ClusterSettings, Member, Node, NodeConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound on anything a test waits for: a failure bound, never a
/// synchronization device.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Clusters in one test binary run one at a time: several three-node
/// clusters on a 2-core machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One node's HTTP API server.
pub struct Api {
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

pub struct Cluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub nodes: Vec<Option<Node>>,
    pub apis: Vec<Option<Api>>,
    pub dir: tempfile::TempDir,
}

pub fn settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        session_ttl_min_ms: 200,
        fsync: false,
        ..ClusterSettings::default()
    }
}

impl Cluster {
    /// Three nodes, with an HTTP API in front of each when `http`.
    pub async fn start(http: bool) -> Cluster {
        let serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut raft_listeners = Vec::new();
        let mut api_listeners = Vec::new();
        let mut members = BTreeMap::new();
        for id in 1..=3u64 {
            let raft = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let api = TcpListener::bind("127.0.0.1:0").await.expect("bind");
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
        let starts: Vec<_> = (1..=3u64)
            .zip(raft_listeners)
            .map(|(id, listener)| {
                let config = NodeConfig {
                    id,
                    members: members.clone(),
                    data_dir: PathBuf::from(dir.path()).join(format!("node-{id}")),
                    settings: settings(),
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
        let apis = nodes
            .iter()
            .zip(api_listeners)
            .map(|(node, listener)| http.then(|| serve(node.clone(), listener)))
            .collect();
        let cluster = Cluster {
            _serial: serial,
            nodes: nodes.into_iter().map(Some).collect(),
            apis,
            dir,
        };
        for node in cluster.running() {
            node.wait_for_leader(PATIENCE).await.expect("a leader");
        }
        cluster
    }

    pub fn node(&self, id: u64) -> &Node {
        self.nodes[(id - 1) as usize]
            .as_ref()
            .expect("node is running")
    }

    pub fn running(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().flatten()
    }

    /// `http://addr` of every running API, in node order.
    pub fn endpoints(&self) -> Vec<String> {
        self.apis
            .iter()
            .flatten()
            .map(|api| format!("http://{}", api.addr))
            .collect()
    }

    /// Stops node `id`'s API server (graceful), then the node.
    pub async fn stop(&mut self, id: u64) {
        let index = (id - 1) as usize;
        if let Some(api) = self.apis[index].take() {
            let _ = api.stop.send(());
            let _ = api.task.await;
        }
        if let Some(node) = self.nodes[index].take() {
            node.shutdown().await;
        }
    }

    pub async fn stop_all(&mut self) {
        for id in 1..=3 {
            self.stop(id).await;
        }
    }
}

fn serve(node: Node, listener: TcpListener) -> Api {
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let config = raftlock_server::ApiConfig::default();
    let task = tokio::spawn(raftlock_server::serve(node, listener, config, shutdown));
    Api { addr, stop, task }
}

/// An address nothing listens on (bound by the OS, then released): a
/// connection to it is refused, like a node that is down.
pub async fn dead_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}

/// Awaits `future`, failing the test (instead of hanging) past PATIENCE.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out: {what}"),
    }
}
