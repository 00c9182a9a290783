//! Read-only views of the state, for the API and the node layer.

use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::queue::{node_path, parse_node_path, QueueEntry};
use crate::state::StateMachine;
use crate::types::{Node, QueueKind, SessionId};

/// One node of a lock or election queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntryView {
    /// The session that queued this node.
    pub session: SessionId,
    /// The session's owner label.
    pub owner: String,
    /// The principal that opened the session (`None` without tokens).
    pub principal: Option<String>,
    /// The node's full path (`/locks/orders/42/lock-0000000007`).
    pub node: String,
    /// The node's create revision.
    pub fencing_token: u64,
    /// When this entry became the holder, if it has.
    pub granted_revision: Option<u64>,
    /// Node data (an election's value).
    pub data: Vec<u8>,
}

/// A whole queue: the holder and the waiters in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueView {
    /// The first node, which holds; `None` for an empty queue.
    pub holder: Option<QueueEntryView>,
    /// The nodes behind it, first in line first.
    pub waiters: Vec<QueueEntryView>,
}

/// One line of a lock listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSummary {
    /// The lock or election name (without the tree prefix).
    pub name: String,
    /// The holder, if any.
    pub holder: Option<QueueEntryView>,
    /// How many nodes wait behind the holder.
    pub waiters: usize,
}

/// Where a queue node stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Position {
    /// First in line: the lock is held by this node.
    Holder,
    /// Waiting directly behind this node.
    Behind(String),
}

/// A session as listed by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// The session's id.
    pub id: SessionId,
    /// Its owner label.
    pub owner: String,
    /// The principal that opened the session (`None` without tokens).
    pub principal: Option<String>,
    /// Its TTL as granted.
    pub ttl_ms: u64,
    /// Paths of the nodes it owns (queue nodes and ephemeral nodes).
    pub nodes: Vec<String>,
}

/// What the leader's session tracker needs to set a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLease {
    /// The session's id.
    pub id: SessionId,
    /// Its full TTL.
    pub ttl_ms: u64,
    /// The TTL left at the last leader's checkpoint, if one is recorded
    /// (`Command::CheckpointSessions`): a new leader counts down from it.
    pub checkpoint_remaining_ms: Option<u64>,
}

/// Sizes for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Open sessions.
    pub sessions: usize,
    /// Nodes excluding the root.
    pub nodes: usize,
    /// Queues with a holder (locks and elections).
    pub held: usize,
    /// Queued nodes that do not hold.
    pub waiters: usize,
}

