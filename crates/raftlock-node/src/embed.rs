//! Starting a member from a cluster file, for applications that embed
//! one: the same file, and the same listen address, `raftlock serve`
//! uses.

use std::path::Path;

use tokio::net::TcpListener;

use crate::config::NodeConfig;
use crate::node::{Node, StartError};
use crate::raft::typ::NodeId;

impl Node {
    /// Starts member `id` of the cluster file at `path`, as `raftlock
    /// serve --config PATH --id ID` would: the same settings and data
    /// directory, Raft routes on the member's `raft_bind` (its `raft_addr`
    /// unless set). The client HTTP API is not served here; the
    /// application calls the node in-process (`raftlock-client`'s
    /// `EmbeddedClient`), and HTTP clients use the other members.
    pub async fn start_from_cluster_file(
        path: impl AsRef<Path>,
        id: NodeId,
    ) -> Result<Node, StartError> {
        let (config, binds) = NodeConfig::from_cluster_file_with_binds(path.as_ref(), id)?;
        let listener =
            TcpListener::bind(&binds.raft)
                .await
                .map_err(|source| StartError::Listen {
                    addr: binds.raft.clone(),
                    source,
                })?;
        Node::start_with_listener(config, listener).await
    }
}
