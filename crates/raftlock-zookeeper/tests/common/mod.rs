//! A three-member in-process cluster with a ZooKeeper door on each
//! member, and a blocking ZooKeeper client over the codec. Client code
//! runs on a blocking thread (`Cluster::client`) while the members run on
//! the test's runtime.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use raftlock_node::{ClusterSettings, LocalCluster};
use raftlock_zookeeper::door::{Door, DoorConfig};

#[path = "../support/wire_client.rs"]
mod wire_client;
// Not every test binary speaks the wire protocol itself.
#[allow(unused_imports)]
pub use wire_client::*;

/// Clusters in one test binary run one at a time: several three-member
/// clusters on a small machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Cluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub inner: LocalCluster,
    pub doors: Vec<Door>,
    _dir: tempfile::TempDir,
}

pub fn settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        session_ttl_min_ms: 200,
        ..ClusterSettings::default()
    }
}

/// Door settings for tests: short session timeouts allowed.
pub fn door_config() -> DoorConfig {
    DoorConfig {
        min_session_timeout_ms: 200,
        ..DoorConfig::default()
    }
}

impl Cluster {
    pub async fn start(config: DoorConfig) -> Cluster {
        Self::start_with(config, None).await
    }

    /// Doors serving TLS with `tls`, as `raftlock serve` with `[tls]`.
    pub async fn start_tls(
        config: DoorConfig,
        tls: std::sync::Arc<raftlock_tls::rustls::ServerConfig>,
    ) -> Cluster {
        Self::start_with(config, Some(tls)).await
    }

    async fn start_with(
        config: DoorConfig,
        tls: Option<std::sync::Arc<raftlock_tls::rustls::ServerConfig>>,
    ) -> Cluster {
        let serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = LocalCluster::start(dir.path(), 3, settings())
            .await
            .expect("cluster starts");
        inner
            .leader(Duration::from_secs(20))
            .await
            .expect("a leader");
        let mut doors = Vec::new();
        for node in inner.running() {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a door");
            let door = match &tls {
                Some(tls) => Door::spawn_tls(node.clone(), listener, config.clone(), tls.clone()),
                None => Door::spawn(node.clone(), listener, config.clone()),
            };
            doors.push(door.expect("door"));
        }
        Cluster {
            _serial: serial,
            inner,
            doors,
            _dir: dir,
        }
    }

    /// Member `id`'s door address.
    pub fn addr(&self, id: usize) -> SocketAddr {
        self.doors[id - 1].local_addr()
    }

    /// Every door's address, member 1 first.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.doors.iter().map(Door::local_addr).collect()
    }
}

/// Runs blocking client code beside the cluster.
pub async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("client code")
}
