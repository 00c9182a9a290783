//! The state machine: its data and the apply dispatcher.
//!
//! `apply` is a pure function of (state, command): no clock, no IO, no
//! randomness, ordered collections only. That is what lets every replica
//! reach byte-identical state from the same log. A command either succeeds
//! (bumping the global revision once if it changed anything) or fails
//! without touching the state: handlers validate everything first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::{Applied, Command, DeletedNode, Effects, Response};
use crate::error::CoreError;
use crate::path::parent_of;
use crate::queue::{self, LockQueue};
use crate::shared::{self, SharedKind, Want};
use crate::types::{Node, NodeMeta, QueueKind, Session, SessionId};

/// The replicated state of one raftlock cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateMachine {
    /// Global revision: +1 per command that changed anything.
    pub(crate) revision: u64,
    /// Every node by canonical path; the root `/` always exists. Keys
    /// (here and below) are `Box<str>`: they never grow, and a `String`'s
    /// capacity word costs a slot in every B-tree leaf.
    pub(crate) nodes: BTreeMap<Box<str>, Node>,
    pub(crate) sessions: BTreeMap<SessionId, Session>,
    /// Lock and election queues by queue path (`/locks/orders`).
    pub(crate) queues: BTreeMap<Box<str>, LockQueue>,
    /// Lock-delay of each mutex queue that has one, in milliseconds
    /// (`lock_delay.rs`). Snapshot format 2 lacks it.
    pub(crate) lock_delays: BTreeMap<Box<str>, u64>,
    /// The latest proposer time seen (`Command::Stamped`), milliseconds
    /// since the Unix epoch: what node times are taken from. It only
    /// moves forward, so a node's times never go backwards even when
    /// members' clocks disagree. Last field: formats 1 to 3 lack it.
    pub(crate) clock_ms: u64,
    /// The etcd-style flat key space (`kv/`). Last field: formats 1 to 4
    /// lack it.
    pub(crate) kv: crate::kv::KvStore,
}

impl Default for StateMachine {
    fn default() -> Self {
        Self::new()
    }
}

/// A successful handler's answer and whether it changed the state.
pub(crate) struct Outcome {
    pub response: Response,
    pub changed: bool,
}

impl Outcome {
    pub fn changed(response: Response) -> Self {
        Outcome {
            response,
            changed: true,
        }
    }

    pub fn unchanged(response: Response) -> Self {
        Outcome {
            response,
            changed: false,
        }
    }
}

impl StateMachine {
    /// An empty tree holding only the root.
    pub fn new() -> Self {
        let root = Node {
            data: Box::default(),
            version: 1,
            create_revision: 0,
            mod_revision: 0,
            ephemeral_owner: None,
            next_child_sequence: 0,
            meta: NodeMeta::default(),
            acl: None,
        };
        StateMachine {
            revision: 0,
            nodes: BTreeMap::from([("/".into(), root)]),
            sessions: BTreeMap::new(),
            queues: BTreeMap::new(),
            lock_delays: BTreeMap::new(),
            clock_ms: 0,
            kv: crate::kv::KvStore::default(),
        }
    }

    /// Applies one committed command.
    pub fn apply(&mut self, command: &Command) -> Applied {
        let Some(next) = self.revision.checked_add(1) else {
            // 2^64 commits from now; refuse rather than wrap and reuse tokens.
            return Applied {
                result: Err(CoreError::SequenceExhausted("the global revision".into())),
                revision: self.revision,
                effects: Effects::default(),
            };
        };
        let mut effects = Effects::default();
        let result = match command {
            Command::OpenSession { id, owner, ttl_ms } => {
                self.open_session(*id, None, owner, *ttl_ms)
            }
            Command::OpenSessionAs {
                id,
                principal,
                owner,
                ttl_ms,
            } => self.open_session(*id, Some(principal), owner, *ttl_ms),
            Command::CloseSession { id } | Command::ExpireSession { id } => {
                self.end_session(*id, next, &mut effects)
            }
            Command::CheckpointSessions { sessions } => self.checkpoint_sessions(
                sessions
                    .iter()
                    .map(|(id, remaining)| (*id, Some(*remaining))),
            ),
            Command::RenewSessions { ids } => {
                self.checkpoint_sessions(ids.iter().map(|id| (*id, None)))
            }
            Command::Put {
                path,
                data,
                session,
                sequential,
                expected_version,
            } => self.put(
                path,
                data,
                *session,
                *sequential,
                *expected_version,
                next,
                &mut effects,
            ),
            Command::Delete {
                path,
                expected_version,
            } => self.delete(path, *expected_version, next, &mut effects),
            Command::Acquire {
                kind,
                name,
                session,
                data,
                wait,
            } => self.acquire(
                *kind,
                name,
                *session,
                data,
                (*wait, None),
                next,
                &mut effects,
            ),
            Command::AcquireWithDelay {
                name,
                session,
                wait,
                lock_delay_ms,
            } => self.acquire(
                QueueKind::Lock,
                name,
                *session,
                &[],
                (*wait, Some(*lock_delay_ms)),
                next,
                &mut effects,
            ),
            Command::EndLockDelays { nodes } => self.end_lock_delays(nodes, next, &mut effects),
            Command::Release {
                kind,
                name,
                session,
                withdraw,
            } => self.release(
                *kind,
                name,
                *session,
                withdraw.as_deref(),
                next,
                &mut effects,
            ),
            Command::Proclaim {
                name,
                session,
                value,
            } => self.proclaim(name, *session, value, next, &mut effects),
            Command::AcquireRwLock {
                name,
                session,
                mode,
                wait,
            } => self.acquire_shared(name, *session, Want::Rw(*mode), *wait, next, &mut effects),
            Command::AcquireSemaphore {
                name,
                session,
                permits,
                wait,
            } => self.acquire_shared(
                name,
                *session,
                Want::Permit(*permits),
                *wait,
                next,
                &mut effects,
            ),
            Command::ReleaseShared {
                kind,
                name,
                session,
                withdraw,
            } => self.release_shared(
                *kind,
                name,
                *session,
                withdraw.as_deref(),
                next,
                &mut effects,
            ),
            Command::AcquireMulti {
                locks,
                session,
                wait,
            } => self.acquire_multi(locks, *session, *wait, next, &mut effects),
            Command::ReleaseMulti {
                locks,
                session,
                withdraw,
            } => self.release_multi(locks, *session, *withdraw, next, &mut effects),
            Command::GuardedWrite { guard, op } => {
                self.guarded_write(guard, op, next, &mut effects)
            }
            Command::Txn {
                compare,
                success,
                failure,
            } => self.txn(compare, success, failure, next, &mut effects),
            Command::TreeOps { ops } => self.tree_ops(ops, next, &mut effects),
            Command::Stamped { time_ms, command } => return self.apply_stamped(*time_ms, command),
            Command::Kv(op) => self.kv_apply(op, next),
        };
        match result {
            Ok(outcome) => {
                if outcome.changed {
                    self.revision = next;
                } else {
                    effects = Effects::default();
                }
                Applied {
                    result: Ok(outcome.response),
                    revision: self.revision,
                    effects,
                }
            }
            Err(error) => Applied {
                result: Err(error),
                revision: self.revision,
                effects: Effects::default(),
            },
        }
    }

