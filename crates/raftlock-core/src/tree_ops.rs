//! Strict tree operations: ZooKeeper's create, setData, delete and check
//! semantics, alone or as an all-or-nothing list (ZooKeeper's `multi`).
//!
//! They differ from the generic `Put`/`Delete` where ZooKeeper does: a
//! create needs its parent to exist (no missing ancestors are made) and
//! fails if the node exists; a sequential create appends the parent's
//! child version (`cversion`: children created or deleted under it so
//! far) as ten digits directly to the name (`/q/item-` names
//! `/q/item-0000000003`, `/q/x` names `/q/x0000000003`); a set never
//! creates. Each operation's answer carries the node's stat as that
//! operation left it, as ZooKeeper answers. A failing operation rolls
//! back the ones before it (the journal of `txn.rs`) and is reported with
//! its index, as `TxnOpFailed`, so a client learns which one failed.

use serde::{Deserialize, Serialize};

use crate::command::{Effects, Response};
use crate::error::CoreError;
use crate::path::{parent_of, validate_node_path, SEQUENCE_DIGITS};
use crate::state::{Outcome, StateMachine};
use crate::tree::{check_version, check_writable};
use crate::txn::Journal;
use crate::types::{AclEntry, Node, NodeAcl, NodeMeta, SessionId};

/// One strict operation. Versions are raftlock's (1 on create).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeOp {
    /// Creates a node whose parent exists and which does not.
    Create {
        /// Canonical path; for a sequential create, the prefix the
        /// ten-digit counter is appended to.
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Owner, making it ephemeral.
        session: Option<SessionId>,
        /// Append the parent's counter to the name.
        sequential: bool,
    },
    /// Replaces an existing node's data.
    SetData {
        /// Canonical path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// Only at this version.
        expected_version: Option<u64>,
    },
    /// Deletes a node without children.
    Delete {
        /// Canonical path.
        path: String,
        /// Only at this version.
        expected_version: Option<u64>,
    },
    /// Fails unless the node exists (at this version, if given).
    Check {
        /// Canonical path.
        path: String,
        /// The version it must have.
        expected_version: Option<u64>,
    },
    /// Counts an ACL change and leaves the stored ACL as it is: what
    /// `setACL` was before ACLs were stored, kept so the log entries it
    /// wrote replay as they did. Appended after `Check`, so older logs
    /// still decode. The door sends `ReplaceAcl` now.
    SetAcl {
        /// Canonical path.
        path: String,
        /// Only at this ACL version (ZooKeeper's `aversion`, from 0).
        expected_acl_version: Option<u32>,
    },
    /// `Create` that also stores the node's ACL (ZooKeeper's create with
    /// an ACL other than the open one; `Create` stores the open ACL).
    /// Appended last, so the log entries written before ACLs were stored
    /// decode as they did.
    CreateWithAcl {
        /// Canonical path; for a sequential create, the prefix.
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Owner, making it ephemeral.
        session: Option<SessionId>,
        /// Append the parent's counter to the name.
        sequential: bool,
        /// The ACL, validated by the door; not empty.
        acl: Vec<AclEntry>,
    },
    /// Replaces a node's ACL and counts the change (ZooKeeper's
    /// `setACL`). Appended last, as `CreateWithAcl`.
    ReplaceAcl {
        /// Canonical path.
        path: String,
        /// Only at this ACL version (ZooKeeper's `aversion`, from 0).
        expected_acl_version: Option<u32>,
        /// The new ACL, validated by the door; not empty.
        acl: Vec<AclEntry>,
    },
}

impl TreeOp {
    /// The path the operation names (the prefix, for a sequential create).
    pub fn path(&self) -> &str {
        match self {
            TreeOp::Create { path, .. }
            | TreeOp::SetData { path, .. }
            | TreeOp::Delete { path, .. }
            | TreeOp::Check { path, .. }
            | TreeOp::SetAcl { path, .. }
            | TreeOp::CreateWithAcl { path, .. }
            | TreeOp::ReplaceAcl { path, .. } => path,
        }
    }
}

