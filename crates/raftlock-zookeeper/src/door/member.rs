//! A member's door as the cluster file configures it: `raftlock serve` and
//! the Jepsen harness's member processes start it the same way. The
//! listener is bound before Raft starts (a port conflict fails first); the
//! door is started once the node runs, with the API's tokens and, when the
//! cluster has `[tls]`, the API's certificate and client policy.

use raftlock_api::auth::AuthConfig;
use raftlock_node::{DoorAddrs, Node, TlsSettings};
use tokio::net::TcpListener;

use super::{Door, DoorConfig};

/// Why a member's door could not be bound or started.
#[derive(Debug, thiserror::Error)]
pub enum MemberDoorError {
    /// The `zookeeper = { ... }` entry of the cluster file is malformed.
    #[error("cluster file: {0}")]
    Config(String),
    /// The door's address is taken or cannot be bound.
    #[error("cannot listen on zookeeper bind {addr}: {source}")]
    Bind {
        /// The address tried.
        addr: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The `[tls]` table's certificate or key cannot be loaded.
    #[error("zookeeper door TLS: {0}")]
    Tls(#[from] raftlock_tls::TlsError),
    /// The bound listener cannot be served.
    #[error("zookeeper door: {0}")]
    Io(#[from] std::io::Error),
}

/// This member's door listener, bound, not yet serving.
pub struct MemberDoor {
    listener: TcpListener,
    addrs: DoorAddrs,
}

impl MemberDoor {
    /// Binds member `id`'s door if the cluster file (its text) gives it
    /// one (`zookeeper = { client_addr = ... }` in its `[[members]]`
    /// entry); `None` when it does not.
    pub async fn bind(cluster_toml: &str, id: u64) -> Result<Option<Self>, MemberDoorError> {
        let Some(addrs) = raftlock_node::door_addrs(cluster_toml, "zookeeper", id)
            .map_err(MemberDoorError::Config)?
        else {
            return Ok(None);
        };
        let listener = TcpListener::bind(addrs.bind_addr())
            .await
            .map_err(|source| MemberDoorError::Bind {
                addr: addrs.bind_addr().to_string(),
                source,
            })?;
        Ok(Some(Self { listener, addrs }))
    }

    /// Serves the door over `node` with the API's bearer tokens, over TLS
    /// when `tls` is given, and logs where.
    pub fn start(
        self,
        node: &Node,
        auth: &AuthConfig,
        tls: Option<&TlsSettings>,
    ) -> Result<Door, MemberDoorError> {
        let config = DoorConfig {
            auth: auth.clone(),
            ..DoorConfig::default()
        };
        let door = match tls {
            Some(tls) => {
                let server = raftlock_tls::api_server_config(tls)?;
                Door::spawn_tls(node.clone(), self.listener, config, server)?
            }
            None => Door::spawn(node.clone(), self.listener, config)?,
        };
        tracing::info!(client_addr = %self.addrs.client_addr, bind = %door.local_addr(),
            tls = tls.is_some(), tokens = auth.enabled(),
            "ZooKeeper door serving (docs/zookeeper.md)");
        Ok(door)
    }
}
