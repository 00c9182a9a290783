//! Read-write locks and semaphores: the lock queue with a wider grant rule.
//!
//! Both are the mutex recipe (`locks.rs`) with one change: more than the
//! head may hold. The queue stays one FIFO of ephemeral sequential nodes
//! (so a session's end deletes them like any lock node, and a node's
//! create revision is its fencing token), and the granted entries are
//! always a prefix of it:
//!
//! - read-write lock: the head, and when the head reads, every reader up
//!   to the first writer. A reader queued behind a writer waits, so a
//!   stream of readers never starves a writer (FIFO);
//! - semaphore: the first `limit` entries.
//!
//! What each entry wants is its node's data (`read`/`write`, or the
//! semaphore's limit in decimal), so the queue index and the snapshot
//! format are unchanged, and the generic API shows it. The reserved
//! prefixes keep generic writes from changing it (`path::is_reserved`).
//!
//! Each grant rule answers "who becomes granted when entry X leaves" by
//! looking at X's neighbours only, so a release costs O(log n + grants)
//! (semaphore: O(limit)), never a walk over the waiters, and the node layer
//! wakes exactly the entries listed in `Effects::granted`.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::command::{Acquisition, Effects, Response};
use crate::error::CoreError;
use crate::locks::Release;
use crate::path::{validate_lock_name, RWLOCKS_PREFIX, SEMAPHORES_PREFIX};
use crate::query::QueueEntryView;
use crate::queue::{node_path, LockQueue};
use crate::state::{Outcome, StateMachine};
use crate::types::{Node, SessionId};

/// A queue whose grant rule lets several entries hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SharedKind {
    /// A read-write lock under `/rwlocks/`.
    RwLock,
    /// A counting semaphore under `/semaphores/`.
    Semaphore,
}

impl SharedKind {
    /// The tree prefix of this kind's queues.
    pub fn prefix(self) -> &'static str {
        match self {
            SharedKind::RwLock => RWLOCKS_PREFIX,
            SharedKind::Semaphore => SEMAPHORES_PREFIX,
        }
    }

    /// Tree path of the queue named `name`.
    pub fn queue_path(self, name: &str) -> String {
        format!("{}/{name}", self.prefix())
    }

    /// The kind of the queue at `queue_path`, if it is a shared one.
    pub(crate) fn of_queue(queue_path: &str) -> Option<Self> {
        [SharedKind::RwLock, SharedKind::Semaphore]
            .into_iter()
            .find(|k| {
                queue_path
                    .strip_prefix(k.prefix())
                    .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// What a read-write lock acquire asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RwMode {
    /// Shared with the other readers at the head of the queue.
    Read,
    /// Alone.
    Write,
}

impl RwMode {
    /// The node data that records the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
        }
    }

    /// The mode a node's data records.
    pub fn from_data(data: &[u8]) -> Option<Self> {
        match data {
            b"read" => Some(RwMode::Read),
            b"write" => Some(RwMode::Write),
            _ => None,
        }
    }
}

/// What one entry of a shared queue asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    Rw(RwMode),
    /// A place in a semaphore of this many holders.
    Permit(u64),
}

impl Want {
    fn kind(self) -> SharedKind {
        match self {
            Want::Rw(_) => SharedKind::RwLock,
            Want::Permit(_) => SharedKind::Semaphore,
        }
    }

    fn data(self) -> Vec<u8> {
        match self {
            Want::Rw(mode) => mode.as_str().as_bytes().to_vec(),
            Want::Permit(limit) => limit.to_string().into_bytes(),
        }
    }
}

/// The mode of the read-write lock node with sequence `seq`. A node that
/// records none counts as a writer: the safe reading.
fn mode_of(nodes: &BTreeMap<Box<str>, Node>, queue_path: &str, seq: u64) -> RwMode {
    nodes
        .get(node_path(queue_path, seq).as_str())
        .and_then(|n| RwMode::from_data(&n.data))
        .unwrap_or(RwMode::Write)
}

/// The limit a semaphore's entries agreed on (its head's data).
pub(crate) fn limit_of(
    nodes: &BTreeMap<Box<str>, Node>,
    queue_path: &str,
    queue: &LockQueue,
) -> Option<u64> {
    let (head, _) = queue.head()?;
    let node = nodes.get(node_path(queue_path, head).as_str())?;
    std::str::from_utf8(&node.data).ok()?.parse().ok()
}

/// Takes `seq` out of a shared queue and grants whoever its leaving lets
/// hold; returns their sequences.
pub(crate) fn remove(
    kind: SharedKind,
    queue_path: &str,
    queue: &mut LockQueue,
    seq: u64,
    revision: u64,
    nodes: &BTreeMap<Box<str>, Node>,
) -> Vec<u64> {
    let Some(gone) = queue.take(seq) else {
        return Vec::new();
    };
    let granted = match kind {
        SharedKind::RwLock => rw_grants_after(queue_path, queue, seq, nodes),
        // A waiter's leaving changes nobody's answer; a holder's lets the
        // first waiter in (the granted entries are a prefix of at most
        // `limit`, so this scan is bounded by the limit, not the queue).
        SharedKind::Semaphore if gone.granted_revision.is_some() => queue
            .iter()
            .find(|(_, e)| e.granted_revision.is_none())
            .map(|(s, _)| s)
            .into_iter()
            .collect(),
        SharedKind::Semaphore => Vec::new(),
    };
    for s in &granted {
        queue.grant(*s, revision);
    }
    granted
}

