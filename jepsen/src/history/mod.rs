//! The history model: events as recorded, operations as checked.
//!
//! A run records [`Event`]s (invoke, then ok/fail/info) into a [`History`].
//! Checkers do not look at events directly: they pair them into
//! [`Operation`]s with a call time and a return time, where an `info`
//! completion returns "at infinity" (it may take effect any time later).

mod edn;
mod event;
mod jsonl;
mod ops;
mod recorder;
mod value;

pub use event::{Event, EventType, Process, F};
pub use ops::{fmt_ns, Fault, Operation, Outcome};
pub use recorder::Recorder;
pub use value::Value;

use std::path::PathBuf;

/// Why a history could not be read or interpreted.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading or writing the file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line is not a valid event.
    #[error("line {line}: {source}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What serde said.
        source: serde_json::Error,
    },
    /// Event indexes must strictly increase through the file.
    #[error("event index {index} does not follow {previous}")]
    IndexOrder {
        /// The offending index.
        index: u64,
        /// The index before it.
        previous: u64,
    },
    /// A completion from a process with no operation in flight.
    #[error("event {index}: {kind} for process {process} without a pending invoke")]
    UnmatchedCompletion {
        /// Index of the completion.
        index: u64,
        /// Its process.
        process: Process,
        /// Its type.
        kind: &'static str,
    },
    /// A completion whose function differs from the pending invoke's.
    #[error("event {index}: completion f={got} does not match invoke {invoke} f={expected}")]
    MismatchedCompletion {
        /// Index of the completion.
        index: u64,
        /// Index of the invoke it should complete.
        invoke: u64,
        /// The invoke's f.
        expected: F,
        /// The completion's f.
        got: F,
    },
    /// A process invoked again while its previous operation was pending.
    #[error("event {index}: process {process} invoked while operation {pending} is pending")]
    DoubleInvoke {
        /// Index of the second invoke.
        index: u64,
        /// The process.
        process: Process,
        /// Index of the pending invoke.
        pending: u64,
    },
    /// A completion earlier than its own invocation.
    #[error("event {index}: completes at {time} ns, before its invoke at {invoke_time} ns")]
    TimeTravel {
        /// Index of the completion.
        index: u64,
        /// Completion time.
        time: u64,
        /// Invocation time.
        invoke_time: u64,
    },
}

/// An ordered list of events: everything a run observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    events: Vec<Event>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wraps recorded events, checking that indexes strictly increase (the
    /// only order checkers rely on besides times).
    pub fn from_events(events: Vec<Event>) -> Result<Self, HistoryError> {
        for pair in events.windows(2) {
            if pair[1].index <= pair[0].index {
                return Err(HistoryError::IndexOrder {
                    index: pair[1].index,
                    previous: pair[0].index,
                });
            }
        }
        Ok(History { events })
    }

    /// Appends an event, giving it the next index. Its time is kept as set.
    pub fn push(&mut self, mut event: Event) -> u64 {
        let index = self.events.last().map_or(0, |e| e.index + 1);
        event.index = index;
        self.events.push(event);
        index
    }

    /// The events in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when there are no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The latest event time, i.e. the run's length in nanoseconds.
    pub fn end_time(&self) -> u64 {
        self.events.iter().map(|e| e.time).max().unwrap_or(0)
    }

    /// Client operations (nemesis excluded): each invoke paired with the
    /// next completion of its process; an invoke that never completes is
    /// `info`. Malformed histories (a completion without invoke, a second
    /// invoke while one is pending, mismatched `f`, a completion before its
    /// invoke) are errors, never guesses.
    pub fn operations(&self) -> Result<Vec<Operation>, HistoryError> {
        ops::pair(&self.events)
    }

    /// Fault intervals from the nemesis's start/stop events.
    pub fn faults(&self) -> Vec<Fault> {
        ops::faults(&self.events)
    }
}
