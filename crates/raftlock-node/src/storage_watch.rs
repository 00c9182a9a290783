//! A member whose log disk failed a durability barrier leaves the Raft
//! group rather than carry on as if its data were safe.
//!
//! After `fdatasync` reports an error the kernel may already have dropped
//! the dirty pages, so retrying it could "succeed" over data that is gone
//! (the PostgreSQL "fsyncgate" lesson). The log store therefore fails every
//! later barrier too (`raftlock_storage::DurableIndex`), and nothing this
//! member wrote after the failure is ever applied, acknowledged to a
//! leader or reported committed. This task makes the rest explicit and
//! prompt: the member stops answering as a leader (sessions, reads),
//! stops Raft (no votes, no heartbeats, so a leader steps down and the
//! others elect a new one within an election timeout), and says why. Its
//! API keeps answering: writes, reads and keepalives that need the log get
//! `503 storage_failed` (docs/api.md); a restart re-checks the data
//! directory (checksums, watermark) before the member rejoins.

use std::sync::Arc;

use crate::replica::Replica;

/// Waits for the log's durability to fail, then takes the member out of
/// the Raft group. Ends with the node.
pub(crate) async fn watch_log_storage(replica: Arc<Replica>) {
    let failure = tokio::select! {
        // No index reaches u64::MAX: only a failure ends this wait.
        waited = replica.durable.wait_for(u64::MAX) => match waited {
            Err(e) => e,
            Ok(()) => return,
        },
        _ = replica.shutdown.stopped() => return,
    };
    tracing::error!(
        id = replica.id,
        error = %failure,
        "the log disk failed (a durability barrier or log write returned an error): this \
         member stops taking part in Raft (no writes, votes or acknowledgements; requests get \
         storage_failed, or disk_full if the disk is full). What it acknowledged before is on \
         a majority. Fix the disk or free space, then restart the member"
    );
    // No more answers from memory as a leader: keepalives and lease checks
    // move to the next leader.
    replica.shared.tracker.step_down();
    if let Err(e) = replica.raft.shutdown().await {
        tracing::warn!("raft shutdown after the storage failure: {e}");
    }
}
