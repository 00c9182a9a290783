//! Lock-delay, as in Chubby and Consul: after a lock's holder loses its
//! session (it expired, or it was closed), nobody is granted the lock for
//! the lock's delay, so a holder that lost its session but still writes
//! does not overlap its successor. A voluntary release skips the delay.
//!
//! ## Where the delay is set
//! Per lock, fixed by the acquire that creates the lock's queue, as a
//! semaphore's limit is (docs/api.md): the delay protects the resource the
//! lock guards, so it must not depend on which client happens to hold it.
//! A later acquire that names another delay is refused (a misconfigured
//! client is told at once, not left unprotected); one that names none (the
//! older clients, multi-locks) takes the lock's. The setting lives while
//! anyone is queued, or the lock is held off.
//!
//! ## How the hold-off is kept
//! The state machine has no clock (`lib.rs`). When a holder's session
//! ends, its queue node is not deleted but *held off*: it stays at the
//! head of the queue without an owner, so everything that waits on the
//! head (the successor's predecessor wait, a multi-lock, a try-lock)
//! waits on it exactly as on a holder, while the holder queries and
//! fencing checks treat the lock as held by nobody (a guarded write by the
//! old holder is refused). The leader measures the delay from when it
//! applied the session's end and then proposes `EndLockDelays`, which
//! deletes the held-off node and grants the next in line, like a release
//! (one wake-up, no herd). A new leader restores each deadline from when
//! it applied that end itself, or, if it cannot know (it restarted since),
//! a full delay from its election: never shorter, and bounded as session
//! expiry is (docs/design.md).

use crate::command::{Effects, HeldOff, Response};
use crate::error::CoreError;
use crate::path::LOCKS_PREFIX;
use crate::queue::{node_path, parse_node_path};
use crate::state::{Outcome, StateMachine};

/// Longest lock-delay, as Consul's: a minute. A delay is a window in
/// which nobody may hold the lock, so a bound keeps a typo from taking a
/// lock away for hours.
pub const MAX_LOCK_DELAY_MS: u64 = 60_000;

