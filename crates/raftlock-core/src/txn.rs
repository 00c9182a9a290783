//! Guarded writes and transactions: node writes that commit only if a
//! condition still holds when their log entry is applied.
//!
//! A guarded write names a lock and a fencing token and commits only while
//! that token is the lock's current holder. The check and the write are one
//! command, so nothing can be granted in between: this closes the gap a
//! separate `fencing_check` read leaves (docs/api.md, Nodes).
//!
//! A transaction is ZooKeeper's `multi` and etcd's `Txn`: compares, then
//! the `success` operations if every compare holds, else the `failure`
//! ones. The operations of the chosen branch all apply or none does: an
//! operation that fails (a version mismatch, a missing node) rolls back
//! the ones before it, through a journal of each touched node's original
//! value, so the state is left as it was (the contract of every command,
//! `state.rs`) without cloning the whole tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::{Effects, Response};
use crate::error::CoreError;
use crate::path::{ancestors, parent_of, validate_lock_name, validate_node_path};
use crate::state::{Outcome, StateMachine};
use crate::tree::check_writable;
use crate::types::{Node, SessionId};

/// "This fencing token is the lock's current holder."
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderGuard {
    /// The lock's name (`orders/42`).
    pub lock: String,
    /// The token the writer was granted.
    pub fencing_token: u64,
}

/// One condition of a transaction. Equality only, as ZooKeeper's `check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Compare {
    /// The node's version is this (0: the node does not exist).
    Version {
        /// Canonical node path.
        path: String,
        /// Expected version.
        version: u64,
    },
    /// The node exists and its data is exactly this.
    Value {
        /// Canonical node path.
        path: String,
        /// Expected data.
        value: Vec<u8>,
    },
    /// The lock's current holder has this fencing token.
    Holder(HolderGuard),
}

/// One write of a transaction or guarded write: what `Command::Put` and
/// `Command::Delete` do, with the same fields and checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOp {
    /// As `Command::Put`.
    Put {
        /// Canonical node path (the prefix, for a sequential create).
        path: String,
        /// The node's new data.
        data: Vec<u8>,
        /// Owner of a created node, making it ephemeral.
        session: Option<SessionId>,
        /// Sequential create.
        sequential: bool,
        /// Compare-and-set: 0 means "must not exist".
        expected_version: Option<u64>,
    },
    /// As `Command::Delete`.
    Delete {
        /// Canonical node path.
        path: String,
        /// Compare-and-delete.
        expected_version: Option<u64>,
    },
}

impl TxnOp {
    /// The path the operation names.
    pub fn path(&self) -> &str {
        match self {
            TxnOp::Put { path, .. } | TxnOp::Delete { path, .. } => path,
        }
    }
}

impl StateMachine {
    pub(crate) fn guarded_write(
        &mut self,
        guard: &HolderGuard,
        op: &TxnOp,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        validate_lock_name(&guard.lock)?;
        let (valid, current) = self.fencing_check(&guard.lock, guard.fencing_token);
        if !valid {
            return Err(CoreError::NotHolder {
                lock: guard.lock.clone(),
                fencing_token: guard.fencing_token,
                current,
            });
        }
        // One operation: `put`/`delete` validate before they change
        // anything, so no journal is needed.
        self.apply_op(op, revision, effects)
    }

