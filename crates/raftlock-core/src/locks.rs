//! The lock and election recipe: acquire, release, proclaim.
//!
//! acquire = an ephemeral sequential node in the queue; the lowest
//! sequence holds. Its create revision is the fencing token, so tokens of
//! one lock strictly increase from grant to grant.

use crate::command::{Acquisition, Effects, Response};
use crate::error::CoreError;
use crate::path::validate_lock_name;
use crate::queue::{node_path, LockQueue};
use crate::state::{Outcome, StateMachine};
use crate::types::{QueueKind, SessionId};

/// Which session's node to delete from which queue.
pub(crate) struct Release<'a> {
    /// The primitive's name, for the error when the session is not queued.
    pub(crate) name: &'a str,
    pub(crate) queue_path: String,
    pub(crate) session: SessionId,
    pub(crate) withdraw: Option<&'a str>,
}

impl StateMachine {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire(
        &mut self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        data: &[u8],
        (wait, lock_delay_ms): (bool, Option<u64>),
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        self.require_session(session)?;
        validate_lock_name(name)?;
        let queue_path = kind.queue_path(name);
        self.check_lock_delay(name, &queue_path, lock_delay_ms)?;
        self.refuse_held_off(&queue_path, session)?;
        if let Some(queue) = self.queues.get(queue_path.as_str()) {
            if let Some(seq) = queue.sequence_of(session) {
                // Idempotent: a retried acquire finds its own node.
                let node = node_path(&queue_path, seq);
                let fencing_token = self
                    .nodes
                    .get(node.as_str())
                    .map_or(0, |n| n.create_revision);
                let held = queue.head().is_some_and(|(h, _)| h == seq);
                return Ok(Outcome::unchanged(Response::Acquired(Acquisition {
                    node,
                    fencing_token,
                    held,
                    created: false,
                })));
            }
            if let Some((_, head)) = queue.head().filter(|_| !wait) {
                return Err(CoreError::LockHeld {
                    lock: name.to_string(),
                    holder: head.session,
                });
            }
        }
        if !self.queues.contains_key(queue_path.as_str()) {
            self.set_lock_delay(&queue_path, lock_delay_ms);
        }
        let (seq, held) = self
            .queues
            .entry(queue_path.as_str().into())
            .or_default()
            .push(session, revision);
        let node = node_path(&queue_path, seq);
        self.insert_node(node.clone(), data, Some(session), revision, effects);
        if held {
            effects.granted.push(node.clone());
        }
        Ok(Outcome::changed(Response::Acquired(Acquisition {
            node,
            fencing_token: revision,
            held,
            created: true,
        })))
    }

    pub(crate) fn release(
        &mut self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        withdraw: Option<&str>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        self.require_session(session)?;
        validate_lock_name(name)?;
        let queue_path = kind.queue_path(name);
        self.refuse_held_off(&queue_path, session)?;
        let release = Release {
            name,
            queue_path,
            session,
            withdraw,
        };
        let holds = |q: &LockQueue, seq| q.head().is_some_and(|(h, _)| h == seq);
        self.remove_queued(release, holds, revision, effects)
    }

    /// Deletes the session's node in a lock's or a shared primitive's
    /// queue; `holds` says whether the node with a sequence holds.
    /// `withdraw` names the one node to delete, and only while it waits.
    pub(crate) fn remove_queued(
        &mut self,
        release: Release<'_>,
        holds: impl FnOnce(&LockQueue, u64) -> bool,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let Release {
            name,
            queue_path,
            session,
            withdraw,
        } = release;
        let queue = self.queues.get(queue_path.as_str());
        let Some(seq) = queue.and_then(|q| q.sequence_of(session)) else {
            return Err(match queue {
                Some(_) => CoreError::NotOwner {
                    lock: name.to_string(),
                },
                None => CoreError::NotFound(queue_path),
            });
        };
        let node = node_path(&queue_path, seq);
        let was_holder = queue.is_some_and(|q| holds(q, seq));
        if let Some(expected) = withdraw {
            if expected != node {
                return Err(CoreError::NotFound(expected.to_string()));
            }
            if was_holder {
                return Err(CoreError::AlreadyGranted { node });
            }
        }
        self.remove_node(&node, revision, effects);
        Ok(Outcome::changed(Response::Released { node, was_holder }))
    }

    pub(crate) fn proclaim(
        &mut self,
        name: &str,
        session: SessionId,
        value: &[u8],
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        self.require_session(session)?;
        validate_lock_name(name)?;
        let queue_path = QueueKind::Election.queue_path(name);
        let not_leader = || CoreError::NotLeader {
            election: name.to_string(),
        };
        let (seq, head) = self
            .queues
            .get(queue_path.as_str())
            .and_then(|q| q.head())
            .ok_or_else(not_leader)?;
        if head.session != session {
            return Err(not_leader());
        }
        let path = node_path(&queue_path, seq);
        let now = self.clock_ms;
        let node = self.nodes.get_mut(path.as_str()).ok_or_else(not_leader)?;
        node.data = value.into();
        node.version += 1;
        node.mod_revision = revision;
        node.meta.modified_ms = now;
        effects.written.push(path.clone());
        Ok(Outcome::changed(Response::Proclaimed { node: path }))
    }
}
