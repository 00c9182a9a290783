//! Where a keepalive is answered, and under what guarantee.
//!
//! Keepalives never enter the Raft log: the leader keeps each session's
//! deadline in memory (`tracker`) and followers forward keepalives to it
//! (`at_leader`). An acknowledged keepalive is a promise to the client:
//! *no member will expire this session before the keepalive's arrival +
//! TTL*. The client's `lost()` deadline (send time of its last acknowledged
//! keepalive + TTL − a margin) relies on it; if the promise broke, the
//! client would go on using a lock the cluster had handed to someone else.
//!
//! The leader answers from memory, so the promise holds only if no other
//! leader can exist that does not know about this keepalive. Hence, before
//! acknowledging:
//!
//! 1. **A quorum confirmed this node's leadership after the keepalive
//!    arrived** ([`Replica::confirm_leadership`]). Any later leader needs a
//!    vote from a member of that quorum, cast after it accepted us, so it
//!    is elected after the arrival and starts every deadline at its own
//!    `now + TTL` (or from a checkpoint committed after it), never
//!    earlier than arrival + TTL. A leader cut off from the majority never
//!    gets that confirmation and answers `NoLeader`, so its clients'
//!    `lost()` fires in time. Found by the Jepsen harness's sticky
//!    clients: without this step, a partitioned leader renewed its
//!    clients' sessions while the majority expired them and handed their
//!    locks on.
//! 2. **A checkpointed session is renewed through the log** (commits
//!    `RenewSessions`), so no later leader counts it down from an old
//!    checkpoint (see `tracker`, "Deadlines across leader changes").
//! 3. **The tracker still has the session live**: not ended and no expiry
//!    in flight. A keepalive racing the expiry it came too late for is
//!    refused with `session_not_found` rather than acknowledged.

use raftlock_core::{Command, CoreError, SessionId};
use tokio::time::Instant;

use super::Replica;
use crate::error::NodeError;
use crate::tracker::KeepaliveRefused;

impl Replica {
    /// A keepalive at the leader; returns the session's TTL.
    pub(super) async fn keepalive_here(&self, id: SessionId) -> Result<u64, NodeError> {
        let arrived = Instant::now();
        if self.shutdown.is_stopping() {
            return Err(NodeError::ShuttingDown);
        }
        let tracker = &self.shared.tracker;
        if !tracker.is_leading() {
            // Not leader, or elected but still taking over deadlines.
            return Err(NodeError::NoLeader);
        }
        let not_found = || NodeError::Core(CoreError::SessionNotFound(id));
        let lease = self.shared.read().session_lease(id).ok_or_else(not_found)?;
        if lease.checkpoint_remaining_ms.is_some() {
            self.write_one_here(Command::RenewSessions { ids: vec![id] })
                .await?
                .result?;
        }
        self.confirm_leadership(arrived).await?;
        match tracker.keepalive(id, lease.ttl_ms) {
            Ok(()) => Ok(lease.ttl_ms),
            Err(KeepaliveRefused::NotLeading) => Err(NodeError::NoLeader),
            Err(KeepaliveRefused::Ending) => Err(not_found()),
        }
    }
}
