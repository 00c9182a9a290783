//! Structural invariants of the state. Checked after every step by the
//! property tests and on every snapshot restore.

use crate::path::{ancestors, is_reserved};
use crate::queue::{node_path, parse_node_path, LockQueue};
use crate::shared::{expected_grants, limit_of, RwMode, SharedKind};
use crate::state::StateMachine;

impl StateMachine {
    /// Returns the first broken invariant, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        if !self.nodes.contains_key("/") {
            return Err("the root node is missing".into());
        }
        for (path, node) in &self.nodes {
            if node.create_revision > node.mod_revision || node.mod_revision > self.revision {
                return Err(format!("{path} has revisions from the future"));
            }
            if let Some(owner) = node.ephemeral_owner {
                let owned = self
                    .sessions
                    .get(&owner)
                    .is_some_and(|s| s.nodes.contains(path));
                if !owned {
                    return Err(format!("{path} outlived or is unknown to session {owner}"));
                }
            }
            if is_reserved(path) {
                let queued = parse_node_path(path).and_then(|(q, seq)| {
                    let entry = self.queues.get(q)?.get(seq)?;
                    // A held-off node has no owner (`lock_delay.rs`).
                    Some(
                        Some(entry.session) == node.ephemeral_owner
                            || (node.ephemeral_owner.is_none() && self.valid_held_off(path)),
                    )
                });
                if queued != Some(true) {
                    return Err(format!("{path} is in a reserved prefix but not queued"));
                }
            } else if let Some(missing) = ancestors(path).find(|a| !self.nodes.contains_key(*a)) {
                return Err(format!("{path} has no parent {missing}"));
            }
        }
        for (id, session) in &self.sessions {
            for path in session.nodes.iter() {
                let ok = self
                    .nodes
                    .get(path)
                    .is_some_and(|n| n.ephemeral_owner == Some(*id));
                if !ok {
                    return Err(format!("session {id} lists {path}, which it does not own"));
                }
            }
        }
        self.check_lock_delays()?;
        self.kv
            .check(self.revision, |id| self.sessions.contains_key(&id))?;
        for (queue_path, queue) in &self.queues {
            if queue.is_empty() {
                return Err(format!("queue {queue_path} is empty but kept"));
            }
            if let Err(broken) = queue.check() {
                return Err(format!("queue {queue_path} {broken}"));
            }
            let expected: Vec<bool> = match SharedKind::of_queue(queue_path) {
                None => (0..queue.len()).map(|i| i == 0).collect(),
                Some(kind) => {
                    self.check_shared_data(kind, queue_path, queue)?;
                    expected_grants(kind, queue_path, queue, &self.nodes)
                }
            };
            for ((seq, entry), holds) in queue.iter().zip(expected) {
                if holds != entry.granted_revision.is_some() {
                    return Err(format!(
                        "queue {queue_path}: entry {seq} is granted {} but its rule says {holds}",
                        entry.granted_revision.is_some()
                    ));
                }
                let node = self.nodes.get(node_path(queue_path, seq).as_str());
                if node.map(|n| n.create_revision) != Some(seq) {
                    return Err(format!(
                        "queue {queue_path} entry {seq} has no node of that revision"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every entry of a shared queue records what it wants: a mode, or
    /// the one limit the semaphore's entries agree on.
    fn check_shared_data(
        &self,
        kind: SharedKind,
        queue_path: &str,
        queue: &LockQueue,
    ) -> Result<(), String> {
        let limit = limit_of(&self.nodes, queue_path, queue);
        for (seq, _) in queue.iter() {
            let data = self
                .nodes
                .get(node_path(queue_path, seq).as_str())
                .map(|n| &n.data[..])
                .unwrap_or_default();
            let ok = match kind {
                SharedKind::RwLock => RwMode::from_data(data).is_some(),
                SharedKind::Semaphore => {
                    limit.is_some_and(|l| l > 0 && data == l.to_string().as_bytes())
                }
            };
            if !ok {
                return Err(format!("queue {queue_path} entry {seq} has bad data"));
            }
        }
        Ok(())
    }
}
