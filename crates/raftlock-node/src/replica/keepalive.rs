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
//!
//! Keepalives that arrive together are answered together
//! ([`Replica::keepalive_many_here`]): one leadership confirmation and at
//! most one `RenewSessions` entry for the whole group. Each keepalive's
//! promise still rests on a confirmation that started after it arrived:
//! the group's clock starts when the leader takes it up, after every one
//! of them arrived. Followers send such groups in one request
//! (`keepalives.rs`).

use raftlock_core::{Command, CoreError, SessionId, SessionLease};
use tokio::time::Instant;

use super::Replica;
use crate::error::NodeError;
use crate::sessions::tracker::KeepaliveRefused;

impl Replica {
    /// A keepalive at the leader; returns the session's TTL.
    pub(super) async fn keepalive_here(&self, id: SessionId) -> Result<u64, NodeError> {
        self.keepalive_many_here(&[id])
            .await
            .pop()
            .unwrap_or_else(|| Err(NodeError::internal("a keepalive had no result")))
    }

    /// Keepalives at the leader, one result (the TTL) per id, in order.
    pub(super) async fn keepalive_many_here(
        &self,
        ids: &[SessionId],
    ) -> Vec<Result<u64, NodeError>> {
        let arrived = Instant::now();
        let all = |e: NodeError| -> Vec<Result<u64, NodeError>> {
            ids.iter().map(|_| Err(e.clone())).collect()
        };
        if self.shutdown.is_stopping() {
            return all(NodeError::ShuttingDown);
        }
        let tracker = &self.shared.tracker;
        if !tracker.is_leading() {
            // Not leader, or elected but still taking over deadlines.
            return all(NodeError::NoLeader);
        }
        let not_found = |id: SessionId| NodeError::Core(CoreError::SessionNotFound(id));
        let leases: Vec<Option<SessionLease>> = {
            let state = self.shared.read();
            ids.iter().map(|id| state.session_lease(*id)).collect()
        };
        let mut results: Vec<Result<u64, NodeError>> = ids
            .iter()
            .zip(&leases)
            .map(|(id, lease)| lease.map(|l| l.ttl_ms).ok_or_else(|| not_found(*id)))
            .collect();
        let checkpointed: Vec<bool> = leases
            .iter()
            .map(|lease| lease.is_some_and(|l| l.checkpoint_remaining_ms.is_some()))
            .collect();
        let to_renew: Vec<SessionId> = ids
            .iter()
            .zip(&checkpointed)
            .filter(|(_, c)| **c)
            .map(|(id, _)| *id)
            .collect();
        if !to_renew.is_empty() {
            let renewed = match self
                .write_one_here(Command::RenewSessions { ids: to_renew })
                .await
            {
                Ok(applied) => applied.result.map(drop).map_err(NodeError::from),
                Err(e) => Err(e),
            };
            if let Err(e) = renewed {
                // Only the checkpointed ones depend on that entry.
                for (result, c) in results.iter_mut().zip(&checkpointed) {
                    if *c && result.is_ok() {
                        *result = Err(e.clone());
                    }
                }
            }
        }
        if let Err(e) = self.confirm_leadership(arrived).await {
            return all(e);
        }
        for (id, result) in ids.iter().zip(results.iter_mut()) {
            let ttl_ms = match result {
                Ok(ttl_ms) => *ttl_ms,
                Err(_) => continue,
            };
            *result = match tracker.keepalive(*id, ttl_ms) {
                Ok(()) => Ok(ttl_ms),
                Err(KeepaliveRefused::NotLeading) => Err(NodeError::NoLeader),
                Err(KeepaliveRefused::Ending) => Err(not_found(*id)),
            };
        }
        results
    }
}
