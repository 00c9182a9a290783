//! [`InlineSync`]: lets the code that answers a follower's append ask the
//! log store to sync that append on the thread that writes it.
//!
//! Why: a follower cannot answer an append before the entries are durable,
//! so handing the `fdatasync` to the sync worker only adds two thread
//! hand-offs per write (waking the worker, then being woken by it), each a
//! futex wake and a context switch (docs/benchmarks.md, issue 11). A
//! leader must keep handing it off: its sync overlaps the replication to
//! its followers, which openraft sends only after `append` returns
//! (`DurableIndex`).
//!
//! The barrier run in place is the sync worker's own, under its lock
//! (`SyncWorker::sync_here`): the same failure stickiness, fault injection
//! and durable-index updates. When anything is queued for the worker, a
//! barrier is running, or barriers are stalled, the append queues for the
//! worker as usual.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Shared switch, taken from the store before it is handed to openraft
/// ([`SledLogStore::inline_sync`](crate::SledLogStore::inline_sync)). While
/// an [`InlineSyncGuard`] lives, the store's appends run their durability
/// barrier in the appending thread (blocking it for the disk's round trip)
/// when nothing else is queued.
#[derive(Clone, Default, Debug)]
pub struct InlineSync(Arc<AtomicUsize>);

impl InlineSync {
    /// Appends sync in place until the guard is dropped. Guards nest (a
    /// count, not a flag), so overlapping callers do not disarm each other.
    pub fn arm(&self) -> InlineSyncGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        InlineSyncGuard(self.clone())
    }

    /// Whether some guard is alive.
    pub(crate) fn armed(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

/// Keeps [`InlineSync`] armed; disarms on drop (also when the future that
/// holds it is cancelled).
#[derive(Debug)]
pub struct InlineSyncGuard(InlineSync);

impl Drop for InlineSyncGuard {
    fn drop(&mut self) {
        (self.0).0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armed_while_any_guard_lives() {
        let inline = InlineSync::default();
        assert!(!inline.armed());
        let first = inline.arm();
        let second = inline.clone().arm();
        drop(first);
        assert!(inline.armed(), "the second guard still holds it");
        drop(second);
        assert!(!inline.armed());
    }
}