    /// Applies a tree write at the proposer's time: the clock moves to it
    /// (never back) for this command, and stays only if the command
    /// changed the state.
    fn apply_stamped(&mut self, time_ms: u64, command: &Command) -> Applied {
        if !command.takes_a_time() {
            return Applied {
                result: Err(CoreError::Invalid(
                    "only node writes (put, delete, txn, tree operations) carry a time".into(),
                )),
                revision: self.revision,
                effects: Effects::default(),
            };
        }
        let (clock, revision) = (self.clock_ms, self.revision);
        self.clock_ms = clock.max(time_ms);
        let applied = self.apply(command);
        if self.revision == revision {
            self.clock_ms = clock;
        }
        applied
    }

    /// The latest proposer time the state has seen, in milliseconds
    /// since the Unix epoch (0 before the first stamped write).
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Counts a child created or deleted under `parent`, at `revision`.
    fn child_changed(&mut self, parent: &str, revision: u64) {
        if let Some(node) = self.nodes.get_mut(parent) {
            node.meta.child_version = node.meta.child_version.wrapping_add(1);
            node.meta.child_revision = revision;
        }
    }

    pub(crate) fn require_session(&self, id: SessionId) -> Result<&Session, CoreError> {
        self.sessions.get(&id).ok_or(CoreError::SessionNotFound(id))
    }

    /// Removes a node that the caller has validated exists, keeping the
    /// owner's node set and any queue consistent, and grants the lock to
    /// the next in line when the head goes.
    pub(crate) fn remove_node(&mut self, path: &str, revision: u64, effects: &mut Effects) {
        let Some(node) = self.nodes.remove(path) else {
            return;
        };
        if let Some(owner) = node.ephemeral_owner {
            if let Some(session) = self.sessions.get_mut(&owner) {
                session.nodes.remove(path);
            }
        }
        if let Some((queue_path, seq)) = queue::parse_node_path(path) {
            if let Some(q) = self.queues.get_mut(queue_path) {
                let granted = match SharedKind::of_queue(queue_path) {
                    None => q.remove(seq, revision).into_iter().collect(),
                    Some(kind) => shared::remove(kind, queue_path, q, seq, revision, &self.nodes),
                };
                for next in granted {
                    effects.granted.push(queue::node_path(queue_path, next));
                }
                if q.is_empty() {
                    self.queues.remove(queue_path);
                    self.lock_delays.remove(queue_path);
                }
            }
        }
        self.child_changed(parent_of(path), revision);
        effects.deleted.push(DeletedNode {
            path: path.to_string(),
            owner: node.ephemeral_owner,
        });
    }

    /// Inserts a new node at `path` (the caller checked it is absent).
    pub(crate) fn insert_node(
        &mut self,
        path: String,
        data: &[u8],
        owner: Option<SessionId>,
        revision: u64,
        effects: &mut Effects,
    ) {
        if let Some(session) = owner.and_then(|id| self.sessions.get_mut(&id)) {
            session.nodes.insert(path.as_str().into());
        }
        effects.written.push(path.clone());
        self.child_changed(parent_of(&path), revision);
        let meta = NodeMeta {
            created_ms: self.clock_ms,
            modified_ms: self.clock_ms,
            child_revision: revision,
            child_version: 0,
            acl_version: 0,
        };
        self.nodes.insert(
            path.into_boxed_str(),
            Node {
                data: data.into(),
                version: 1,
                create_revision: revision,
                mod_revision: revision,
                ephemeral_owner: owner,
                next_child_sequence: 0,
                meta,
                acl: None,
            },
        );
    }
}
