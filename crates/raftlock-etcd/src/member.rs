//! A member's door as the cluster file configures it: `raftlock serve` and
//! the Jepsen harness's member processes start it the same way. The
//! listener is bound before Raft starts (a port conflict fails first); the
//! door is started once the node runs, with the API's tokens and, when the
//! cluster has `[tls]`, the API's certificate and client policy.

use raftlock_api::auth::AuthConfig;
use raftlock_node::{DoorAddrs, Node, TlsSettings};
use tokio::net::TcpListener;

use crate::Door;

/// Why a member's door could not be bound or started.
#[derive(Debug, thiserror::Error)]
pub enum MemberDoorError {
    /// An `etcd = { ... }` entry of the cluster file is malformed.
    #[error("cluster file: {0}")]
    Config(String),
    /// The door's address is taken or cannot be bound.
    #[error("cannot listen on etcd bind {addr}: {source}")]
    Bind {
        /// The address tried.
        addr: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The `[tls]` table's certificate or key cannot be loaded.
    #[error("etcd door TLS: {0}")]
    Tls(#[from] raftlock_tls::TlsError),
    /// The bound listener cannot be served.
    #[error("etcd door: {0}")]
    Io(#[from] std::io::Error),
}

/// This member's door listener, bound, not yet serving, with every
/// member's etcd client address (MemberList answers them).
pub struct MemberDoor {
    listener: TcpListener,
    addrs: DoorAddrs,
    client_addrs: Vec<(u64, String)>,
}

impl MemberDoor {
    /// Binds member `id`'s door if the cluster file (its text) gives it
    /// one (`etcd = { client_addr = ... }` in its `[[members]]` entry);
    /// `None` when it does not.
    pub async fn bind(cluster_toml: &str, id: u64) -> Result<Option<Self>, MemberDoorError> {
        let all =
            raftlock_node::all_door_addrs(cluster_toml, "etcd").map_err(MemberDoorError::Config)?;
        let Some(addrs) = all.iter().find(|(m, _)| *m == id).map(|(_, a)| a.clone()) else {
            return Ok(None);
        };
        let listener = TcpListener::bind(addrs.bind_addr())
            .await
            .map_err(|source| MemberDoorError::Bind {
                addr: addrs.bind_addr().to_string(),
                source,
            })?;
        let client_addrs = all.into_iter().map(|(m, a)| (m, a.client_addr)).collect();
        Ok(Some(Self {
            listener,
            addrs,
            client_addrs,
        }))
    }

    /// Serves the door over `node` with the API's bearer tokens, over TLS
    /// when `tls` is given, and logs where.
    pub fn start(
        self,
        node: &Node,
        auth: &AuthConfig,
        tls: Option<&TlsSettings>,
    ) -> Result<Door, MemberDoorError> {
        let door = match tls {
            Some(tls) => {
                let server = raftlock_tls::api_server_config(tls)?;
                Door::start_tls(node.clone(), self.listener, self.client_addrs, server, auth)?
            }
            None => Door::start(node.clone(), self.listener, self.client_addrs, auth)?,
        };
        tracing::info!(client_addr = %self.addrs.client_addr, bind = %door.local_addr(),
            tls = tls.is_some(), tokens = auth.enabled(),
            "etcd door serving (docs/etcd.md)");
        Ok(door)
    }
}
