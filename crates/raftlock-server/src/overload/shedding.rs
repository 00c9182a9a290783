//! Fewer client connections while the member's runtime falls behind.
//!
//! Why: with less CPU than its connections need, a member's runtime polls
//! the crowd's connections in turn with Raft's heartbeats, votes and
//! leadership confirmations, which share it. Those come late: the
//! leader's confirmations time out, followers start elections, and a held
//! lock is lost although every limit held (docs/overload.md, "The renewal
//! storm with release members, and the CPU below which the held lock is lost": at half the
//! CPU, 4,096 connections per member lost it where 512 and 1,024 kept it).
//! The right number of connections depends on the CPU a member gets,
//! which no fixed `max_connections` knows.
//!
//! How: a task asks to wake every [`TICK`] and measures how late it wakes,
//! which is how long a ready task waits for a worker. While it wakes more
//! than [`BEHIND`] late, the member's connection limit is cut, at most
//! once per [`STEP_EVERY`] and never below [`FLOOR`]: halved at
//! [`BEHIND`], and in proportion deeper the later it wakes. While every
//! wake in a [`STEP_EVERY`] is within [`CALM`], the limit grows back by a
//! thirty-second of `max_connections`. Past the limit:
//! - a new connection is treated as past the cap (`overflow.rs`: `503
//!   overloaded` with `Retry-After`, a holder's keepalive still served);
//! - an open connection whose request is answered while more connections
//!   are open than the limit is closed after that answer
//!   (`Connection: close`), unless the request was a keepalive of a
//!   session that owns nodes (`admission.rs`). A client reconnects, and
//!   meets the limit.
//!
//! Idle connections cost no CPU and delay nothing: they are never closed
//! here, and a member with thousands of them does not fall behind.
//!
//! The measuring task sleeps while at most [`FLOOR`] connections are open
//! and the limit is `max_connections`: then there is nothing to shed.
//! Ticking all the time cost 2–13 % more CPU per lock cycle with 64
//! clients in an A/B of the same build with and without it (docs/adr/0012-shed-connections-when-the-runtime-lags.md).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

/// How often the runtime is asked to wake the measuring task.
pub(crate) const TICK: Duration = Duration::from_millis(20);
/// Woken this late: the runtime is behind, the limit is halved.
pub(crate) const BEHIND: Duration = Duration::from_millis(100);
/// Woken within this: the runtime keeps up, the limit grows back.
pub(crate) const CALM: Duration = Duration::from_millis(50);
/// At most one change of the limit per this long, so the effect of one
/// change is measured before the next.
pub(crate) const STEP_EVERY: Duration = Duration::from_millis(100);
/// The limit never goes below this (or `max_connections`, if lower).
pub(crate) const FLOOR: usize = 64;

/// The connection limit of one listener and what it is measured against.
pub(crate) struct Shedding {
    /// Connections served now, at most `max`.
    limit: AtomicUsize,
    max: usize,
    /// The listener's connection slots (`overflow::Slots`): those taken
    /// are the connections open.
    slots: Option<Arc<Semaphore>>,
    /// The measuring task ticks (more than [`FLOOR`] open, or shedding).
    awake: AtomicBool,
    wake: Notify,
}

impl Shedding {
    /// Sheds nothing: a router served without `serve`, which has no
    /// connection slots.
    pub(crate) fn off() -> Arc<Shedding> {
        Arc::new(Shedding {
            limit: AtomicUsize::new(usize::MAX),
            max: usize::MAX,
            slots: None,
            awake: AtomicBool::new(false),
            wake: Notify::new(),
        })
    }

    /// For a listener with `max` connection slots in `slots`.
    pub(crate) fn new(max: usize, slots: Arc<Semaphore>) -> Arc<Shedding> {
        Arc::new(Shedding {
            limit: AtomicUsize::new(max),
            max,
            slots: Some(slots),
            awake: AtomicBool::new(false),
            wake: Notify::new(),
        })
    }