impl StateMachine {
    /// The global revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The node at canonical `path`, if it exists (queue nodes included).
    pub fn node(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Names of the immediate children of `path`, sorted, including
    /// virtual directories such as `/locks` that hold queue nodes. `None`
    /// when nothing exists at or below `path`. Skips whole subtrees, so the
    /// cost grows with the number of children, not of descendants.
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        let mut names = Vec::new();
        let mut from = Bound::Excluded(prefix.clone());
        loop {
            let bounds = (from.as_ref().map(String::as_str), Bound::Unbounded);
            let Some((key, _)) = self.nodes.range::<str, _>(bounds).next() else {
                break;
            };
            let Some(rest) = key.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                // The child itself: its siblings such as `b-x` sort before
                // its subtree, so step to the very next key.
                None => {
                    names.push(rest.to_string());
                    from = Bound::Excluded(key.to_string());
                }
                // Inside a child's subtree ('0' is the byte after '/').
                Some((child, _)) => {
                    names.push(child.to_string());
                    from = Bound::Included(format!("{prefix}{child}0"));
                }
            }
        }
        if names.is_empty() && !self.nodes.contains_key(path) {
            return None;
        }
        names.sort();
        names.dedup();
        Some(names)
    }

    /// The open session `id`, if it exists.
    pub fn session(&self, id: SessionId) -> Option<SessionView> {
        self.sessions.get(&id).map(|s| SessionView {
            id,
            owner: s.owner.to_string(),
            principal: s.principal.as_deref().map(str::to_string),
            ttl_ms: s.ttl_ms,
            nodes: s.nodes.iter().map(|p| p.to_string()).collect(),
        })
    }

    /// Every live session's lease, so a new leader can set every deadline.
    pub fn session_leases(&self) -> impl Iterator<Item = SessionLease> + '_ {
        self.sessions.iter().map(|(id, s)| SessionLease {
            id: *id,
            ttl_ms: s.ttl_ms,
            checkpoint_remaining_ms: s.checkpoint_remaining_ms,
        })
    }

    /// The lease of one session.
    pub fn session_lease(&self, id: SessionId) -> Option<SessionLease> {
        self.sessions.get(&id).map(|s| SessionLease {
            id,
            ttl_ms: s.ttl_ms,
            checkpoint_remaining_ms: s.checkpoint_remaining_ms,
        })
    }

    /// The holder and waiters of a queue; empty when nobody is queued.
    pub fn queue(&self, kind: QueueKind, name: &str) -> QueueView {
        let queue_path = kind.queue_path(name);
        let Some(queue) = self.queues.get(queue_path.as_str()) else {
            return QueueView {
                holder: None,
                waiters: Vec::new(),
            };
        };
        let mut entries = queue
            .iter()
            .map(|(seq, e)| self.entry_view(&queue_path, seq, e));
        // A held-off head (`lock_delay.rs`) holds nothing: no holder while
        // the delay runs, and it is not waiting either.
        let holder = entries.next().filter(|h| !self.is_held_off(&h.node));
        QueueView {
            holder,
            waiters: entries.collect(),
        }
    }

    /// The queue's holder alone: O(log n), where [`queue`](Self::queue)
    /// views every waiter. For the paths that run on every grant.
    pub fn holder(&self, kind: QueueKind, name: &str) -> Option<QueueEntryView> {
        let queue_path = kind.queue_path(name);
        let queue = self.queues.get(queue_path.as_str())?;
        let (seq, entry) = queue.head()?;
        let view = self.entry_view(&queue_path, seq, entry);
        (!self.is_held_off(&view.node)).then_some(view)
    }

    /// Queues whose name starts with `prefix`, in name order.
    pub fn queues(&self, kind: QueueKind, prefix: &str) -> Vec<QueueSummary> {
        let start = kind.queue_path(prefix);
        let strip = format!("{}/", kind.prefix());
        self.queues
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(|(path, _)| path.starts_with(&start))
            .map(|(path, queue)| QueueSummary {
                name: path.strip_prefix(&strip).unwrap_or(path).to_string(),
                holder: queue
                    .head()
                    .map(|(seq, e)| self.entry_view(path, seq, e))
                    .filter(|h| !self.is_held_off(&h.node)),
                waiters: queue.len().saturating_sub(1),
            })
            .collect()
    }

    /// Where the queue node at `node` stands: holder, or directly behind
    /// which node. O(log n).
    pub fn position(&self, node: &str) -> Result<Position, CoreError> {
        let not_found = || CoreError::NotFound(node.to_string());
        let (queue_path, seq) = parse_node_path(node).ok_or_else(not_found)?;
        let queue = self.queues.get(queue_path).ok_or_else(not_found)?;
        if queue.get(seq).is_none() {
            return Err(not_found());
        }
        Ok(match queue.predecessor(seq) {
            None => Position::Holder,
            Some(prev) => Position::Behind(node_path(queue_path, prev)),
        })
    }

    /// Is `token` the fencing token of the lock's current holder? Returns
    /// (valid, current holder's token).
    pub fn fencing_check(&self, name: &str, token: u64) -> (bool, Option<u64>) {
        let current = self.holder(QueueKind::Lock, name).map(|h| h.fencing_token);
        (current == Some(token), current)
    }

    /// Live sessions. O(1), for admission checks on every open (where
    /// [`counts`](Self::counts) walks every queue).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Live sessions whose owner label is `owner`. O(sessions): the
    /// state keeps no index by owner (it would cost memory in every
    /// session for a check that is off by default).
    pub fn sessions_owned_by(&self, owner: &str) -> usize {
        self.sessions
            .values()
            .filter(|s| *s.owner == *owner)
            .count()
    }

    /// Live sessions opened by `principal`. O(sessions), like
    /// [`sessions_owned_by`](Self::sessions_owned_by).
    pub fn sessions_of_principal(&self, principal: &str) -> usize {
        self.sessions
            .values()
            .filter(|s| s.principal.as_deref() == Some(principal))
            .count()
    }

    /// The principal of a live session: `None` when the session does not
    /// exist, `Some(None)` when it was opened without one. O(log n).
    pub fn session_principal(&self, id: SessionId) -> Option<Option<&str>> {
        self.sessions.get(&id).map(|s| s.principal.as_deref())
    }

    /// How many nodes a lock or election queue holds (its holder
    /// included), and whether `session` has one of them. O(log n), for
    /// the waiters-per-lock check on every acquire.
    pub fn queue_place(&self, kind: QueueKind, name: &str, session: SessionId) -> (usize, bool) {
        let queue_path = kind.queue_path(name);
        self.queues
            .get(queue_path.as_str())
            .map_or((0, false), |q| (q.len(), q.sequence_of(session).is_some()))
    }

    /// Sizes of the state, for metrics (one pass over the queues, none
    /// over the nodes).
    pub fn counts(&self) -> Counts {
        Counts {
            sessions: self.sessions.len(),
            nodes: self.nodes.len() - 1,
            held: self.queues.len(),
            waiters: self.queues.values().map(|q| q.len() - 1).sum(),
        }
    }

    pub(crate) fn entry_view(
        &self,
        queue_path: &str,
        seq: u64,
        entry: &QueueEntry,
    ) -> QueueEntryView {
        let node = node_path(queue_path, seq);
        let stored = self.nodes.get(node.as_str());
        let session = self.sessions.get(&entry.session);
        QueueEntryView {
            session: entry.session,
            owner: session.map(|s| s.owner.to_string()).unwrap_or_default(),
            principal: session
                .and_then(|s| s.principal.as_deref())
                .map(str::to_string),
            fencing_token: stored.map_or(0, |n| n.create_revision),
            data: stored.map(|n| n.data.to_vec()).unwrap_or_default(),
            granted_revision: entry.granted_revision,
            node,
        }
    }
}

impl StateMachine {
    /// The etcd-style key space (`kv/`).
    pub fn kv(&self) -> &crate::kv::KvStore {
        &self.kv
    }
}
