//! Atomic multi-locks: several ordinary locks taken as one.
//!
//! One command queues the session in every named lock's queue at once, so
//! all its nodes carry the same sequence: the command's revision. Queues
//! are ordered by sequence, hence every queue agrees on the order of any
//! two sets, which is what rules out deadlock: the waiting set with the
//! lowest sequence has, in each of its locks, only a set ahead of it that
//! already holds everything it asked for, and will release. (ZooKeeper's
//! recipe takes one lock after another, and two sets taken in opposite
//! orders can wait on each other forever.)
//!
//! The set holds when its node heads every one of its queues; until then
//! the locks where it is first in line are reserved for it (their holder
//! listing shows it, nobody else is granted them), as FIFO wants. The
//! locks are the mutexes of `/v1/locks`, so a transfer under a multi-lock
//! excludes single-lock users of either account too. Each lock's fencing
//! token is the node's create revision, as for any lock.

use crate::command::{Effects, MultiAcquisition, Response};
use crate::error::CoreError;
use crate::path::validate_lock_name;
use crate::queue::node_path;
use crate::state::{Outcome, StateMachine};
use crate::types::{QueueKind, SessionId};

/// Most locks one multi-lock takes: a set is one log entry and one
/// wait, and a bound keeps both small.
pub const MAX_MULTI_LOCKS: usize = 64;

/// Checks a multi-lock's names: 1 to [`MAX_MULTI_LOCKS`] valid lock
/// names, no name twice.
pub fn validate_lock_set(locks: &[String]) -> Result<(), CoreError> {
    if locks.is_empty() || locks.len() > MAX_MULTI_LOCKS {
        return Err(CoreError::Invalid(format!(
            "a multi-lock names 1 to {MAX_MULTI_LOCKS} locks"
        )));
    }
    for name in locks {
        validate_lock_name(name)?;
    }
    let mut sorted: Vec<&String> = locks.iter().collect();
    sorted.sort();
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(CoreError::Invalid(format!(
            "a multi-lock names {} twice",
            twice[0]
        )));
    }
    Ok(())
}

/// Where a session's multi-lock stands, read from one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiStatus {
    /// Every lock's queue is headed by the session's node: these, in the
    /// order the locks were named.
    Held(Vec<String>),
    /// Some queue has nodes ahead: wake when one of `predecessors` goes
    /// (or one of the session's `own` nodes does).
    Waiting {
        /// The node right ahead of the session's, in each lock it does
        /// not head yet.
        predecessors: Vec<String>,
        /// The session's nodes.
        own: Vec<String>,
    },
    /// The session has no node in some of the locks (released, withdrawn
    /// or its session ended).
    Gone,
}

impl StateMachine {
    /// What acquiring and releasing a set both begin with: the session and
    /// the set are valid and not held off, and the session's place in
    /// each lock (as `multi_places`).
    fn checked_places(
        &self,
        locks: &[String],
        session: SessionId,
    ) -> Result<Vec<Option<u64>>, CoreError> {
        self.require_session(session)?;
        validate_lock_set(locks)?;
        self.refuse_held_off_set(locks, session)?;
        Ok(self.multi_places(locks, session))
    }

    /// The session's node sequence in each lock, if it is queued there
    /// (a held-off node, `lock_delay.rs`, is not the session's any more).
    fn multi_places(&self, locks: &[String], session: SessionId) -> Vec<Option<u64>> {
        locks
            .iter()
            .map(|name| {
                let queue_path = QueueKind::Lock.queue_path(name);
                self.queues
                    .get(queue_path.as_str())
                    .and_then(|q| q.sequence_of(session))
                    .filter(|seq| !self.is_held_off(&node_path(&queue_path, *seq)))
            })
            .collect()
    }

    /// Refuses a multi-lock command of a session with a held-off node in
    /// one of the locks (`StateMachine::refuse_held_off`).
    fn refuse_held_off_set(&self, locks: &[String], session: SessionId) -> Result<(), CoreError> {
        locks
            .iter()
            .try_for_each(|name| self.refuse_held_off(&QueueKind::Lock.queue_path(name), session))
    }

    fn multi_held(&self, locks: &[String], seq: u64) -> bool {
        locks.iter().all(|name| {
            self.queues
                .get(QueueKind::Lock.queue_path(name).as_str())
                .and_then(|q| q.head())
                .is_some_and(|(head, _)| head == seq)
        })
    }

