//! The run's history as it is being recorded: the [`Recorder`] plus a few
//! *backdated* invocations, merged in time order at the end.
//!
//! Why backdating: a session's end is recorded as a `lost`/`expire` op whose
//! window starts at the instant the client observed the loss (its deadline
//! after the last successful keepalive, or a `session_not_found` answer),
//! but the client records it only when it has finished what it was doing
//! (an op in flight, a paused increment). The op is recorded by a fresh
//! process (see
//! [`crate::workload::session`]), so no other op of that process can sit
//! inside the window; the invocation is kept aside with its real time and
//! slotted into place when the history is built.

use std::sync::Mutex;

use crate::api::ApiError;
use crate::history::{Event, EventType, History, HistoryError, Process, Recorder, Value, F};

/// A thread-safe run log.
#[derive(Debug, Default)]
pub struct RunLog {
    /// Everything recorded live.
    recorder: Recorder,
    /// Invocations recorded with a time in the past.
    backdated: Mutex<Vec<Event>>,
}

/// The invoke of one client operation, kept to record its completion.
#[derive(Debug, Clone)]
pub struct Call {
    /// The process.
    pub pid: u64,
    /// The function.
    pub f: F,
    /// The key.
    pub key: String,
    /// The invocation's value (also the completion's, unless ok says else).
    pub value: Value,
    /// Fencing token carried by the op, if any.
    pub token: Option<u64>,
}

impl RunLog {
    /// Starts the run clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.recorder.now()
    }

    /// Records a nemesis event (`start`/`stop`, value = fault name).
    pub fn nemesis(&self, f: F, name: &str) {
        self.recorder
            .record(Event::new(Process::Nemesis, EventType::Info, f, name));
    }

    /// Records the invocation of `call` now.
    pub fn invoke(&self, call: &Call) {
        self.recorder
            .record(self.event(call, EventType::Invoke, call.value.clone(), None));
    }

    /// Records the invocation of `call` as if it happened at `time`
    /// (nanoseconds since the run started, not in the future). The process
    /// must have no other event before its completion.
    pub fn invoke_at(&self, call: &Call, time: u64) {
        let event = self
            .event(call, EventType::Invoke, call.value.clone(), None)
            .at(time.min(self.now()));
        self.backdated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    /// Records `call` as ok with the given result.
    pub fn ok(&self, call: &Call, value: impl Into<Value>) {
        self.recorder
            .record(self.event(call, EventType::Ok, value.into(), None));
    }

    /// Records `call` as definitely not applied.
    pub fn fail(&self, call: &Call, error: &str) {
        self.recorder
            .record(self.event(call, EventType::Fail, call.value.clone(), Some(error)));
    }

    /// Records `call` as of unknown outcome.
    pub fn info(&self, call: &Call, error: &str) {
        self.recorder
            .record(self.event(call, EventType::Info, call.value.clone(), Some(error)));
    }

    /// Records `fail` or `info` for an API error, as the reply said.
    pub fn failed(&self, call: &Call, definite: bool, error: &ApiError) {
        if definite {
            self.fail(call, &error.text());
        } else {
            self.info(call, &error.text());
        }
    }

    fn event(&self, call: &Call, kind: EventType, value: Value, error: Option<&str>) -> Event {
        let mut e = Event::new(Process::Client(call.pid), kind, call.f.clone(), value)
            .with_key(call.key.clone());
        if let Some(t) = call.token {
            e = e.with_token(t);
        }
        if let Some(err) = error {
            e = e.with_error(err);
        }
        e
    }

    /// The history so far: live events and backdated invocations in time
    /// order (a backdated event goes before live ones of the same time),
    /// re-indexed.
    pub fn history(&self) -> Result<History, HistoryError> {
        let live = self.recorder.snapshot();
        let mut backdated = self
            .backdated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        backdated.sort_by_key(|e| e.time);
        let mut merged = Vec::with_capacity(live.len() + backdated.len());
        let mut pending = backdated.into_iter().peekable();
        for event in live.events() {
            while let Some(b) = pending.next_if(|b| b.time <= event.time) {
                merged.push(b);
            }
            merged.push(event.clone());
        }
        merged.extend(pending);
        for (i, e) in merged.iter_mut().enumerate() {
            e.index = i as u64;
        }
        History::from_events(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backdated_invokes_are_merged_in_time_order() {
        let log = RunLog::new();
        let a = Call {
            pid: 1,
            f: F::Acquire,
            key: "l".into(),
            value: Value::Nil,
            token: None,
        };
        log.invoke(&a);
        let floor = log.now();
        log.ok(&a, Value::Nil);
        let expire = Call {
            pid: 2,
            f: F::Expire,
            key: "l".into(),
            value: Value::Int(1),
            token: None,
        };
        log.invoke_at(&expire, floor);
        log.ok(&expire, Value::Int(1));
        let h = log.history().unwrap();
        let kinds: Vec<(u64, String)> = h
            .events()
            .iter()
            .map(|e| (e.index, format!("{} {}", e.process, e.kind.as_str())))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (0, "1 invoke".to_string()),
                (1, "2 invoke".to_string()),
                (2, "1 ok".to_string()),
                (3, "2 ok".to_string()),
            ]
        );
        assert_eq!(h.operations().unwrap().len(), 2);
    }
}
