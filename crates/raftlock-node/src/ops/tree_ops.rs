//! Typed operations on the generic tree: what the HTTP `/v1/nodes` and
//! `/v1/txn` routes and the ZooKeeper door serve, without closures over
//! the state machine or hand-built commands (docs/design.md, "Front doors
//! over one contract"). Each read says the revision it saw, so a door can
//! stamp its answer (an HTTP header, a ZooKeeper zxid) and start a watch
//! right after it.

use std::time::{SystemTime, UNIX_EPOCH};

use raftlock_core::{
    Command, Compare, HolderGuard, NodeAcl, NodeMeta, Response, SessionId, StateMachine, TreeOp,
    TreeOpResult, TxnOp,
};
use tokio::sync::watch;

use crate::error::NodeError;
use crate::history::{Change, Compacted};
use crate::node::Node;
use crate::ops::{unexpected, Consistency};

/// A value and the revision of the state it was read from or written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtRevision<T> {
    /// The value.
    pub value: T,
    /// The state's revision.
    pub revision: u64,
}

/// A node as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Its canonical path.
    pub path: String,
    /// Its data.
    pub data: Vec<u8>,
    /// 1 on create, +1 per change.
    pub version: u64,
    /// The revision that created it (a lock node's fencing token).
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// The owning session, if ephemeral.
    pub ephemeral_owner: Option<SessionId>,
    /// The owning session's principal (`None`: persistent, or opened
    /// without one), so an edge can decide who may see the owner's id.
    pub owner_principal: Option<String>,
    /// Its immediate children.
    pub num_children: u64,
    /// Created and modified times, child and ACL versions.
    pub meta: NodeMeta,
    /// Its stored ACL, `None` for the open one (`NodeAcl::entries_of`
    /// gives the entries).
    pub acl: Option<Box<NodeAcl>>,
}

/// A node and its children's names; either may be absent (a path that
/// only holds queue nodes, such as `/locks`, has children but no node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAndChildren {
    /// The node, if it exists.
    pub node: Option<NodeView>,
    /// Its children's names, sorted; `None` when nothing exists at or
    /// below the path.
    pub children: Option<Vec<String>>,
}

/// A generic create-or-update (`PUT /v1/nodes/{path}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutNode {
    /// Canonical path (the prefix, for a sequential create; the caller
    /// applies `path::sequential_request_path`).
    pub path: String,
    /// The new data.
    pub data: Vec<u8>,
    /// Owner of a created node, making it ephemeral.
    pub session: Option<SessionId>,
    /// Sequential create.
    pub sequential: bool,
    /// Compare-and-set: 0 means "must not exist".
    pub expected_version: Option<u64>,
    /// Commit only while this fencing token holds this lock.
    pub guard: Option<HolderGuard>,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The node's full path (with its counter, if sequential).
    pub path: String,
    /// True when this write created it.
    pub created: bool,
    /// Its version after the write.
    pub version: u64,
    /// The revision that created it.
    pub create_revision: u64,
    /// The revision of this write.
    pub mod_revision: u64,
    /// The owning session, if ephemeral.
    pub ephemeral_owner: Option<SessionId>,
}

/// One operation's answer in a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnAnswer {
    /// A put.
    Put(Written),
    /// A delete of this path.
    Deleted(String),
}

/// What a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutcome {
    /// True when every compare held and `success` ran.
    pub succeeded: bool,
    /// One answer per operation of the branch that ran.
    pub answers: Vec<TxnAnswer>,
}

fn written(response: Response) -> Result<Written, NodeError> {
    match response {
        Response::Put {
            path,
            created,
            version,
            create_revision,
            mod_revision,
            ephemeral_owner,
        } => Ok(Written {
            path,
            created,
            version,
            create_revision,
            mod_revision,
            ephemeral_owner,
        }),
        other => Err(unexpected(other)),
    }
}

fn view(s: &StateMachine, path: &str) -> Option<NodeView> {
    let node = s.node(path)?;
    let owner_principal = node
        .ephemeral_owner
        .and_then(|o| s.session_principal(o).flatten().map(str::to_string));
    Some(NodeView {
        path: path.to_string(),
        data: node.data.to_vec(),
        version: node.version,
        create_revision: node.create_revision,
        mod_revision: node.mod_revision,
        ephemeral_owner: node.ephemeral_owner,
        owner_principal,
        num_children: s.children(path).map_or(0, |c| c.len() as u64),
        meta: node.meta,
        acl: node.acl.clone(),
    })
}

/// The nodes below `path`, `None` when `path` has no children list.
fn descendants(state: &StateMachine, path: &str) -> Option<u64> {
    let mut count = 0;
    let mut stack = vec![(path.to_string(), state.children(path)?)];
    while let Some((parent, children)) = stack.pop() {
        for child in children {
            count += 1;
            let child = if parent == "/" {
                format!("/{child}")
            } else {
                format!("{parent}/{child}")
            };
            if let Some(below) = state.children(&child) {
                if !below.is_empty() {
                    stack.push((child, below));
                }
            }
        }
    }
    Some(count)
}

/// `command` with this member's wall-clock time, which the state machine
/// turns into the written nodes' times (`Command::Stamped`). A clock
/// before 1970 reads as 0; the state's clock never goes back anyway.
// Wall-clock time only labels the nodes (ZooKeeper's ctime/mtime): no
// deadline or other decision depends on it.
#[allow(clippy::disallowed_methods)]
fn stamped(command: Command) -> Command {
    let time_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Command::Stamped {
        time_ms,
        command: Box::new(command),
    }
}