/// Who a read-write lock grants once the entry at `gone` has left: only
/// the entries right after it can change their answer, and only if they
/// now join the head's run.
fn rw_grants_after(
    queue_path: &str,
    queue: &LockQueue,
    gone: u64,
    nodes: &BTreeMap<Box<str>, Node>,
) -> Vec<u64> {
    let Some((next, entry)) = queue.after(gone).next() else {
        return Vec::new();
    };
    if entry.granted_revision.is_some() {
        return Vec::new(); // a reader of the holding run: nothing changes
    }
    let next_mode = mode_of(nodes, queue_path, next);
    let joins = match queue.predecessor(next) {
        // The new head holds, whatever it wants.
        None => true,
        // A writer waited between a holding run of readers and `next`.
        Some(prev) => {
            next_mode == RwMode::Read
                && queue
                    .get(prev)
                    .is_some_and(|e| e.granted_revision.is_some())
                && mode_of(nodes, queue_path, prev) == RwMode::Read
        }
    };
    if !joins {
        return Vec::new();
    }
    let mut granted = vec![next];
    if next_mode == RwMode::Read {
        granted.extend(
            queue
                .after(next)
                .take_while(|(s, _)| mode_of(nodes, queue_path, *s) == RwMode::Read)
                .map(|(s, _)| s),
        );
    }
    granted
}

/// Which entries the grant rule says hold, in queue order: the invariant
/// check compares it with what the queue records.
pub(crate) fn expected_grants(
    kind: SharedKind,
    queue_path: &str,
    queue: &LockQueue,
    nodes: &BTreeMap<Box<str>, Node>,
) -> Vec<bool> {
    match kind {
        SharedKind::RwLock => {
            let mut run = true;
            let mut out = Vec::with_capacity(queue.len());
            for (i, (seq, _)) in queue.iter().enumerate() {
                let mode = mode_of(nodes, queue_path, seq);
                let holds = run && (i == 0 || mode == RwMode::Read);
                run = holds && mode == RwMode::Read;
                out.push(holds);
            }
            out
        }
        SharedKind::Semaphore => {
            let limit = limit_of(nodes, queue_path, queue).unwrap_or(0);
            (0..queue.len())
                .map(|i| u64::try_from(i).is_ok_and(|i| i < limit))
                .collect()
        }
    }
}

impl StateMachine {
    /// Queues the session in a read-write lock or semaphore (or returns
    /// its node there: idempotent, as for locks) and grants it at once
    /// when the rule allows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire_shared(
        &mut self,
        name: &str,
        session: SessionId,
        want: Want,
        wait: bool,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        self.require_session(session)?;
        validate_lock_name(name)?;
        if want == Want::Permit(0) {
            return Err(CoreError::Invalid(
                "a semaphore needs at least 1 permit".into(),
            ));
        }
        let kind = want.kind();
        let queue_path = kind.queue_path(name);
        if let Some(queue) = self.queues.get(queue_path.as_str()) {
            if let Want::Permit(requested) = want {
                let limit = limit_of(&self.nodes, &queue_path, queue).unwrap_or(requested);
                if limit != requested {
                    return Err(CoreError::LimitMismatch {
                        semaphore: name.to_string(),
                        limit,
                        requested,
                    });
                }
            }
            if let Some(seq) = queue.sequence_of(session) {
                let node = node_path(&queue_path, seq);
                if let (Want::Rw(mode), SharedKind::RwLock) = (want, kind) {
                    let queued = mode_of(&self.nodes, &queue_path, seq);
                    if queued != mode {
                        return Err(CoreError::Invalid(format!(
                            "the session is already queued in {name} to {}; release it first",
                            queued.as_str()
                        )));
                    }
                }
                let held = queue.get(seq).is_some_and(|e| e.granted_revision.is_some());
                return Ok(Outcome::unchanged(Response::Acquired(Acquisition {
                    node,
                    fencing_token: seq,
                    held,
                    created: false,
                })));
            }
        }
        let grantable = match self.queues.get(queue_path.as_str()) {
            None => true,
            Some(queue) => match want {
                Want::Rw(mode) => {
                    mode == RwMode::Read
                        && queue.last().is_some_and(|(last, e)| {
                            e.granted_revision.is_some()
                                && mode_of(&self.nodes, &queue_path, last) == RwMode::Read
                        })
                }
                Want::Permit(limit) => u64::try_from(queue.len()).is_ok_and(|n| n < limit),
            },
        };
        if !grantable && !wait {
            let holder = self
                .queues
                .get(queue_path.as_str())
                .and_then(|q| q.head())
                .map_or(session, |(_, e)| e.session);
            return Err(CoreError::LockHeld {
                lock: name.to_string(),
                holder,
            });
        }
        let queue = self.queues.entry(queue_path.as_str().into()).or_default();
        let (seq, _) = queue.push(session, revision);
        if grantable {
            queue.grant(seq, revision);
        }
        let node = node_path(&queue_path, seq);
        self.insert_node(node.clone(), &want.data(), Some(session), revision, effects);
        if grantable {
            effects.granted.push(node.clone());
        }
        Ok(Outcome::changed(Response::Acquired(Acquisition {
            node,
            fencing_token: revision,
            held: grantable,
            created: true,
        })))
    }

    /// Deletes the session's node in a shared queue: a release when it
    /// holds, a cancel when it waits. `withdraw` as for locks
    /// (`Command::Release`): only that node, and only while it waits.
    pub(crate) fn release_shared(
        &mut self,
        kind: SharedKind,
        name: &str,
        session: SessionId,
        withdraw: Option<&str>,
        revision: u64,
        effects: &mut Effects,
    ) -> Result<Outcome, CoreError> {
        self.require_session(session)?;
        validate_lock_name(name)?;
        let release = Release {
            name,
            queue_path: kind.queue_path(name),
            session,
            withdraw,
        };
        let holds = |q: &LockQueue, seq| q.get(seq).is_some_and(|e| e.granted_revision.is_some());
        self.remove_queued(release, holds, revision, effects)
    }
}