    /// Where the session's multi-lock over `locks` stands.
    pub fn multi_status(&self, locks: &[String], session: SessionId) -> MultiStatus {
        let mut predecessors = Vec::new();
        let mut own = Vec::new();
        for (name, place) in locks.iter().zip(self.multi_places(locks, session)) {
            let queue_path = QueueKind::Lock.queue_path(name);
            let (Some(seq), Some(queue)) = (place, self.queues.get(queue_path.as_str())) else {
                return MultiStatus::Gone;
            };
            if let Some(prev) = queue.predecessor(seq) {
                predecessors.push(node_path(&queue_path, prev));
            }
            own.push(node_path(&queue_path, seq));
        }
        if predecessors.is_empty() {
            MultiStatus::Held(own)
        } else {
            MultiStatus::Waiting { predecessors, own }
        }
    }

    pub(crate) fn acquire_multi(
        &mut self,
        locks: &[String],
        session: SessionId,
        wait: bool,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let places = self.checked_places(locks, session)?;
        if let Some(Some(first)) = places.first() {
            // A retry finds the set its first attempt queued: the same
            // sequence in every lock.
            if places.iter().all(|p| *p == Some(*first)) {
                return Ok(Outcome::unchanged(Response::MultiAcquired(
                    MultiAcquisition {
                        nodes: self.multi_nodes(locks, *first),
                        fencing_token: *first,
                        held: self.multi_held(locks, *first),
                        created: false,
                    },
                )));
            }
        }
        if let Some((name, _)) = locks.iter().zip(&places).find(|(_, p)| p.is_some()) {
            return Err(CoreError::Invalid(format!(
                "the session is already queued in lock {name} outside this set; release it first"
            )));
        }
        let busy = locks.iter().find_map(|name| {
            let queue = self.queues.get(QueueKind::Lock.queue_path(name).as_str())?;
            queue.head().map(|(_, e)| (name, e.session))
        });
        if let (Some((name, holder)), false) = (busy, wait) {
            return Err(CoreError::LockHeld {
                lock: name.clone(),
                holder,
            });
        }
        for name in locks {
            let queue_path = QueueKind::Lock.queue_path(name);
            let (seq, head) = self
                .queues
                .entry(queue_path.as_str().into())
                .or_default()
                .push(session, revision);
            let node = node_path(&queue_path, seq);
            self.insert_node(node.clone(), &[], Some(session), revision, effects);
            if head {
                effects.granted.push(node);
            }
        }
        Ok(Outcome::changed(Response::MultiAcquired(
            MultiAcquisition {
                nodes: self.multi_nodes(locks, revision),
                fencing_token: revision,
                held: busy.is_none(),
                created: true,
            },
        )))
    }

    fn multi_nodes(&self, locks: &[String], seq: u64) -> Vec<String> {
        locks
            .iter()
            .map(|name| node_path(&QueueKind::Lock.queue_path(name), seq))
            .collect()
    }

    /// Deletes the session's nodes in every named lock, together. With
    /// `withdraw`, only if they are the set queued at that sequence and it
    /// does not hold yet (a timed-out wait; `AlreadyGranted` otherwise).
    pub(crate) fn release_multi(
        &mut self,
        locks: &[String],
        session: SessionId,
        withdraw: Option<u64>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        let places = self.checked_places(locks, session)?;
        if let Some(seq) = withdraw {
            if places.iter().any(|p| *p != Some(seq)) {
                return Err(CoreError::NotFound(format!(
                    "the multi-lock queued at {seq}"
                )));
            }
            if self.multi_held(locks, seq) {
                return Err(CoreError::AlreadyGranted {
                    node: node_path(&QueueKind::Lock.queue_path(&locks[0]), seq),
                });
            }
        }
        let mut nodes = Vec::new();
        let mut was_holder = true;
        for (name, place) in locks.iter().zip(places) {
            let queue_path = QueueKind::Lock.queue_path(name);
            let Some(seq) = place else {
                was_holder = false;
                continue;
            };
            let heads = self
                .queues
                .get(queue_path.as_str())
                .and_then(|q| q.head())
                .is_some_and(|(h, _)| h == seq);
            was_holder &= heads;
            nodes.push(node_path(&queue_path, seq));
        }
        if nodes.is_empty() {
            return Err(CoreError::NotFound(format!(
                "the session's nodes in {}",
                locks.join(", ")
            )));
        }
        for node in &nodes {
            self.remove_node(node, revision, effects);
        }
        Ok(Outcome::changed(Response::MultiReleased {
            nodes,
            was_holder,
        }))
    }
}
