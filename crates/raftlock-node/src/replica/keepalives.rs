//! Group keepalives: concurrent keepalives on one node reach the leader
//! together, as concurrent writes do (`proposer`).
//!
//! Why: a keepalive is cheap at the leader (no log entry, see
//! `keepalive`), but one request per keepalive is not. Under a storm of
//! renewals (docs/overload.md: 50,000 sessions at a 1 s TTL) each
//! follower forwarded every keepalive as its own internal HTTP request,
//! and at the leader each waited for its own leadership confirmation,
//! woken by every acknowledged heartbeat. That cost grows with the number
//! of keepalives in flight, and a lock holder's keepalive queued behind
//! all of them.
//!
//! How: the batching of `batcher`, with at most [`IN_FLIGHT`] requests
//! per node outstanding: a keepalive that finds a free slot goes out at
//! once, by itself (a lone keepalive keeps the wire form older members
//! know); the queued ones go in one request (up to [`MAX_IDS`]), answered
//! with one confirmation at the leader (`keepalive`).
//!
//! Each keepalive still gets its own result and retry (`at_leader`): a
//! group is transport, nothing more.

use std::sync::Arc;

use raftlock_core::SessionId;

use super::batcher::{self, BatchQueue, Batcher, Caps};
use super::Replica;
use crate::error::NodeError;

/// Keepalive requests outstanding at once from one node. Two, so that a
/// group held up by a slow step (a checkpointed session's renewal entry
/// after an election) does not hold every later keepalive behind it.
const IN_FLIGHT: usize = 2;
/// Sessions per request at most (16 bytes each).
const MAX_IDS: usize = 8_192;

const CAPS: Caps<SessionId> = Caps {
    items: MAX_IDS,
    weight: |_| 16,
    max_weight: usize::MAX,
};

type Answer = Result<u64, NodeError>;

/// The queue side, held by the `Replica`.
pub(crate) struct Keepalives(Batcher<SessionId, u64>);

/// The task side, run by [`run`].
pub(crate) struct KeepaliveQueue(BatchQueue<SessionId, u64>);

impl Keepalives {
    pub(crate) fn new() -> (Keepalives, KeepaliveQueue) {
        let (batcher, side) = Batcher::new(IN_FLIGHT);
        (Keepalives(batcher), KeepaliveQueue(side))
    }

    /// Requests that carried keepalives to the leader (or to this node's
    /// own leader role) so far.
    pub(crate) fn requests(&self) -> u64 {
        self.0.batches()
    }

    /// Keepalives those requests carried.
    pub(crate) fn keepalives(&self) -> u64 {
        self.0.items()
    }

    /// One attempt to renew `id` through the leader, in the next request:
    /// no retry (`NoLeader` and `OutcomeUnknown` are the caller's).
    pub(crate) async fn renew(&self, replica: &Replica, id: SessionId) -> Answer {
        self.0.send(id, |id| replica.keepalive_once(id)).await
    }
}

/// Drains the queue into grouped requests until the node stops.
pub(crate) async fn run(replica: Arc<Replica>, side: KeepaliveQueue) {
    batcher::run(replica, side.0, &CAPS, |replica, ids| async move {
        replica.keepalive_many_once(ids).await
    })
    .await;
}
