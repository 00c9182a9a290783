//! A thread-safe event log for the run driver.

use super::{Event, History};
use std::sync::Mutex;
use std::time::Instant;

/// Records events from concurrent clients and the nemesis.
///
/// The time and the index are taken together under one lock, so index
/// order and time order always agree: checkers may rely on either. Times
/// come from a monotonic clock started when the recorder was created.
#[derive(Debug)]
pub struct Recorder {
    /// Run start: every event time is measured from here.
    start: Instant,
    /// The log; a std mutex because it is held only for a push.
    history: Mutex<History>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// Starts the run clock now.
    pub fn new() -> Self {
        Recorder {
            start: Instant::now(),
            history: Mutex::new(History::new()),
        }
    }

    /// Stamps `event` with the next index and the current time, appends it
    /// and returns its index. Any time set on `event` is overwritten.
    pub fn record(&self, mut event: Event) -> u64 {
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        event.time = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        h.push(event)
    }

    /// Nanoseconds since the run started (for pacing decisions).
    pub fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The recorded history, consuming the recorder.
    pub fn into_history(self) -> History {
        self.history.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventType, Process, F};

    #[test]
    fn indexes_and_times_increase_together() {
        let r = Recorder::new();
        std::thread::scope(|s| {
            for p in 0..4 {
                let r = &r;
                s.spawn(move || {
                    for _ in 0..50 {
                        r.record(Event::new(
                            Process::Client(p),
                            EventType::Invoke,
                            F::Read,
                            (),
                        ));
                        r.record(Event::new(Process::Client(p), EventType::Ok, F::Read, 1));
                    }
                });
            }
        });
        let h = r.into_history();
        assert_eq!(h.len(), 400);
        for (i, pair) in h.events().windows(2).enumerate() {
            assert_eq!(pair[0].index, i as u64);
            assert!(pair[0].time <= pair[1].time);
        }
        assert_eq!(h.operations().unwrap().len(), 200);
    }
}
