//! A member's door as the cluster file configures it: `raftlock serve` and
//! the Jepsen harness's member processes start it the same way. The
//! listener is bound before Raft starts (a port conflict fails first,
//! `raftlock_node::BoundDoor`); the door is started once the node runs,
//! with the API's tokens and, when the cluster has `[tls]`, the API's
//! certificate and client policy.

use raftlock_api::auth::AuthConfig;
use raftlock_node::{BoundDoor, Node, TlsSettings};

pub use raftlock_node::MemberDoorError;

use crate::Door;

/// This member's door listener, bound, not yet serving, with every
/// member's etcd client address (MemberList answers them).
pub struct MemberDoor {
    bound: BoundDoor,
}

impl MemberDoor {
    /// Binds member `id`'s door if the cluster file (its text) gives it
    /// one (`etcd = { client_addr = ... }` in its `[[members]]` entry);
    /// `None` when it does not.
    pub async fn bind(cluster_toml: &str, id: u64) -> Result<Option<Self>, MemberDoorError> {
        Ok(BoundDoor::bind(cluster_toml, "etcd", id)
            .await?
            .map(|bound| Self { bound }))
    }

    /// Serves the door over `node` with the API's bearer tokens, over TLS
    /// when `tls` is given, and logs where.
    pub fn start(
        self,
        node: &Node,
        auth: &AuthConfig,
        tls: Option<&TlsSettings>,
    ) -> Result<Door, MemberDoorError> {
        let bound = self.bound;
        let started = match bound.tls_server(tls)? {
            Some(server) => Door::start_tls(
                node.clone(),
                bound.listener,
                bound.client_addrs,
                server,
                auth,
            ),
            None => Door::start(node.clone(), bound.listener, bound.client_addrs, auth),
        };
        let door = started.map_err(|source| MemberDoorError::Io {
            door: bound.door,
            source,
        })?;
        tracing::info!(client_addr = %bound.addrs.client_addr, bind = %door.local_addr(),
            tls = tls.is_some(), tokens = auth.enabled(),
            "etcd door serving (docs/etcd.md)");
        Ok(door)
    }
}
