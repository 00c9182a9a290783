//! The member's current Raft instance and its log store's durability,
//! which a member rebuilds in place after its disk filled up
//! (`storage_watch.rs`): openraft stops for good after a storage error,
//! and sled 0.34 fails every write after one failed write until the
//! database is reopened, so recovery means a new log store handle and a
//! new Raft over the same in-memory state machine.
//!
//! Everything that talks to Raft takes the current instance from here at
//! the moment it needs it. An operation that started on the old instance
//! ends with that instance's error (it never reaches the new one), exactly
//! as when a member stops: it is answered `no_leader`, `outcome_unknown`
//! or `disk_full`, never as a success.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use openraft::metrics::RaftMetrics;
use raftlock_storage::{DurableIndex, SyncMeter, SyncStall};
use tokio::sync::watch;

use crate::raft::typ::{Member, NodeId, Raft};

/// One life of the member's Raft: the instance, and the log store handle
/// it was built on (seen through its durability and fault hooks).
pub(crate) struct Incarnation {
    pub raft: Raft,
    /// How far this instance's log is on disk (gates append
    /// acknowledgements, apply and the commit index sent to followers).
    pub durable: DurableIndex,
    /// Fault injection on this log store's barrier (read only by the
    /// `fault-injection` hooks).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub sync_stall: SyncStall,
    /// This log store's barrier counters.
    pub sync_meter: SyncMeter,
}

/// The current [`Incarnation`], replaced only by the storage supervisor.
pub(crate) struct RaftSlot {
    current: RwLock<Arc<Incarnation>>,
    /// Replacements since start.
    replaced: AtomicU64,
}

impl RaftSlot {
    pub fn new(first: Incarnation) -> Self {
        RaftSlot {
            current: RwLock::new(Arc::new(first)),
            replaced: AtomicU64::new(0),
        }
    }

    /// The current incarnation. Hold it (rather than asking twice) when two
    /// steps must concern the same log store, e.g. an append and the wait
    /// for its durability.
    pub fn get(&self) -> Arc<Incarnation> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The current Raft instance (a cheap handle clone).
    pub fn current(&self) -> Raft {
        self.get().raft.clone()
    }

    /// The current log store's durability.
    pub fn durable(&self) -> DurableIndex {
        self.get().durable.clone()
    }

    /// The current instance's metrics.
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics<NodeId, Member>> {
        self.get().raft.metrics()
    }

    /// Makes `next` the current incarnation.
    pub fn replace(&self, next: Incarnation) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        self.replaced.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the incarnation was replaced since start.
    pub fn recoveries(&self) -> u64 {
        self.replaced.load(Ordering::Relaxed)
    }
}
