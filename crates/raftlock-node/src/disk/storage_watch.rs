//! A member whose log disk failed a durability barrier (or whose snapshot
//! could not be written: `StateMachineStore` fails the durable index then
//! too) leaves the Raft group rather than carry on as if its data were
//! safe; after a full disk it comes back by itself once there is room.
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
//! `503 storage_failed` or `503 disk_full` (docs/api.md).
//!
//! Any failure other than a full disk (`EIO` and the like) is final: a
//! restart re-checks the data directory (checksums, watermark) before the
//! member rejoins.
//!
//! A full disk (`ENOSPC`, `EDQUOT`) is recovered in place, without an
//! operator and without restarting the process. The failed sled handle is
//! never used again (sled 0.34 keeps a sticky error after a failed write,
//! and nobody knows which of its buffered writes reached the disk). Once
//! the data directory has room again (`disk_space.rs`), the member opens
//! the log store afresh, which reads only what is on disk, checks that it
//! still holds every entry the state machine applied (applying waits for
//! durability, so it must), and starts a new Raft instance over it and
//! the state machine in memory (`RaftFactory::reopen`). The new instance
//! starts as a follower with the vote and log that were durable, so it is
//! the same voter as before; the leader then sends it what it missed. Its
//! internal listener, API, sessions' waiters and watches stay up
//! throughout. Nothing is lost: every entry it acknowledged was durable
//! before the acknowledgement, and the rest came from the leader again.

use std::sync::Arc;
use std::time::Duration;

use crate::disk::disk_space::{DiskSpace, Room};
use crate::node::{spawn_raft_tasks, RaftFactory, ReopenError, Tasks};
use crate::replica::Replica;

/// How often a member stopped on a full disk looks for free space, and
/// waits before trying a reopen that failed again.
const SPACE_POLL: Duration = Duration::from_millis(250);

/// What rebuilding the member's Raft after a full disk needs.
pub(crate) struct Recovery {
    pub factory: RaftFactory,
    pub disk_space: DiskSpace,
    /// Where the tasks of a rebuilt Raft go (aborted on shutdown).
    pub tasks: Tasks,
}

/// Waits for the log's durability to fail, then takes the member out of
/// the Raft group; after a full disk, brings it back once there is room.
/// Ends with the node, or at a failure that is not a full disk.
pub(crate) async fn watch_log_storage(replica: Arc<Replica>, recovery: Recovery) {
    loop {
        let current = replica.raft.get();
        let failure = tokio::select! {
            // No index reaches u64::MAX: only a failure ends this wait.
            waited = current.durable.wait_for(u64::MAX) => match waited {
                Err(e) => e,
                Ok(()) => return,
            },
            _ = replica.shutdown.stopped() => return,
        };
        let full = failure.is_out_of_space();
        if full {
            tracing::error!(
                id = replica.id,
                error = %failure,
                "the data disk is full (a log, snapshot or purge write failed). This member \
                 stops taking part in Raft \
                 (no writes, votes or acknowledgements; requests get disk_full). What it \
                 acknowledged before is on a majority. It reopens its log and rejoins by \
                 itself once the data directory has room again"
            );
        } else {
            tracing::error!(
                id = replica.id,
                error = %failure,
                "the data disk failed (a durability barrier, log write or snapshot write \
                 returned an error): \
                 this member stops taking part in Raft (no writes, votes or acknowledgements; \
                 requests get storage_failed). What it acknowledged before is on a majority. \
                 Fix the disk, then restart the member"
            );
        }
        // No more answers from memory as a leader: keepalives and lease checks
        // move to the next leader.
        replica.shared.tracker.step_down();
        if let Err(e) = current.raft.shutdown().await {
            tracing::warn!("raft shutdown after the storage failure: {e}");
        }
        // Nothing may keep the failed log store open: its sled handle holds
        // the database's file lock until it is dropped.
        drop(current);
        if !full {
            return;
        }
        if !rejoin_when_there_is_room(&replica, &recovery).await {
            return;
        }
    }
}

/// Waits for room on the data directory's disk, then rebuilds the Raft
/// instance (`RaftFactory::reopen`) and makes it current. `false` if the
/// node stopped meanwhile, or the reopened log cannot serve.
async fn rejoin_when_there_is_room(replica: &Arc<Replica>, recovery: &Recovery) -> bool {
    let mut reported = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SPACE_POLL) => {}
            _ = replica.shutdown.stopped() => return false,
        }
        match recovery.disk_space.room() {
            Ok(Room::Enough) => {}
            Ok(Room::Short(free)) => {
                if reported.is_none() {
                    tracing::warn!(
                        id = replica.id,
                        free_bytes = free,
                        need_bytes = crate::disk::disk_space::ROOM_TO_REOPEN,
                        "the data directory's disk is still full; waiting for room"
                    );
                    reported = Some(free);
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(id = replica.id, "cannot read the free space: {e}");
                continue;
            }
        }
        match recovery.factory.reopen().await {
            Ok(incarnation) => {
                if replica.shutdown.is_stopping() {
                    let _ = incarnation.raft.shutdown().await;
                    return false;
                }
                replica.raft.replace(incarnation);
                spawn_raft_tasks(replica, &recovery.tasks);
                tracing::info!(
                    id = replica.id,
                    "the data directory has room again: reopened the log and restarted Raft \
                     in place; rejoining the cluster as the same voter"
                );
                return true;
            }
            Err(ReopenError::Damaged(e)) => {
                tracing::error!(
                    id = replica.id,
                    "cannot rejoin after the full disk: {e}. This member stays out of Raft; \
                     check the disk, then restart it"
                );
                return false;
            }
            // Most likely the disk filled up again, or the old handle's
            // file lock is not released yet: try again.
            Err(ReopenError::Retry(e)) => tracing::warn!(
                id = replica.id,
                "reopening the log after the full disk failed, retrying: {e}"
            ),
        }
    }
}
