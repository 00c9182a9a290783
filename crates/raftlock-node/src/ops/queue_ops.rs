//! One acquire and one release for every queue-based primitive, in the
//! contract's terms (`raftlock_api::{QueueKind, Mode}`): the front doors
//! call these, and the per-primitive flows (`acquire.rs`,
//! `primitives.rs`) stay behind them.

use raftlock_api::{Mode, QueueKind};
use raftlock_core::{RwMode, SessionId, SharedKind};

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::acquire::AcquireOptions;
use crate::ops::kinds::{mismatch, CoreQueue};
use crate::ops::Grant;

/// What one acquire asks of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// The primitive.
    pub kind: QueueKind,
    /// How the entry holds it; must fit `kind` ([`Mode::fits`]).
    pub mode: Mode,
    /// The entry's data: an election candidate's value; empty otherwise.
    pub data: Vec<u8>,
    /// A lock's lock-delay (docs/api.md, "Lock-delay"); locks only.
    pub lock_delay_ms: Option<u64>,
}

impl Enqueue {
    /// An exclusive entry of `kind` (a lock or an election) with `data`.
    pub fn exclusive(kind: QueueKind, data: Vec<u8>) -> Self {
        Enqueue {
            kind,
            mode: Mode::Exclusive,
            data,
            lock_delay_ms: None,
        }
    }
}

impl Node {
    /// Queues `session` in queue `name` as `ask` says and waits up to
    /// `options.wait` for the grant (zero: try once). On timeout the
    /// waiting entry is withdrawn unless `options.keep_queued`.
    pub async fn acquire_queue(
        &self,
        name: &str,
        session: SessionId,
        ask: Enqueue,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        match (CoreQueue::from(ask.kind), ask.mode) {
            (CoreQueue::Plain(kind), Mode::Exclusive) => {
                self.acquire_with_delay(kind, name, session, ask.data, ask.lock_delay_ms, options)
                    .await
            }
            (CoreQueue::Shared(SharedKind::RwLock), Mode::Read | Mode::Write) => {
                let mode = if ask.mode == Mode::Read {
                    RwMode::Read
                } else {
                    RwMode::Write
                };
                self.acquire_rwlock(name, session, mode, options).await
            }
            (CoreQueue::Shared(SharedKind::Semaphore), Mode::Permits(permits)) => {
                self.acquire_semaphore(name, session, permits, options)
                    .await
            }
            _ => Err(mismatch(ask.kind, ask.mode).into()),
        }
    }

    /// Releases the session's entry in queue `name`, or cancels its wait.
    pub async fn release_queue(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
    ) -> Result<(), NodeError> {
        match CoreQueue::from(kind) {
            CoreQueue::Plain(kind) => self.release(kind, name, session).await,
            CoreQueue::Shared(kind) => self.release_shared(kind, name, session).await,
        }
    }
}
