//! Starts real nodes in this test process: real sled directories, real
//! sockets on ports the OS picked, real openraft.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use raftlock_node::{ClusterSettings, Member, Node, NodeConfig};
use tokio::net::TcpListener;

pub const WAIT: Duration = Duration::from_secs(10);

/// Clusters in one test binary run one at a time: several three-node
/// clusters on a 2-core machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Cluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub nodes: Vec<Option<Node>>,
    pub configs: Vec<NodeConfig>,
    pub dir: tempfile::TempDir,
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
        let mut listeners = Vec::new();
        let mut members = BTreeMap::new();
        for id in 1..=size {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr").to_string();
            members.insert(
                id,
                Member {
                    api_addr: "127.0.0.1:1".into(),
                    raft_addr: addr,
                },
            );
            listeners.push(listener);
        }
        let configs: Vec<NodeConfig> = (1..=size)
            .map(|id| config(id, &members, dir.path(), settings.clone()))
            .collect();
        let starts = configs
            .iter()
            .cloned()
            .zip(listeners)
            .map(|(c, l)| tokio::spawn(Node::start_with_listener(c, l)));
        let mut nodes = Vec::new();
        for start in starts {
            nodes.push(Some(start.await.expect("join").expect("node starts")));
        }
        let cluster = Cluster {
            _serial: serial,
            nodes,
            configs,
            dir,
        };
        cluster.leader().await;
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

    /// The leader's id once every running node agrees on one.
    pub async fn leader(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let mut seen = self.running().map(|n| n.status().leader_id);
            let first = seen.next().flatten();
            if let Some(leader) = first {
                if seen.all(|l| l == Some(leader)) && self.running().any(|n| n.id() == leader) {
                    return leader;
                }
            }
            assert!(tokio::time::Instant::now() < deadline, "no agreed leader");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(&mut self, id: u64) {
        if let Some(node) = self.nodes[(id - 1) as usize].take() {
            node.shutdown().await;
        }
    }

    /// Restarts a stopped node on its old address and data directory.
    pub async fn restart(&mut self, id: u64) {
        let config = self.configs[(id - 1) as usize].clone();
        let listener = TcpListener::bind(&config.me().raft_addr)
            .await
            .expect("rebind");
        let node = Node::start_with_listener(config, listener)
            .await
            .expect("restart");
        self.nodes[(id - 1) as usize] = Some(node);
    }

    pub async fn shutdown(mut self) {
        for id in 1..=self.nodes.len() as u64 {
            self.stop(id).await;
        }
    }
}

fn config(
    id: u64,
    members: &BTreeMap<u64, Member>,
    dir: &Path,
    settings: ClusterSettings,
) -> NodeConfig {
    NodeConfig {
        id,
        members: members.clone(),
        data_dir: PathBuf::from(dir).join(format!("node-{id}")),
        settings,
        peer_overrides: BTreeMap::new(),
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
