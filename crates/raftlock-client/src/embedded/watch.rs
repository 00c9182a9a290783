//! Node reads and watches over the in-process node, with the semantics of
//! `GET /v1/nodes/{path}?watch=true&since_revision=R` (docs/api.md,
//! Nodes; the server's `node_watch.rs` frames the same history).
//!
//! The node's change history decides what changed. A watch subscribes to
//! new revisions before it reads the history (and, without a
//! `since_revision`, before it reads the current revision), so a change
//! recorded in between is signalled, never missed. A `since_revision`
//! older than the history kept yields one [`WatchEvent::Compacted`] and
//! the stream ends. It also ends, with `ShuttingDown`, when the node stops.

use std::collections::VecDeque;

use futures::stream::{self, StreamExt};
use raftlock_core::path::{parent_of, validate_node_path};
use raftlock_node::{Change, Consistency, Node};
use tokio::sync::watch;

use super::EmbeddedClient;
use crate::error::{ClientError, Result};
use crate::watch::{NodeData, NodeWatch, WatchEvent};

fn checked_path(path: &str) -> Result<()> {
    validate_node_path(path).map_err(|e| ClientError::BadRequest(e.to_string()))
}

fn node_data(node: &raftlock_core::Node) -> NodeData {
    NodeData {
        data: node.data.to_vec(),
        version: node.version,
        create_revision: node.create_revision,
        mod_revision: node.mod_revision,
    }
}

fn event(change: Change) -> WatchEvent {
    match change.node {
        Some(node) => WatchEvent::Put {
            revision: change.revision,
            node: node_data(&node),
            path: change.path,
        },
        None => WatchEvent::Delete {
            revision: change.revision,
            path: change.path,
        },
    }
}

/// The node at `path` and the revision of the (linearizable) read.
pub(super) async fn read_node(client: &EmbeddedClient, path: &str) -> Result<(NodeData, u64)> {
    checked_path(path)?;
    let read = || client.node.get_node(path, Consistency::Linearizable);
    let read = client.retrying(None, read).await?;
    match read.value {
        Some(node) => Ok((
            NodeData {
                data: node.data,
                version: node.version,
                create_revision: node.create_revision,
                mod_revision: node.mod_revision,
            },
            read.revision,
        )),
        None => Err(ClientError::NotFound(format!("no node at {path}"))),
    }
}

struct Watching {
    node: Node,
    path: String,
    /// Changes up to this revision were yielded (or did not match).
    sent: u64,
    latest: watch::Receiver<u64>,
    ready: VecDeque<Result<WatchEvent>>,
    done: bool,
}

impl Watching {
    fn matches(&self, changed: &str) -> bool {
        changed == self.path || (changed != "/" && parent_of(changed) == self.path)
    }

    /// Queues what the history holds after `sent`; the compaction notice
    /// instead (and ends) when it no longer holds all of it.
    fn fill(&mut self) {
        match self.node.history().since(self.sent, |p| self.matches(p)) {
            Ok(changes) => {
                for change in changes {
                    self.sent = self.sent.max(change.revision);
                    self.ready.push_back(Ok(event(change)));
                }
            }
            Err(compacted) => {
                self.ready.push_back(Ok(WatchEvent::Compacted {
                    floor: compacted.floor,
                }));
                self.done = true;
            }
        }
    }

    /// The next item, waiting for new revisions; `None` after the last.
    async fn next(mut self) -> Option<(Result<WatchEvent>, Watching)> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some((item, self));
            }
            if self.done {
                return None;
            }
            let stopped = tokio::select! {
                changed = self.latest.changed() => changed.is_err(),
                () = self.node.stopped() => true,
            };
            if stopped {
                self.done = true;
                return Some((Err(ClientError::ShuttingDown), self));
            }
            self.fill();
        }
    }
}

/// See [`LockClient::watch`](crate::LockClient::watch).
pub(super) fn watch(client: &EmbeddedClient, path: &str, since_revision: Option<u64>) -> NodeWatch {
    let client = client.clone();
    let path = path.to_string();
    let start = async move {
        checked_path(&path)?;
        // Subscribed before the revision and the history are read.
        let latest = client.node.history().subscribe();
        let sent = match since_revision {
            Some(revision) => revision,
            None => {
                let read = || client.node.revision(Consistency::Linearizable);
                client.retrying(None, read).await?
            }
        };
        let mut watching = Watching {
            node: client.node.clone(),
            path,
            sent,
            latest,
            ready: VecDeque::new(),
            done: false,
        };
        watching.fill();
        Ok(watching)
    };
    Box::pin(stream::once(start).flat_map(|started| match started {
        Err(e) => stream::once(async move { Err(e) }).boxed(),
        Ok(watching) => stream::unfold(watching, Watching::next).boxed(),
    }))
}
