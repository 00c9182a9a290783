//! [`DurableIndex`]: how far the log is known to be on disk.
//!
//! openraft 0.9's Raft core awaits the durability callback of every append
//! before it does anything else (`RaftCore::append_to_log`), so with the
//! callback fired after the barrier a leader sends new entries to its
//! followers only once its own sync is over, and every write pays the
//! leader's sync and then a follower's, one after the other. With
//! [`SledLogConfig::deferred_durability`](crate::SledLogConfig) the store
//! fires the callback as soon as the entries are written (readable) and
//! reports durability here instead, so the leader's sync runs while the
//! entries travel to the followers.
//!
//! That is only safe if nothing leaves the node, or is applied, on the
//! strength of an entry that is not yet durable. The caller must: hold a
//! follower's append acknowledgement until the entries it covers are
//! durable; lower the leader's commit index in outgoing RPCs to what is
//! durable on the leader; and apply an entry only once it is durable
//! locally (raftlock-node's `routes.rs`, `network.rs`, `state_machine.rs`;
//! its `tests/durability.rs` stalls disks to check all three). Then an entry that anyone acts on is on disk on a
//! majority (the leader and the follower whose acknowledgement committed
//! it), exactly as with a late callback; openraft's earlier, optimistic
//! view of the leader's own log never becomes visible.

use std::sync::Arc;

use tokio::sync::watch;

use crate::error::StoreError;

/// The index below which (inclusive) every entry present in the log is
/// durable, or the failure of a durability barrier or log write (after
/// which nothing will ever be durable again: see the sync worker).
#[derive(Debug, Clone)]
enum Watermark {
    Upto(u64),
    Failed(Arc<StoreError>),
}

/// Shared view of the log's durable prefix. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DurableIndex {
    tx: Arc<watch::Sender<Watermark>>,
}

impl DurableIndex {
    /// Everything up to `index` is durable already (what open found on disk).
    pub(crate) fn starting_at(index: u64) -> Self {
        Self {
            tx: Arc::new(watch::channel(Watermark::Upto(index)).0),
        }
    }

    /// Every index counts as durable: for code driven by a log store that
    /// acknowledges appends only once durable, and for tests.
    pub fn everything() -> Self {
        Self::starting_at(u64::MAX)
    }

    /// The greatest index known durable, or the barrier failure.
    pub fn current(&self) -> Result<u64, StoreError> {
        match &*self.tx.borrow() {
            Watermark::Upto(index) => Ok(*index),
            Watermark::Failed(cause) => Err(failed(cause)),
        }
    }

    /// Returns once every log entry up to `index` is durable; fails at once
    /// if a barrier failed. Callers bound it with a timeout: after a
    /// truncation an index may only become durable again when new entries
    /// reach it.
    pub async fn wait_for(&self, index: u64) -> Result<(), StoreError> {
        let mut rx = self.tx.subscribe();
        let reached = rx
            .wait_for(|w| match w {
                Watermark::Upto(durable) => *durable >= index,
                Watermark::Failed(_) => true,
            })
            .await
            .map(|w| w.clone());
        match reached {
            Ok(Watermark::Upto(_)) => Ok(()),
            Ok(Watermark::Failed(cause)) => Err(failed(&cause)),
            // The sender lives as long as any handle, ours included.
            Err(_) => Err(failed(&Arc::new(StoreError::SyncWorkerGone))),
        }
    }

    /// A barrier covering every entry up to `index` completed.
    pub(crate) fn advance(&self, index: u64) {
        self.tx.send_if_modified(|w| match w {
            Watermark::Upto(durable) if *durable < index => {
                *durable = index;
                true
            }
            _ => false,
        });
    }

    /// Entries from `index + 1` on were removed (truncation): entries
    /// written at those indexes later are new and not yet durable.
    pub(crate) fn lower_to(&self, index: u64) {
        self.tx.send_if_modified(|w| match w {
            Watermark::Upto(durable) if *durable > index => {
                *durable = index;
                true
            }
            _ => false,
        });
    }

    /// A barrier or a log write failed with `cause`: nothing more will
    /// become durable. The first cause is kept.
    pub(crate) fn fail(&self, cause: Arc<StoreError>) {
        self.tx.send_if_modified(|w| match w {
            Watermark::Upto(_) => {
                *w = Watermark::Failed(cause);
                true
            }
            Watermark::Failed(_) => false,
        });
    }

    /// Something this member keeps on disk beside the log (its snapshot
    /// file) failed to write with `cause`. openraft stops at such an error
    /// without the log's barriers failing, so nothing else would tell the
    /// member's API and its storage watcher that it left the Raft group:
    /// failing the index here makes the member answer `storage_failed` /
    /// `disk_full` and, after `ENOSPC`, recover in place exactly as after a
    /// failed log barrier. The first cause is kept.
    pub fn fail_beside_log(&self, cause: StoreError) {
        self.fail(Arc::new(StoreError::BesideLog(Arc::new(cause))));
    }
}

/// The error reported for a failed index: the cause, as the barrier (or
/// the write beside the log) that met it reported it.
fn failed(cause: &Arc<StoreError>) -> StoreError {
    match &**cause {
        StoreError::Barrier(inner) => StoreError::Barrier(Arc::clone(inner)),
        StoreError::BesideLog(inner) => StoreError::BesideLog(Arc::clone(inner)),
        _ => StoreError::Barrier(Arc::clone(cause)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn waits_until_advanced_past_the_index() {
        let durable = DurableIndex::starting_at(3);
        durable.wait_for(3).await.expect("already durable");
        let waiter = tokio::spawn({
            let durable = durable.clone();
            async move { durable.wait_for(5).await }
        });
        durable.advance(4);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "4 does not cover 5");
        durable.advance(5);
        waiter.await.expect("join").expect("durable");
        assert_eq!(durable.current().expect("ok"), 5);
    }

    #[tokio::test]
    async fn never_moves_back_except_on_truncation() {
        let durable = DurableIndex::starting_at(10);
        durable.advance(7);
        assert_eq!(durable.current().expect("ok"), 10);
        durable.lower_to(6);
        assert_eq!(durable.current().expect("ok"), 6);
        let late = tokio::time::timeout(Duration::from_millis(20), durable.wait_for(8)).await;
        assert!(late.is_err(), "truncated indexes are not durable any more");
    }

    #[tokio::test]
    async fn a_failed_barrier_fails_every_wait() {
        let durable = DurableIndex::starting_at(0);
        let waiter = tokio::spawn({
            let durable = durable.clone();
            async move { durable.wait_for(1).await }
        });
        durable.fail(Arc::new(StoreError::SyncWorkerGone));
        assert!(waiter.await.expect("join").is_err());
        assert!(durable.wait_for(0).await.is_err());
        durable.advance(9);
        assert!(durable.current().is_err(), "a failure is final");
    }

    #[tokio::test]
    async fn a_full_disk_beside_the_log_fails_it_as_out_of_space() {
        let durable = DurableIndex::starting_at(3);
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "snapshot file");
        durable.fail_beside_log(StoreError::Io(full));
        let failure = durable.wait_for(u64::MAX).await.expect_err("failed");
        assert!(failure.is_out_of_space(), "{failure}");
        assert!(failure.to_string().contains("beside the log"), "{failure}");
        durable.advance(9);
        assert!(durable.current().is_err(), "a failure is final");
    }
}
