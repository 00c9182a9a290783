//! Node watches, as both transports report them: a node's value, and the
//! stream of changes of a node and its direct children (docs/api.md,
//! Nodes). [`LockClient::watch`](crate::LockClient::watch) yields them.

use futures::stream::BoxStream;

use crate::error::Result;

/// A node's value as a watch or a read reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeData {
    /// The node's data.
    pub data: Vec<u8>,
    /// 1 on create, +1 per change.
    pub version: u64,
    /// The revision that created it.
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
}

/// One item of a [`NodeWatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The node at `path` was created or changed at `revision`.
    Put {
        /// The change's revision.
        revision: u64,
        /// The node's path.
        path: String,
        /// Its value after the change.
        node: NodeData,
    },
    /// The node at `path` was deleted at `revision`.
    Delete {
        /// The change's revision.
        revision: u64,
        /// The node's path.
        path: String,
    },
    /// The member no longer has the changes after the requested revision:
    /// read afresh and watch from that read's revision. The stream ends.
    Compacted {
        /// The oldest revision a watch may start after now.
        floor: u64,
    },
}

/// Changes of a node and its children; see
/// [`LockClient::watch`](crate::LockClient::watch).
pub type NodeWatch = BoxStream<'static, Result<WatchEvent>>;
