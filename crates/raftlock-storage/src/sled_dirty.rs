//! Whether sled was written since the last barrier.
//!
//! The hot path (appends, committed ids) no longer writes to sled, so most
//! barriers need not flush and `fdatasync` sled's file at all: one
//! `fdatasync` of the log segment is the whole barrier. Every write to sled
//! (vote, purge pointer, metadata) sets this flag *before* its waiter is
//! queued; a barrier clears it before it flushes, so a write it did not
//! see sets it again for the next one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared flag; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct SledDirty(Arc<AtomicBool>);

impl Default for SledDirty {
    /// Dirty: the first barrier syncs whatever sled did at open.
    fn default() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }
}

impl SledDirty {
    /// A write to sled was made.
    pub(crate) fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether sled was written since the last call (and clears it).
    pub(crate) fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}