/// True for the queue path of a mutex (`/locks/...`), the only queues with
/// a delay.
pub(crate) fn is_lock_queue(queue_path: &str) -> bool {
    queue_path
        .strip_prefix(LOCKS_PREFIX)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Checks a requested delay: at most [`MAX_LOCK_DELAY_MS`].
pub fn validate_lock_delay(lock_delay_ms: u64) -> Result<(), CoreError> {
    if lock_delay_ms > MAX_LOCK_DELAY_MS {
        return Err(CoreError::Invalid(format!(
            "lock_delay_ms is at most {MAX_LOCK_DELAY_MS}"
        )));
    }
    Ok(())
}

impl StateMachine {
    /// The lock's delay in milliseconds (0: none), by queue path.
    pub(crate) fn delay_of(&self, queue_path: &str) -> u64 {
        self.lock_delays.get(queue_path).copied().unwrap_or(0)
    }

    /// Refuses an acquire that names another delay than the lock's, while
    /// anyone is queued (or it is held off). Changes nothing.
    pub(crate) fn check_lock_delay(
        &self,
        name: &str,
        queue_path: &str,
        requested: Option<u64>,
    ) -> Result<(), CoreError> {
        let Some(requested) = requested else {
            return Ok(());
        };
        validate_lock_delay(requested)?;
        let current = self.delay_of(queue_path);
        if self.queues.contains_key(queue_path) && current != requested {
            return Err(CoreError::Invalid(format!(
                "lock {name} has lock_delay_ms {current}, not {requested} \
                 (fixed by the first acquire while anyone is queued)"
            )));
        }
        Ok(())
    }

    /// Refuses a lock command of a session whose node in the queue is
    /// held off. Only a session id reopened after it ended can meet its
    /// old node (a retried open of an ended session: ids are 128 random
    /// bits); that node is no longer its to take or release.
    pub(crate) fn refuse_held_off(
        &self,
        queue_path: &str,
        session: crate::SessionId,
    ) -> Result<(), CoreError> {
        let seq = self
            .queues
            .get(queue_path)
            .and_then(|q| q.sequence_of(session));
        match seq {
            Some(seq) if self.is_held_off(&node_path(queue_path, seq)) => Err(CoreError::Invalid(
                format!("session {session} lost {queue_path} when it ended; it is held off"),
            )),
            _ => Ok(()),
        }
    }

    /// Records the delay of a queue this acquire just created.
    pub(crate) fn set_lock_delay(&mut self, queue_path: &str, lock_delay_ms: Option<u64>) {
        if let Some(ms) = lock_delay_ms.filter(|ms| *ms > 0) {
            self.lock_delays.insert(queue_path.into(), ms);
        }
    }

    /// True when `path` is a held-off node: the head of a mutex queue,
    /// left without an owner by its session's end.
    pub(crate) fn is_held_off(&self, path: &str) -> bool {
        let Some((queue_path, seq)) = parse_node_path(path) else {
            return false;
        };
        is_lock_queue(queue_path)
            && self
                .nodes
                .get(path)
                .is_some_and(|n| n.ephemeral_owner.is_none())
            && self
                .queues
                .get(queue_path)
                .and_then(|q| q.head())
                .is_some_and(|(head, _)| head == seq)
    }

    /// Called as a session ends, for each node it owns: if the node holds
    /// a mutex that has a delay, hold the lock off instead of deleting the
    /// node (see the module docs). Returns whether it did.
    pub(crate) fn hold_off(&mut self, path: &str, revision: u64, effects: &mut Effects) -> bool {
        let Some((queue_path, seq)) = parse_node_path(path) else {
            return false;
        };
        let delay_ms = self.delay_of(queue_path);
        let heads = self
            .queues
            .get(queue_path)
            .and_then(|q| q.head())
            .is_some_and(|(head, _)| head == seq);
        if delay_ms == 0 || !heads || !is_lock_queue(queue_path) {
            return false;
        }
        let Some(node) = self.nodes.get_mut(path) else {
            return false;
        };
        if let Some(owner) = node.ephemeral_owner.take() {
            if let Some(session) = self.sessions.get_mut(&owner) {
                session.nodes.remove(path);
            }
        }
        node.mod_revision = revision;
        // The node changed (no owner, a new revision): watchers see it.
        effects.written.push(path.to_string());
        effects.held_off.push(HeldOff {
            node: path.to_string(),
            delay_ms,
        });
        true
    }

    /// Ends the hold-off of each listed node that is still held off:
    /// deletes it and grants the next in line. Others are skipped (a
    /// retried or late proposal).
    pub(crate) fn end_lock_delays(
        &mut self,
        nodes: &[String],
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let mut ended = Vec::new();
        for path in nodes {
            if self.is_held_off(path) {
                self.remove_node(path, revision, effects);
                ended.push(path.clone());
            }
        }
        let changed = !ended.is_empty();
        let response = Response::LockDelaysEnded { nodes: ended };
        Ok(if changed {
            Outcome::changed(response)
        } else {
            Outcome::unchanged(response)
        })
    }

    /// Every held-off node with its lock's delay, in path order: what a
    /// new leader must time (and what a replica notes on restart).
    pub fn held_off(&self) -> Vec<HeldOff> {
        self.lock_delays
            .iter()
            .filter_map(|(queue_path, delay_ms)| {
                let (seq, _) = self.queues.get(queue_path)?.head()?;
                let node = node_path(queue_path, seq);
                self.is_held_off(&node).then_some(HeldOff {
                    node,
                    delay_ms: *delay_ms,
                })
            })
            .collect()
    }

    /// The delay of the lock named `name` (0: none). O(log n).
    pub fn lock_delay(&self, name: &str) -> u64 {
        self.delay_of(&crate::types::QueueKind::Lock.queue_path(name))
    }

    /// Whether the lock named `name` is held off: its holder's session
    /// ended and the next in line waits for the delay to pass. The state
    /// has no clock, so when it ends is the leader's to time (module docs).
    pub fn lock_held_off(&self, name: &str) -> bool {
        let queue_path = crate::types::QueueKind::Lock.queue_path(name);
        self.queues
            .get(queue_path.as_str())
            .and_then(|q| q.head())
            .is_some_and(|(seq, _)| self.is_held_off(&node_path(&queue_path, seq)))
    }

    /// Checks the delays' invariants: each belongs to a live mutex queue
    /// and is within bounds; a node without an owner in a mutex queue is
    /// a held-off head of a lock with a delay.
    pub(crate) fn check_lock_delays(&self) -> Result<(), String> {
        for (queue_path, ms) in &self.lock_delays {
            if !is_lock_queue(queue_path) || !self.queues.contains_key(queue_path) {
                return Err(format!("lock delay of {queue_path} outlived its queue"));
            }
            if *ms == 0 || *ms > MAX_LOCK_DELAY_MS {
                return Err(format!("lock delay of {queue_path} is out of bounds"));
            }
        }
        Ok(())
    }

    /// Whether an unowned node at `path` in a queue is a valid held-off
    /// node (the invariant check asks).
    pub(crate) fn valid_held_off(&self, path: &str) -> bool {
        parse_node_path(path).is_some_and(|(queue_path, _)| self.delay_of(queue_path) > 0)
            && self.is_held_off(path)
    }
}
