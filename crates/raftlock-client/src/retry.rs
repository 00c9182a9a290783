//! Bounded retries with capped, jittered exponential backoff.

use std::time::Duration;

/// How often and how patiently a transport retries what is safe to retry
/// (`no_leader`, an unreachable endpoint, a lost answer to an idempotent
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per operation, the first included (at least 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubles each attempt.
    pub initial_backoff: Duration,
    /// Cap on one pause.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Six attempts, pausing 50, 100, 200, 400, 800 ms (each jittered down
    /// by up to half): about 1.5 s in all, enough to ride out a Raft
    /// election (the servers themselves wait up to `leader_wait_ms` for a
    /// leader before answering `no_leader`).
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// The pause before attempt `attempt` (0-based; none before the first):
    /// `initial * 2^(attempt-1)`, capped, then scaled by a random factor in
    /// [0.5, 1] so clients that failed together do not retry together.
    pub fn backoff(&self, attempt: u32) -> Duration {
        if attempt == 0 {
            return Duration::ZERO;
        }
        let doublings = (attempt - 1).min(16);
        let full = self
            .initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff);
        full.mul_f64(rand::random_range(0.5..=1.0))
    }

    /// Attempts, at least one.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_jitters_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(0), Duration::ZERO);
        for attempt in 1..30 {
            let full = (p.initial_backoff * (1u32 << (attempt - 1).min(16))).min(p.max_backoff);
            let b = p.backoff(attempt);
            assert!(b >= full / 2 && b <= full, "attempt {attempt}: {b:?}");
        }
        let none = RetryPolicy { attempts: 0, ..p };
        assert_eq!(none.attempts(), 1);
    }
}