/// A node's fields as a strict operation leaves it: what ZooKeeper's
/// `Stat` is built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStat {
    /// The revision that created it.
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// 1 on create, +1 per change.
    pub version: u64,
    /// Bytes of data.
    pub data_len: u64,
    /// Immediate children.
    pub num_children: u64,
    /// The owning session, if ephemeral.
    pub ephemeral_owner: Option<SessionId>,
    /// Times and child/ACL counters.
    pub meta: NodeMeta,
}

/// The answer to one strict operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeOpResult {
    /// Created at `path` (with its counter, if sequential).
    Created {
        /// The node's full path.
        path: String,
        /// Its stat as this operation left it (always there; an `Option`
        /// for the encoding older members answer with).
        stat: Option<NodeStat>,
    },
    /// The data was replaced.
    Set {
        /// Its stat as this operation left it (always there).
        stat: Option<NodeStat>,
    },
    /// Deleted.
    Deleted,
    /// The check held.
    Checked,
    /// The ACL version was counted, and the ACL replaced if the op was
    /// `ReplaceAcl` (appended last, as `TreeOp::SetAcl`).
    AclSet {
        /// Its stat as this operation left it (always there).
        stat: Option<NodeStat>,
    },
}

impl StateMachine {
    pub(crate) fn tree_ops(
        &mut self,
        ops: &[TreeOp],
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let mut journal = Journal::default();
        let mut done = Vec::with_capacity(ops.len());
        let mut changed = false;
        for (index, op) in ops.iter().enumerate() {
            journal.save(self, op.path());
            journal.save(self, parent_of(op.path()));
            match self.tree_op(op, revision, effects) {
                Ok(result) => {
                    if let Some(path) = &result {
                        // A sequential create's name is known only now.
                        journal.record(path, None);
                    }
                    changed |= !matches!(op, TreeOp::Check { .. });
                    // The stat as this operation left it, as ZooKeeper
                    // answers each operation of a multi.
                    done.push(self.answer(op, result));
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
        let results = done;
        let response = Response::TreeOps { results };
        Ok(if changed {
            Outcome::changed(response)
        } else {
            Outcome::unchanged(response)
        })
    }

    /// The answer to `op`, which created `created` if it was a create.
    fn answer(&self, op: &TreeOp, created: Option<String>) -> TreeOpResult {
        match (op, created) {
            (_, Some(path)) => TreeOpResult::Created {
                stat: self.stat(&path),
                path,
            },
            (TreeOp::SetData { path, .. }, None) => TreeOpResult::Set {
                stat: self.stat(path),
            },
            (TreeOp::SetAcl { path, .. } | TreeOp::ReplaceAcl { path, .. }, None) => {
                TreeOpResult::AclSet {
                    stat: self.stat(path),
                }
            }
            (TreeOp::Delete { .. }, None) => TreeOpResult::Deleted,
            _ => TreeOpResult::Checked,
        }
    }

    /// Applies one operation; the created path for a create.
    fn tree_op(
        &mut self,
        op: &TreeOp,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Option<String>, CoreError> {
        match op {
            TreeOp::Create {
                path,
                data,
                session,
                sequential,
            } => self.strict_create(path, data, *session, *sequential, &[], revision, effects),
            TreeOp::CreateWithAcl {
                path,
                data,
                session,
                sequential,
                acl,
            } => {
                if acl.is_empty() {
                    return Err(CoreError::Invalid("an ACL has at least one entry".into()));
                }
                self.strict_create(path, data, *session, *sequential, acl, revision, effects)
            }
            TreeOp::SetData {
                path,
                data,
                expected_version,
            } => {
                check_writable(path)?;
                let now = self.clock_ms;
                let node = self
                    .nodes
                    .get_mut(path.as_str())
                    .ok_or_else(|| CoreError::NotFound(path.clone()))?;
                check_version(path, *expected_version, node.version)?;
                node.data = data.as_slice().into();
                node.version += 1;
                node.mod_revision = revision;
                node.meta.modified_ms = now;
                effects.written.push(path.clone());
                Ok(None)
            }
            TreeOp::SetAcl {
                path,
                expected_acl_version,
            } => {
                self.count_acl_change(path, *expected_acl_version)?;
                Ok(None)
            }
            TreeOp::ReplaceAcl {
                path,
                expected_acl_version,
                acl,
            } => {
                if acl.is_empty() {
                    return Err(CoreError::Invalid("an ACL has at least one entry".into()));
                }
                let node = self.count_acl_change(path, *expected_acl_version)?;
                node.acl = NodeAcl::stored(acl);
                Ok(None)
            }
            TreeOp::Delete {
                path,
                expected_version,
            } => {
                self.delete(path, *expected_version, revision, effects)?;
                Ok(None)
            }
            TreeOp::Check {
                path,
                expected_version,
            } => {
                validate_node_path(path)?;
                let node = self
                    .nodes
                    .get(path.as_str())
                    .ok_or_else(|| CoreError::NotFound(path.clone()))?;
                check_version(path, *expected_version, node.version)?;
                Ok(None)
            }
        }
    }

    /// A strict create (`Create`, or `CreateWithAcl` with its ACL; an
    /// empty `acl` is the open one); the created path.
    #[allow(clippy::too_many_arguments)]
    fn strict_create(
        &mut self,
        path: &str,
        data: &[u8],
        session: Option<SessionId>,
        sequential: bool,
        acl: &[AclEntry],
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Option<String>, CoreError> {
        if let Some(id) = session {
            self.require_session(id)?;
        }
        let parent = parent_of(path);
        let (path, next) = if sequential {
            // The prefix may end in `/` (`/q/` names `/q/0000000000`).
            validate_node_path(parent)?;
            let (path, seq) = self.next_strict_sequential(path)?;
            (path, Some(seq))
        } else {
            (path.to_string(), None)
        };
        // ZooKeeper's order: a missing parent first, then the
        // name, then an existing node.
        if !self.nodes.contains_key(parent) {
            return Err(CoreError::NotFound(parent.to_string()));
        }
        check_writable(&path)?;
        if let Some(node) = self.nodes.get(path.as_str()) {
            return Err(CoreError::VersionMismatch {
                path,
                expected: 0,
                actual: node.version,
            });
        }
        let Some(parent_node) = self.nodes.get_mut(parent) else {
            return Err(CoreError::NotFound(parent.to_string()));
        };
        if parent_node.ephemeral_owner.is_some() {
            return Err(CoreError::EphemeralParent(parent.to_string()));
        }
        if let Some(seq) = next {
            // The generic (HTTP) counter continues above it, so a
            // later `Put` never names a child below this one.
            parent_node.next_child_sequence =
                parent_node.next_child_sequence.max(seq.saturating_add(1));
        }
        self.insert_node(path.clone(), data, session, revision, effects);
        if !acl.is_empty() {
            if let Some(node) = self.nodes.get_mut(path.as_str()) {
                node.acl = NodeAcl::stored(acl);
            }
        }
        Ok(Some(path))
    }

    /// Checks `path`'s ACL version and counts one change; the node.
    fn count_acl_change(
        &mut self,
        path: &str,
        expected: Option<u32>,
    ) -> Result<&mut Node, CoreError> {
        check_writable(path)?;
        let node = self
            .nodes
            .get_mut(path)
            .ok_or_else(|| CoreError::NotFound(path.to_string()))?;
        let actual = node.meta.acl_version;
        if let Some(expected) = expected {
            if expected != actual {
                return Err(CoreError::VersionMismatch {
                    path: path.to_string(),
                    expected: u64::from(expected),
                    actual: u64::from(actual),
                });
            }
        }
        node.meta.acl_version = actual.wrapping_add(1);
        Ok(node)
    }

    /// `prefix` and the parent's child version as ten digits (as
    /// ZooKeeper names it), and the number used. A name a plain create
    /// already took is skipped (ZooKeeper would answer NODEEXISTS).
    fn next_strict_sequential(&self, prefix: &str) -> Result<(String, u64), CoreError> {
        let parent = parent_of(prefix);
        let Some(mut seq) = self
            .nodes
            .get(parent)
            .map(|p| u64::from(p.meta.child_version))
        else {
            return Err(CoreError::NotFound(parent.to_string()));
        };
        loop {
            let candidate = format!("{prefix}{seq:0width$}", width = SEQUENCE_DIGITS);
            let next = seq
                .checked_add(1)
                .ok_or_else(|| CoreError::SequenceExhausted(parent.to_string()))?;
            if !self.nodes.contains_key(candidate.as_str()) {
                return Ok((candidate, seq));
            }
            seq = next;
        }
    }

    /// The stat of the node at `path`, if it exists.
    pub fn stat(&self, path: &str) -> Option<NodeStat> {
        let node = self.nodes.get(path)?;
        let num_children = self.children(path).map_or(0, |c| c.len()) as u64;
        Some(NodeStat {
            create_revision: node.create_revision,
            mod_revision: node.mod_revision,
            version: node.version,
            data_len: node.data.len() as u64,
            num_children,
            ephemeral_owner: node.ephemeral_owner,
            meta: node.meta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn create(path: &str, sequential: bool) -> TreeOp {
        TreeOp::Create {
            path: path.into(),
            data: b"d".to_vec(),
            session: None,
            sequential,
        }
    }

    fn run(sm: &mut StateMachine, ops: Vec<TreeOp>) -> Result<Vec<TreeOpResult>, CoreError> {
        match sm.apply(&Command::TreeOps { ops }).result? {
            Response::TreeOps { results } => Ok(results),
            other => panic!("{other:?}"),
        }
    }

    fn failed_at(result: Result<Vec<TreeOpResult>, CoreError>) -> (usize, CoreError) {
        match result {
            Err(CoreError::TxnOpFailed { index, error }) => (index, *error),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_create_needs_its_parent_and_a_free_name() {
        let mut sm = StateMachine::new();
        let (index, error) = failed_at(run(&mut sm, vec![create("/a/b", false)]));
        assert_eq!((index, error), (0, CoreError::NotFound("/a".into())));
        assert!(sm.node("/a").is_none(), "no ancestor was made");
        let results = run(&mut sm, vec![create("/a", false)]).expect("create");
        let TreeOpResult::Created {
            path,
            stat: Some(stat),
        } = &results[0]
        else {
            panic!("{results:?}");
        };
        assert_eq!((path.as_str(), stat.version, stat.data_len), ("/a", 1, 1));
        assert_eq!(stat.create_revision, sm.revision());
        let (_, error) = failed_at(run(&mut sm, vec![create("/a", false)]));
        assert!(matches!(
            error,
            CoreError::VersionMismatch { expected: 0, .. }
        ));
    }

    #[test]
    fn sequential_names_append_ten_digits_of_the_parents_counter() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/q", false)]).expect("parent");
        let mut names = Vec::new();
        for prefix in ["/q/item-", "/q/x", "/q/"] {
            let results = run(&mut sm, vec![create(prefix, true)]).expect("create");
            let TreeOpResult::Created { path, .. } = &results[0] else {
                panic!("{results:?}");
            };
            names.push(path.clone());
        }
        assert_eq!(
            names,
            ["/q/item-0000000000", "/q/x0000000001", "/q/0000000002"]
        );
    }

    #[test]
    fn ephemeral_nodes_take_no_children() {
        let mut sm = StateMachine::new();
        let id = SessionId(7);
        let open = Command::OpenSession {
            id,
            owner: "t".into(),
            ttl_ms: 5_000,
        };
        assert!(sm.apply(&open).result.is_ok());
        let ephemeral = TreeOp::Create {
            path: "/e".into(),
            data: vec![],
            session: Some(id),
            sequential: false,
        };
        let results = run(&mut sm, vec![ephemeral]).expect("create");
        assert!(matches!(
            &results[0],
            TreeOpResult::Created { stat: Some(s), .. } if s.ephemeral_owner == Some(id)
        ));
        let (_, error) = failed_at(run(&mut sm, vec![create("/e/c", false)]));
        assert_eq!(error, CoreError::EphemeralParent("/e".into()));
        assert!(sm.apply(&Command::CloseSession { id }).result.is_ok());
        assert!(sm.node("/e").is_none());
    }

    #[test]
    fn a_failing_operation_undoes_the_list_and_names_its_index() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/p", false), create("/p/c", false)]).expect("setup");
        let before = sm.clone();
        let ops = vec![
            TreeOp::Check {
                path: "/p/c".into(),
                expected_version: Some(1),
            },
            create("/p/n", true),
            create("/p/new", false),
            TreeOp::Delete {
                path: "/p/c".into(),
                expected_version: None,
            },
            TreeOp::SetData {
                path: "/p/c".into(),
                data: vec![],
                expected_version: None,
            },
        ];
        let (index, error) = failed_at(run(&mut sm, ops));
        assert_eq!((index, error), (4, CoreError::NotFound("/p/c".into())));
        assert_eq!(sm, before);
        assert_eq!(sm.check_invariants(), Ok(()));
        let (index, error) = failed_at(run(
            &mut sm,
            vec![TreeOp::Check {
                path: "/p/c".into(),
                expected_version: Some(5),
            }],
        ));
        assert!(index == 0 && matches!(error, CoreError::VersionMismatch { actual: 1, .. }));
    }

    #[test]
    fn answers_carry_the_stat_after_the_list_and_checks_change_nothing() {
        let mut sm = StateMachine::new();
        let results = run(
            &mut sm,
            vec![
                create("/p", false),
                create("/p/c", false),
                TreeOp::SetData {
                    path: "/p".into(),
                    data: b"xyz".to_vec(),
                    expected_version: Some(1),
                },
            ],
        )
        .expect("list");
        let revision = sm.revision();
        let expected = NodeStat {
            create_revision: revision,
            mod_revision: revision,
            version: 2,
            data_len: 3,
            num_children: 1,
            ephemeral_owner: None,
            meta: NodeMeta {
                child_revision: revision,
                child_version: 1,
                ..NodeMeta::default()
            },
        };
        assert_eq!(
            results[2],
            TreeOpResult::Set {
                stat: Some(expected)
            }
        );
        let check = TreeOp::Check {
            path: "/p".into(),
            expected_version: Some(2),
        };
        assert_eq!(run(&mut sm, vec![check]), Ok(vec![TreeOpResult::Checked]));
        assert_eq!(sm.revision(), revision, "a check is a read");
    }

    fn at(time_ms: u64, ops: Vec<TreeOp>) -> Command {
        Command::Stamped {
            time_ms,
            command: Box::new(Command::TreeOps { ops }),
        }
    }

    #[test]
    fn times_come_from_the_proposer_and_never_go_back() {
        let mut sm = StateMachine::new();
        assert!(sm
            .apply(&at(1_000, vec![create("/p", false)]))
            .result
            .is_ok());
        let set = |data: &[u8]| TreeOp::SetData {
            path: "/p".into(),
            data: data.to_vec(),
            expected_version: None,
        };
        assert!(sm.apply(&at(5_000, vec![set(b"a")])).result.is_ok());
        let meta = sm.stat("/p").expect("p").meta;
        assert_eq!((meta.created_ms, meta.modified_ms), (1_000, 5_000));
        // A proposer whose clock lags writes the latest time seen.
        assert!(sm.apply(&at(2_000, vec![set(b"b")])).result.is_ok());
        assert_eq!(sm.stat("/p").expect("p").meta.modified_ms, 5_000);
        // A failed command leaves the clock where it was.
        let failed = at(9_000, vec![create("/p", false)]);
        assert!(sm.apply(&failed).result.is_err());
        assert_eq!(sm.clock_ms(), 5_000);
        // Only node writes carry a time.
        let wrapped = Command::Stamped {
            time_ms: 9_000,
            command: Box::new(Command::CloseSession { id: SessionId(1) }),
        };
        assert!(matches!(
            sm.apply(&wrapped).result,
            Err(CoreError::Invalid(_))
        ));
    }

    #[test]
    fn child_changes_count_in_the_parent_not_its_data() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/p", false)]).expect("parent");
        let created = sm.revision();
        let before = sm.stat("/p").expect("p");
        assert_eq!(
            (before.meta.child_version, before.meta.child_revision),
            (0, created)
        );
        run(&mut sm, vec![create("/p/a", false), create("/p/b", false)]).expect("children");
        let two = sm.stat("/p").expect("p");
        assert_eq!(
            (two.meta.child_version, two.meta.child_revision),
            (2, sm.revision())
        );
        assert_eq!(
            (two.version, two.mod_revision),
            (1, created),
            "data untouched"
        );
        let delete = TreeOp::Delete {
            path: "/p/a".into(),
            expected_version: None,
        };
        run(&mut sm, vec![delete]).expect("delete");
        let after = sm.stat("/p").expect("p").meta;
        assert_eq!(
            (after.child_version, after.child_revision),
            (3, sm.revision())
        );
        // The next sequential name is the child version.
        let results = run(&mut sm, vec![create("/p/s", true)]).expect("sequential");
        assert!(
            matches!(&results[0], TreeOpResult::Created { path, .. } if path == "/p/s0000000003")
        );
    }

    #[test]
    fn acl_changes_count_with_a_version_check() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/p", false)]).expect("parent");
        let set_acl = |expected| TreeOp::SetAcl {
            path: "/p".into(),
            expected_acl_version: expected,
        };
        let results = run(&mut sm, vec![set_acl(Some(0))]).expect("set");
        assert!(
            matches!(&results[0], TreeOpResult::AclSet { stat: Some(s) } if s.meta.acl_version == 1)
        );
        let (_, error) = failed_at(run(&mut sm, vec![set_acl(Some(0))]));
        assert!(matches!(
            error,
            CoreError::VersionMismatch { actual: 1, .. }
        ));
        run(&mut sm, vec![set_acl(None)]).expect("any version");
        assert_eq!(sm.stat("/p").expect("p").meta.acl_version, 2);
    }

    #[test]
    fn each_answer_shows_the_stat_its_operation_left() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/p", false)]).expect("parent");
        let set = |data: &[u8]| TreeOp::SetData {
            path: "/p".into(),
            data: data.to_vec(),
            expected_version: None,
        };
        let results = run(&mut sm, vec![set(b"one"), set(b"")]).expect("sets");
        let shown: Vec<_> = results
            .iter()
            .map(|r| match r {
                TreeOpResult::Set { stat: Some(s) } => (s.version, s.data_len),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(shown, [(2, 3), (3, 0)]);
    }

    #[test]
    fn reserved_prefixes_stay_read_only() {
        let mut sm = StateMachine::new();
        let (_, error) = failed_at(run(&mut sm, vec![create("/locks", false)]));
        assert!(matches!(error, CoreError::Invalid(_)), "{error:?}");
    }

    fn read_only() -> Vec<AclEntry> {
        vec![AclEntry {
            perms: 1,
            ..AclEntry::open()
        }]
    }

    fn acl_of(sm: &StateMachine, path: &str) -> Vec<AclEntry> {
        NodeAcl::entries_of(sm.node(path).and_then(|n| n.acl.as_deref()))
    }

    #[test]
    fn acls_are_stored_at_create_and_replaced_with_a_version_check() {
        let mut sm = StateMachine::new();
        let with_acl = TreeOp::CreateWithAcl {
            path: "/p".into(),
            data: vec![],
            session: None,
            sequential: false,
            acl: read_only(),
        };
        run(&mut sm, vec![with_acl, create("/p/c", false)]).expect("creates");
        assert_eq!(acl_of(&sm, "/p"), read_only());
        assert_eq!(acl_of(&sm, "/p/c"), vec![AclEntry::open()]);
        assert!(sm.node("/p/c").is_some_and(|n| n.acl.is_none()));
        let replace = |acl: Vec<AclEntry>, expected| TreeOp::ReplaceAcl {
            path: "/p".into(),
            expected_acl_version: expected,
            acl,
        };
        let results = run(&mut sm, vec![replace(vec![AclEntry::open()], Some(0))]).expect("set");
        assert!(
            matches!(&results[0], TreeOpResult::AclSet { stat: Some(s) } if s.meta.acl_version == 1)
        );
        // The open ACL is stored as nothing.
        assert!(sm.node("/p").is_some_and(|n| n.acl.is_none()));
        let (_, error) = failed_at(run(&mut sm, vec![replace(read_only(), Some(0))]));
        assert!(matches!(
            error,
            CoreError::VersionMismatch { actual: 1, .. }
        ));
        // A failing list puts the ACL back with the rest.
        let (index, _) = failed_at(run(
            &mut sm,
            vec![replace(read_only(), None), create("/missing/x", false)],
        ));
        assert_eq!(index, 1);
        assert_eq!(acl_of(&sm, "/p"), vec![AclEntry::open()]);
        assert_eq!(sm.stat("/p").expect("p").meta.acl_version, 1);
        // The older op counts and keeps what is stored.
        run(&mut sm, vec![replace(read_only(), None)]).expect("replace");
        let count = TreeOp::SetAcl {
            path: "/p".into(),
            expected_acl_version: Some(2),
        };
        run(&mut sm, vec![count]).expect("count");
        assert_eq!(acl_of(&sm, "/p"), read_only());
        assert_eq!(sm.stat("/p").expect("p").meta.acl_version, 3);
        let (_, error) = failed_at(run(&mut sm, vec![replace(vec![], None)]));
        assert!(matches!(error, CoreError::Invalid(_)), "{error:?}");
        assert_eq!(sm.check_invariants(), Ok(()));
    }

    #[test]
    fn a_sequential_create_with_an_acl_stores_it_under_the_full_name() {
        let mut sm = StateMachine::new();
        run(&mut sm, vec![create("/q", false)]).expect("parent");
        let op = TreeOp::CreateWithAcl {
            path: "/q/n-".into(),
            data: vec![],
            session: None,
            sequential: true,
            acl: read_only(),
        };
        let results = run(&mut sm, vec![op]).expect("create");
        assert!(
            matches!(&results[0], TreeOpResult::Created { path, .. } if path == "/q/n-0000000000")
        );
        assert_eq!(acl_of(&sm, "/q/n-0000000000"), read_only());
    }

    /// `Command::TreeOps` with a create and an ACL count, as the build
    /// before stored ACLs encoded it (bincode 1): variant 20, two ops,
    /// `Create` (0) of `/a` with data `x`, `SetAcl` (4) at version 0.
    const OLD_TREE_OPS: [u8; 56] = [
        20, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 47, 97, 1, 0, 0,
        0, 0, 0, 0, 0, 120, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 47, 97, 1, 0, 0, 0, 0,
    ];

    #[test]
    fn log_entries_written_before_stored_acls_still_decode_and_apply() {
        let command: Command = bincode::deserialize(&OLD_TREE_OPS).expect("decodes");
        let expected = Command::TreeOps {
            ops: vec![
                TreeOp::Create {
                    path: "/a".into(),
                    data: b"x".to_vec(),
                    session: None,
                    sequential: false,
                },
                TreeOp::SetAcl {
                    path: "/a".into(),
                    expected_acl_version: Some(0),
                },
            ],
        };
        assert_eq!(command, expected);
        assert_eq!(
            bincode::serialize(&expected).expect("encodes"),
            OLD_TREE_OPS,
            "the older variants encode as before"
        );
        let mut sm = StateMachine::new();
        assert!(sm.apply(&command).result.is_ok());
        assert_eq!(sm.stat("/a").expect("a").meta.acl_version, 1);
        assert_eq!(acl_of(&sm, "/a"), vec![AclEntry::open()]);
    }
}