/// A read-write lock or semaphore: who holds, who waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedView {
    /// The granted entries, first in line first (their `data` is the
    /// mode, or the limit).
    pub holders: Vec<QueueEntryView>,
    /// The waiting entries behind them, in order.
    pub waiters: Vec<QueueEntryView>,
    /// A semaphore's limit while anyone is queued.
    pub limit: Option<u64>,
}

impl StateMachine {
    /// The holders and waiters of a read-write lock or semaphore.
    pub fn shared_queue(&self, kind: SharedKind, name: &str) -> SharedView {
        let queue_path = kind.queue_path(name);
        let mut view = SharedView {
            holders: Vec::new(),
            waiters: Vec::new(),
            limit: None,
        };
        let Some(queue) = self.queues.get(queue_path.as_str()) else {
            return view;
        };
        if kind == SharedKind::Semaphore {
            view.limit = limit_of(&self.nodes, &queue_path, queue);
        }
        for (seq, entry) in queue.iter() {
            let entry_view = self.entry_view(&queue_path, seq, entry);
            match entry.granted_revision {
                Some(_) => view.holders.push(entry_view),
                None => view.waiters.push(entry_view),
            }
        }
        view
    }

    /// The session's entry in a read-write lock or semaphore, if queued:
    /// O(log n), for the paths that run on every grant.
    pub fn shared_entry(
        &self,
        kind: SharedKind,
        name: &str,
        session: SessionId,
    ) -> Option<QueueEntryView> {
        let queue_path = kind.queue_path(name);
        let queue = self.queues.get(queue_path.as_str())?;
        let seq = queue.sequence_of(session)?;
        Some(self.entry_view(&queue_path, seq, queue.get(seq)?))
    }
}

impl StateMachine {
    /// How many entries a read-write lock or semaphore queues (holders
    /// included), and whether `session` is one: O(log n), for the
    /// waiters-per-lock check on every acquire.
    pub fn shared_place(&self, kind: SharedKind, name: &str, session: SessionId) -> (usize, bool) {
        self.queues
            .get(kind.queue_path(name).as_str())
            .map_or((0, false), |q| (q.len(), q.sequence_of(session).is_some()))
    }
}

/// One read-write lock or semaphore of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedSummary {
    /// The name (without the tree prefix).
    pub name: String,
    /// The granted entries, first in line first.
    pub holders: Vec<QueueEntryView>,
    /// How many entries wait behind them.
    pub waiters: usize,
    /// A semaphore's limit while anyone is queued.
    pub limit: Option<u64>,
}

impl StateMachine {
    /// The read-write locks or semaphores whose name starts with
    /// `prefix`, in name order. Holders are a prefix of each queue, so
    /// the waiters are counted, not visited.
    pub fn shared_queues(&self, kind: SharedKind, prefix: &str) -> Vec<SharedSummary> {
        let start = kind.queue_path(prefix);
        let strip = format!("{}/", kind.prefix());
        self.queues
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(|(path, _)| path.starts_with(&start))
            .map(|(path, queue)| {
                let holders: Vec<QueueEntryView> = queue
                    .iter()
                    .take_while(|(_, entry)| entry.granted_revision.is_some())
                    .map(|(seq, entry)| self.entry_view(path, seq, entry))
                    .collect();
                SharedSummary {
                    name: path.strip_prefix(&strip).unwrap_or(path).to_string(),
                    waiters: queue.len().saturating_sub(holders.len()),
                    limit: match kind {
                        SharedKind::Semaphore => limit_of(&self.nodes, path, queue),
                        SharedKind::RwLock => None,
                    },
                    holders,
                }
            })
            .collect()
    }
}