    /// Connections served now.
    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.slots
            .as_ref()
            .map_or(0, |s| self.max.saturating_sub(s.available_permits()))
    }

    /// (open, limit) for `/metrics`; none for a router without `serve`.
    pub(crate) fn gauges(&self) -> Option<(usize, usize)> {
        self.slots.as_ref().map(|_| (self.open(), self.limit()))
    }

    /// Called after a connection was admitted: wakes the measuring task
    /// once more than [`FLOOR`] are open.
    pub(crate) fn admitted(&self) {
        if !self.awake.load(Ordering::Relaxed) && self.open() > self.floor() {
            self.awake.store(true, Ordering::Relaxed);
            // Stores a permit if the task is not waiting yet: no lost wake.
            self.wake.notify_one();
        }
    }

    fn floor(&self) -> usize {
        FLOOR.min(self.max)
    }

    /// True when more connections are open than the limit.
    pub(crate) fn over(&self) -> bool {
        self.open() > self.limit()
    }

    /// Measures the runtime it runs on until `stopped` completes,
    /// adjusting the limit once per [`STEP_EVERY`] by the latest wake in
    /// that time (see the module's docs).
    pub(crate) async fn run(self: Arc<Self>, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        let mut window = Instant::now();
        let mut latest = Duration::ZERO;
        loop {
            if !self.awake.load(Ordering::Relaxed) {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = &mut stopped => return,
                }
                window = Instant::now();
                latest = Duration::ZERO;
            }
            let due = Instant::now() + TICK;
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = &mut stopped => return,
            }
            let woke = Instant::now();
            latest = latest.max(woke.saturating_duration_since(due));
            if woke.duration_since(window) < STEP_EVERY {
                continue;
            }
            let before = self.limit();
            let after = next_limit(before, latest, self.max);
            if after != before {
                self.limit.store(after, Ordering::Relaxed);
                log_change(before, after, self.max, latest);
            }
            window = woke;
            latest = Duration::ZERO;
            if after == self.max && self.open() <= self.floor() {
                self.awake.store(false, Ordering::Relaxed);
                // A connection admitted meanwhile may have seen it awake.
                if self.open() > self.floor() {
                    self.awake.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The limit after a window whose latest wake was `late` behind its
/// time, from `limit`.
pub(crate) fn next_limit(limit: usize, late: Duration, max: usize) -> usize {
    let floor = FLOOR.min(max);
    if late >= BEHIND {
        // Halved at BEHIND, and the later the deeper (a quarter at twice
        // BEHIND, an eighth at four times): a storm that arrives at once
        // puts the runtime seconds behind, and halving one window at a
        // time took seconds to get down while the holder's keepalives
        // timed out (docs/overload.md).
        let keep = BEHIND.as_secs_f64() / (2.0 * late.as_secs_f64());
        ((limit as f64 * keep) as usize).max(floor)
    } else if late <= CALM {
        limit.saturating_add((max / 32).max(1)).min(max)
    } else {
        limit
    }
}

/// Says when the member starts and stops shedding, not every step.
fn log_change(before: usize, after: usize, max: usize, late: Duration) {
    if before == max {
        tracing::warn!(
            late_ms = late.as_millis() as u64,
            limit = after,
            max,
            "API falling behind its load (its runtime woke {} ms late): fewer client \
             connections served until it keeps up; the rest get 503 overloaded",
            late.as_millis()
        );
    } else if after == max {
        tracing::info!(
            max,
            "API keeps up with its load again: connection limit back to api.max_connections"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_runtime_cuts_the_limit_down_to_the_floor() {
        assert_eq!(next_limit(4_096, BEHIND, 4_096), 2_048);
        assert_eq!(next_limit(4_096, 2 * BEHIND, 4_096), 1_024);
        assert_eq!(next_limit(4_096, 4 * BEHIND, 4_096), 512);
        assert_eq!(next_limit(100, BEHIND, 4_096), FLOOR);
        assert_eq!(next_limit(FLOOR, 10 * BEHIND, 4_096), FLOOR);
        // A cap below the floor is the floor.
        assert_eq!(next_limit(8, BEHIND, 8), 8);
    }

    #[test]
    fn a_calm_runtime_grows_the_limit_back_to_the_cap() {
        assert_eq!(next_limit(64, Duration::ZERO, 4_096), 64 + 128);
        assert_eq!(next_limit(4_000, CALM, 4_096), 4_096);
        assert_eq!(next_limit(1, Duration::ZERO, 3), 2);
    }

    #[test]
    fn in_between_the_limit_holds() {
        let between = (BEHIND + CALM) / 2;
        assert_eq!(next_limit(1_000, between, 4_096), 1_000);
    }

    #[test]
    fn the_measuring_task_wakes_only_past_the_floor() {
        let slots = Arc::new(Semaphore::new(200));
        let shedding = Shedding::new(200, slots.clone());
        let _floor = slots
            .clone()
            .try_acquire_many_owned(FLOOR as u32)
            .expect("permits");
        shedding.admitted();
        assert!(
            !shedding.awake.load(Ordering::Relaxed),
            "asleep at the floor"
        );
        let _one_more = slots.clone().try_acquire_owned().expect("permit");
        shedding.admitted();
        assert!(
            shedding.awake.load(Ordering::Relaxed),
            "awake past the floor"
        );
    }

    #[test]
    fn open_connections_are_the_slots_taken() {
        let slots = Arc::new(Semaphore::new(10));
        let shedding = Shedding::new(10, slots.clone());
        let _held = slots.clone().try_acquire_many_owned(3).expect("permits");
        assert_eq!(shedding.open(), 3);
        assert!(!shedding.over());
        shedding.limit.store(2, Ordering::Relaxed);
        assert!(shedding.over());
        assert!(!Shedding::off().over());
    }
}
