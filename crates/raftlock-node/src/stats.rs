//! Counters of what operators alert on, kept where it happens and read
//! through [`Node::counters`](crate::Node::counters) by the API's
//! `/metrics`: session expiries, leader changes, commit latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Updated by the leader task (`leader.rs`) and the leader's write path
/// (`replica/at_leader.rs`).
#[derive(Debug, Default)]
pub(crate) struct OpStats {
    sessions_expired: AtomicU64,
    leader_changes: AtomicU64,
    commits: AtomicU64,
    commit_micros: AtomicU64,
}

impl OpStats {
    /// `n` sessions were expired by this node as leader.
    pub fn expired(&self, n: u64) {
        self.sessions_expired.fetch_add(n, Ordering::Relaxed);
    }

    /// This node saw a new leader.
    pub fn leader_changed(&self) {
        self.leader_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// A proposal this node led was committed and applied after `took`.
    pub fn committed(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// (sessions expired, leader changes, commits, commit µs).
    pub fn read(&self) -> (u64, u64, u64, u64) {
        (
            self.sessions_expired.load(Ordering::Relaxed),
            self.leader_changes.load(Ordering::Relaxed),
            self.commits.load(Ordering::Relaxed),
            self.commit_micros.load(Ordering::Relaxed),
        )
    }
}
