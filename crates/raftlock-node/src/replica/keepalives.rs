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
//! How: at most [`IN_FLIGHT`] keepalive requests per node are
//! outstanding. A keepalive that finds a free slot goes out at once, by
//! itself (an idle node adds no delay, and a lone keepalive keeps the
//! wire form older members know). Otherwise it queues, and one task turns
//! the queue into one request for everything queued (up to [`MAX_IDS`]),
//! answered with one confirmation at the leader (`keepalive`).
//!
//! Each keepalive still gets its own result and retry (`at_leader`): a
//! group is transport, nothing more.

use std::sync::Arc;

use raftlock_core::SessionId;

use super::group::{Group, Kind};
use super::Replica;
use crate::error::NodeError;

/// Keepalive requests outstanding at once from one node. Two, so that a
/// group held up by a slow step (a checkpointed session's renewal entry
/// after an election) does not hold every later keepalive behind it.
const IN_FLIGHT: usize = 2;
/// Sessions per request at most (16 bytes each).
const MAX_IDS: usize = 8_192;

/// Keepalives, grouped into requests to the leader.
pub(crate) struct Renewals;

/// The queue side, held by the `Replica`: `submit` is one attempt to
/// renew a session through the leader, in the next request.
pub(crate) type Keepalives = Group<Renewals>;

impl Kind for Renewals {
    type Item = SessionId;
    /// The session's TTL, ms.
    type Output = u64;
    const IN_FLIGHT: usize = IN_FLIGHT;
    const MAX_ITEMS: usize = MAX_IDS;

    async fn alone(replica: &Replica, id: SessionId) -> Result<u64, NodeError> {
        // By itself, in the wire form older members know.
        replica.keepalive_once(id).await
    }

    async fn together(replica: Arc<Replica>, ids: Vec<SessionId>) -> Vec<Result<u64, NodeError>> {
        replica.keepalive_many_once(ids).await
    }
}