    pub(crate) fn txn(
        &mut self,
        compare: &[Compare],
        success: &[TxnOp],
        failure: &[TxnOp],
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        // Malformed input is refused whichever branch would run, so a
        // request's validity does not depend on the state.
        for c in compare {
            match c {
                Compare::Version { path, .. } | Compare::Value { path, .. } => {
                    validate_node_path(path)?
                }
                Compare::Holder(guard) => validate_lock_name(&guard.lock)?,
            }
        }
        for op in success.iter().chain(failure) {
            check_writable(op.path())?;
        }
        let succeeded = compare.iter().all(|c| self.compare_holds(c));
        let ops = if succeeded { success } else { failure };
        let mut journal = Journal::default();
        let mut responses = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            // The node, its ancestors (created if missing), and each one's
            // parent, the root included, which `ancestors` leaves out: a
            // create advances its parent's child version.
            journal.save(self, op.path());
            journal.save(self, parent_of(op.path()));
            for ancestor in ancestors(op.path()) {
                journal.save(self, ancestor);
                journal.save(self, parent_of(ancestor));
            }
            match self.apply_op(op, revision, effects) {
                Ok(outcome) => {
                    if let Response::Put { path, .. } = &outcome.response {
                        // A sequential create's name is known only now;
                        // `put` picked a path that was free, and a path
                        // an earlier operation touched keeps its first
                        // (pre-transaction) value in the journal.
                        journal.record(path, None);
                    }
                    responses.push(outcome.response);
                }
                Err(error) => {
                    journal.undo(self);
                    return Err(CoreError::TxnOpFailed {
                        index,
                        error: Box::new(error),
                    });
                }
            }
        }
        let response = Response::Txn {
            succeeded,
            responses,
        };
        // A branch without operations is a read: no new revision.
        Ok(if ops.is_empty() {
            Outcome::unchanged(response)
        } else {
            Outcome::changed(response)
        })
    }

    fn apply_op(
        &mut self,
        op: &TxnOp,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        match op {
            TxnOp::Put {
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
                revision,
                effects,
            ),
            TxnOp::Delete {
                path,
                expected_version,
            } => self.delete(path, *expected_version, revision, effects),
        }
    }

    /// Does the compare hold in the current state?
    pub(crate) fn compare_holds(&self, compare: &Compare) -> bool {
        match compare {
            Compare::Version { path, version } => {
                self.nodes.get(path.as_str()).map_or(0, |n| n.version) == *version
            }
            Compare::Value { path, value } => self
                .nodes
                .get(path.as_str())
                .is_some_and(|n| *n.data == **value),
            Compare::Holder(guard) => self.fencing_check(&guard.lock, guard.fencing_token).0,
        }
    }
}

/// Each node a transaction touched, with its value before the
/// transaction (`None`: absent). Generic writes change only nodes and the
/// owning sessions' node sets (queues live under reserved prefixes they
/// may not write), so restoring these undoes them.
#[derive(Default)]
pub(crate) struct Journal {
    before: BTreeMap<String, Option<Node>>,
}

impl Journal {
    /// Remembers `path`'s current value, unless already remembered.
    pub(crate) fn save(&mut self, sm: &StateMachine, path: &str) {
        if !self.before.contains_key(path) {
            self.record(path, sm.nodes.get(path).cloned());
        }
    }

    pub(crate) fn record(&mut self, path: &str, node: Option<Node>) {
        self.before.entry(path.to_string()).or_insert(node);
    }