impl Node {
    /// The node at `path`, if it exists.
    pub async fn get_node(
        &self,
        path: &str,
        consistency: Consistency,
    ) -> Result<AtRevision<Option<NodeView>>, NodeError> {
        self.read(consistency, |s| AtRevision {
            value: view(s, path),
            revision: s.revision(),
        })
        .await
    }

    /// The names of `path`'s children, sorted; `None` when nothing exists
    /// at or below it.
    pub async fn get_children(
        &self,
        path: &str,
        consistency: Consistency,
    ) -> Result<AtRevision<Option<Vec<String>>>, NodeError> {
        self.read(consistency, |s| AtRevision {
            value: s.children(path),
            revision: s.revision(),
        })
        .await
    }

    /// The node and its children, read together.
    pub async fn get_node_and_children(
        &self,
        path: &str,
        consistency: Consistency,
    ) -> Result<AtRevision<NodeAndChildren>, NodeError> {
        self.read(consistency, |s| AtRevision {
            value: NodeAndChildren {
                node: view(s, path),
                children: s.children(path),
            },
            revision: s.revision(),
        })
        .await
    }

    /// How many nodes are below `path` (children, theirs, and so on;
    /// `path` itself not counted), read at one revision: `None` when
    /// nothing is at or below it. Paths that only hold queue nodes count
    /// as nodes, as reads show them.
    pub async fn count_below(
        &self,
        path: &str,
        consistency: Consistency,
    ) -> Result<AtRevision<Option<u64>>, NodeError> {
        self.read(consistency, |s| AtRevision {
            value: descendants(s, path).or(s.node(path).is_some().then_some(0)),
            revision: s.revision(),
        })
        .await
    }

    /// The state's revision (after a read-index barrier unless stale).
    pub async fn revision(&self, consistency: Consistency) -> Result<u64, NodeError> {
        self.read(consistency, StateMachine::revision).await
    }

    /// The TTL of session `id` in milliseconds, `None` if it is not open.
    pub async fn session_ttl(
        &self,
        id: SessionId,
        consistency: Consistency,
    ) -> Result<AtRevision<Option<u64>>, NodeError> {
        self.read(consistency, |s| AtRevision {
            value: s.session_lease(id).map(|l| l.ttl_ms),
            revision: s.revision(),
        })
        .await
    }

    /// Creates or updates a node (guarded by a lock holder if asked).
    pub async fn put_node(&self, put: PutNode) -> Result<Written, NodeError> {
        let PutNode {
            path,
            data,
            session,
            sequential,
            expected_version,
            guard,
        } = put;
        let command = match guard {
            Some(guard) => Command::GuardedWrite {
                guard,
                op: TxnOp::Put {
                    path,
                    data,
                    session,
                    sequential,
                    expected_version,
                },
            },
            None => Command::Put {
                path,
                data,
                session,
                sequential,
                expected_version,
            },
        };
        written(self.submit(stamped(command)).await?)
    }

    /// Deletes a node without children; returns the revision of the delete.
    pub async fn delete_node(
        &self,
        path: &str,
        expected_version: Option<u64>,
    ) -> Result<u64, NodeError> {
        let command = Command::Delete {
            path: path.to_string(),
            expected_version,
        };
        let (_, applied) = self.replica.write(stamped(command)).await?;
        applied.result?;
        Ok(applied.revision)
    }

    /// Compares, then one branch of writes, atomically (`POST /v1/txn`).
    pub async fn txn(
        &self,
        compare: Vec<Compare>,
        success: Vec<TxnOp>,
        failure: Vec<TxnOp>,
    ) -> Result<TxnOutcome, NodeError> {
        let command = Command::Txn {
            compare,
            success,
            failure,
        };
        match self.submit(stamped(command)).await? {
            Response::Txn {
                succeeded,
                responses,
            } => {
                let answers = responses
                    .into_iter()
                    .map(|r| match r {
                        Response::Deleted { path } => Ok(TxnAnswer::Deleted(path)),
                        other => written(other).map(TxnAnswer::Put),
                    })
                    .collect::<Result<_, _>>()?;
                Ok(TxnOutcome { succeeded, answers })
            }
            other => Err(unexpected(other)),
        }
    }

    /// Strict tree operations, all or nothing (core `tree_ops.rs`): a
    /// failing one is `CoreError::TxnOpFailed` with its index. Returns
    /// each operation's answer and the revision the list committed at.
    pub async fn tree_ops(
        &self,
        ops: Vec<TreeOp>,
    ) -> Result<AtRevision<Vec<TreeOpResult>>, NodeError> {
        let command = stamped(Command::TreeOps { ops });
        let (_, applied) = self.replica.write(command).await?;
        match applied.result? {
            Response::TreeOps { results } => Ok(AtRevision {
                value: results,
                revision: applied.revision,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// This replica's recorded node changes after revision `since` whose
    /// path `matches`, oldest first; `Compacted` when some are no longer
    /// kept (read afresh then).
    pub fn node_changes_since(
        &self,
        since: u64,
        matches: impl Fn(&str) -> bool,
    ) -> Result<Vec<Change>, Compacted> {
        self.history().since(since, matches)
    }

    /// Signals the newest recorded revision each time a change is
    /// recorded (subscribe, then read: nothing is missed).
    pub fn subscribe_node_changes(&self) -> watch::Receiver<u64> {
        self.history().subscribe()
    }
}