    /// Puts every remembered node back, with its owner's node set.
    pub(crate) fn undo(self, sm: &mut StateMachine) {
        for (path, before) in self.before {
            if let Some(now) = sm.nodes.remove(path.as_str()) {
                if let Some(session) = now.ephemeral_owner.and_then(|o| sm.sessions.get_mut(&o)) {
                    session.nodes.remove(&path);
                }
            }
            if let Some(node) = before {
                if let Some(session) = node.ephemeral_owner.and_then(|o| sm.sessions.get_mut(&o)) {
                    session.nodes.insert(path.as_str().into());
                }
                sm.nodes.insert(path.into_boxed_str(), node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::types::QueueKind;

    fn put(path: &str, data: &[u8]) -> TxnOp {
        TxnOp::Put {
            path: path.into(),
            data: data.to_vec(),
            session: None,
            sequential: false,
            expected_version: None,
        }
    }

    /// The first session holds `orders/42`; returns its token.
    fn held() -> (StateMachine, u64) {
        let mut sm = StateMachine::new();
        for id in [SessionId(1), SessionId(2)] {
            let open = Command::OpenSession {
                id,
                owner: "w".into(),
                ttl_ms: 5_000,
            };
            assert!(sm.apply(&open).result.is_ok());
        }
        let acquire = |session| Command::Acquire {
            kind: QueueKind::Lock,
            name: "orders/42".into(),
            session,
            data: vec![],
            wait: true,
        };
        let Ok(Response::Acquired(a)) = sm.apply(&acquire(SessionId(1))).result else {
            panic!("acquire failed");
        };
        assert!(sm.apply(&acquire(SessionId(2))).result.is_ok());
        (sm, a.fencing_token)
    }

    #[test]
    fn a_guarded_write_commits_only_for_the_current_holder() {
        let (mut sm, token) = held();
        let guarded = |fencing_token| Command::GuardedWrite {
            guard: HolderGuard {
                lock: "orders/42".into(),
                fencing_token,
            },
            op: put("/ledger", b"x"),
        };
        assert!(sm.apply(&guarded(token)).result.is_ok());
        // The holder loses the lock; its token is stale from then on.
        let release = Command::Release {
            kind: QueueKind::Lock,
            name: "orders/42".into(),
            session: SessionId(1),
            withdraw: None,
        };
        assert!(sm.apply(&release).result.is_ok());
        let before = sm.clone();
        let applied = sm.apply(&guarded(token));
        assert!(
            matches!(
                applied.result,
                Err(CoreError::NotHolder { current: Some(c), .. }) if c > token
            ),
            "{:?}",
            applied.result
        );
        assert_eq!(sm, before);
    }

    #[test]
    fn a_failing_operation_rolls_back_the_ones_before_it() {
        let (mut sm, token) = held();
        assert!(sm
            .apply(&Command::Put {
                path: "/a".into(),
                data: b"1".to_vec(),
                session: Some(SessionId(1)),
                sequential: false,
                expected_version: None,
            })
            .result
            .is_ok());
        let before = sm.clone();
        let txn = Command::Txn {
            compare: vec![Compare::Holder(HolderGuard {
                lock: "orders/42".into(),
                fencing_token: token,
            })],
            success: vec![
                put("/a", b"2"),
                put("/b/c/d", b"new"),
                TxnOp::Delete {
                    path: "/a".into(),
                    expected_version: None,
                },
                TxnOp::Put {
                    path: "/b/c/q".into(),
                    data: vec![],
                    session: Some(SessionId(2)),
                    sequential: true,
                    expected_version: None,
                },
                TxnOp::Delete {
                    path: "/missing".into(),
                    expected_version: None,
                },
            ],
            failure: vec![],
        };
        let applied = sm.apply(&txn);
        assert!(
            matches!(applied.result, Err(CoreError::TxnOpFailed { index: 4, .. })),
            "{:?}",
            applied.result
        );
        assert_eq!(sm, before);
        assert_eq!(sm.check_invariants(), Ok(()));
    }

    #[test]
    fn compares_choose_the_branch() {
        let (mut sm, token) = held();
        let txn = |version| Command::Txn {
            compare: vec![
                Compare::Version {
                    path: "/cfg".into(),
                    version,
                },
                Compare::Holder(HolderGuard {
                    lock: "orders/42".into(),
                    fencing_token: token,
                }),
            ],
            success: vec![put("/cfg", b"then")],
            failure: vec![],
        };
        let applied = sm.apply(&txn(0));
        let Ok(Response::Txn {
            succeeded: true,
            responses,
        }) = applied.result
        else {
            panic!("{:?}", applied.result);
        };
        assert_eq!(responses.len(), 1);
        // Version 1 now: compare 0 fails, the empty failure branch runs
        // and nothing changes, not even the revision.
        let revision = sm.revision();
        let applied = sm.apply(&txn(0));
        assert_eq!(
            applied.result,
            Ok(Response::Txn {
                succeeded: false,
                responses: vec![]
            })
        );
        assert_eq!(sm.revision(), revision);
        let value = Compare::Value {
            path: "/cfg".into(),
            value: b"then".to_vec(),
        };
        assert!(sm.compare_holds(&value));
    }
}
