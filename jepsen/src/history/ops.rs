//! Pairing events into operations, and nemesis events into fault intervals.

use super::{Event, EventType, HistoryError, Process, Value, F};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Definitely happened, with the completion's value.
    Ok,
    /// Definitely did not happen. Linearizability drops these.
    Fail,
    /// Unknown: completed `info`, or never completed before the history
    /// ended. May take effect at any time after the invocation, or never.
    Info,
}

/// A client operation: an invocation paired with its completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// Index of the invoke event: the op's stable id in reports.
    pub index: u64,
    /// Index of the completion event, if any.
    pub complete_index: Option<u64>,
    /// The client process (never the nemesis).
    pub process: Process,
    /// The function.
    pub f: F,
    /// The key, from the invocation (or the completion if only it has one).
    pub key: Option<String>,
    /// The argument given at invocation.
    pub invoke_value: Value,
    /// The result on `ok`; the invocation's value otherwise.
    pub value: Value,
    /// ok / fail / info.
    pub outcome: Outcome,
    /// Invocation time (ns since run start).
    pub call: u64,
    /// Return time for linearizability: the completion time for ok/fail,
    /// `None` (infinity) for info.
    pub ret: Option<u64>,
    /// When the completion event was recorded, even for info (for plots);
    /// `None` if the op never completed.
    pub completed_at: Option<u64>,
    /// Fencing token: the completion's if it has one, else the invocation's.
    pub token: Option<u64>,
    /// Error text of the completion, if any.
    pub error: Option<String>,
}

impl Operation {
    /// True when the completion was `ok`.
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// True when the outcome is unknown.
    pub fn is_info(&self) -> bool {
        self.outcome == Outcome::Info
    }

    /// Latency in nanoseconds up to the recorded completion, if any.
    pub fn latency(&self) -> Option<u64> {
        self.completed_at.map(|t| t.saturating_sub(self.call))
    }
}

/// One line a human can read: `p3 cas x [1 2] -> ok true @1.200ms..3.400ms`.
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} p{} {}", self.index, self.process, self.f)?;
        if let Some(k) = &self.key {
            write!(f, " {k}")?;
        }
        if !self.invoke_value.is_nil() {
            write!(f, " {}", self.invoke_value)?;
        }
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        };
        write!(f, " -> {outcome}")?;
        if self.is_ok() && (!self.value.is_nil() || self.f == F::Read) {
            write!(f, " {}", self.value)?;
        }
        if let Some(t) = self.token {
            write!(f, " token={t}")?;
        }
        match self.ret {
            Some(r) => write!(f, " @{}..{}", fmt_ns(self.call), fmt_ns(r)),
            None => write!(f, " @{}..inf", fmt_ns(self.call)),
        }
    }
}

/// A time for humans, in the largest unit that keeps it above 1:
/// `850ns`, `12.5us`, `3.250ms`, `1.500000s`.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3}ms", ns as f64 / 1e6),
        _ => format!("{:.6}s", ns as f64 / 1e9),
    }
}

/// Pairs each client invoke with the next completion of the same process.
///
/// Nemesis events are skipped. An invoke that never completes becomes an
/// `info` op (the run ended while it was in flight). Malformed histories are
/// errors, not guesses: a completion without invoke, a completion with a
/// different `f`, a second invoke while one is pending, or a completion
/// earlier than its invoke.
pub fn pair(events: &[Event]) -> Result<Vec<Operation>, HistoryError> {
    let mut ops: Vec<Operation> = Vec::new();
    let mut pending: HashMap<Process, usize> = HashMap::new();
    for e in events {
        if e.process.is_nemesis() {
            continue;
        }
        match e.kind {
            EventType::Invoke => {
                if let Some(&slot) = pending.get(&e.process) {
                    return Err(HistoryError::DoubleInvoke {
                        index: e.index,
                        process: e.process,
                        pending: ops[slot].index,
                    });
                }
                pending.insert(e.process, ops.len());
                ops.push(Operation {
                    index: e.index,
                    complete_index: None,
                    process: e.process,
                    f: e.f.clone(),
                    key: e.key.clone(),
                    invoke_value: e.value.clone(),
                    value: e.value.clone(),
                    outcome: Outcome::Info,
                    call: e.time,
                    ret: None,
                    completed_at: None,
                    token: e.token,
                    error: None,
                });
            }
            EventType::Ok | EventType::Fail | EventType::Info => {
                let slot = pending
                    .remove(&e.process)
                    .ok_or(HistoryError::UnmatchedCompletion {
                        index: e.index,
                        process: e.process,
                        kind: e.kind.as_str(),
                    })?;
                complete(&mut ops[slot], e)?;
            }
        }
    }
    Ok(ops)
}

fn complete(op: &mut Operation, e: &Event) -> Result<(), HistoryError> {
    if op.f != e.f {
        return Err(HistoryError::MismatchedCompletion {
            index: e.index,
            invoke: op.index,
            expected: op.f.clone(),
            got: e.f.clone(),
        });
    }
    if e.time < op.call {
        return Err(HistoryError::TimeTravel {
            index: e.index,
            time: e.time,
            invoke_time: op.call,
        });
    }
    op.complete_index = Some(e.index);
    op.completed_at = Some(e.time);
    op.error.clone_from(&e.error);
    if op.key.is_none() {
        op.key.clone_from(&e.key);
    }
    if e.token.is_some() {
        op.token = e.token;
    }
    match e.kind {
        EventType::Ok => {
            op.outcome = Outcome::Ok;
            op.value = e.value.clone();
            op.ret = Some(e.time);
        }
        EventType::Fail => {
            op.outcome = Outcome::Fail;
            op.ret = Some(e.time);
        }
        EventType::Info | EventType::Invoke => {
            op.outcome = Outcome::Info;
            op.ret = None;
        }
    }
    Ok(())
}

/// A fault the nemesis had active during `[start, end]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// The fault's name, e.g. `partition-majority` or `kill n2`.
    pub name: String,
    /// When the first `start` event for it was recorded.
    pub start: u64,
    /// When the last `stop` event for it was recorded; `None` if it was
    /// still active when the history ended.
    pub end: Option<u64>,
}

/// Collects fault intervals from nemesis events.
///
/// A fault is named by its event's value (a string, or any value rendered
/// as text). The interval runs from its first `start` event to the last
/// `stop` event that follows, so both Jepsen styles work: a single `info`
/// event per transition, or an `invoke` + `info` pair for each.
pub fn faults(events: &[Event]) -> Vec<Fault> {
    let mut out: Vec<Fault> = Vec::new();
    let mut active: HashMap<String, usize> = HashMap::new();
    let mut last_stopped: HashMap<String, usize> = HashMap::new();
    for e in events.iter().filter(|e| e.process.is_nemesis()) {
        let name = fault_name(&e.value);
        match e.f {
            // A repeated start (e.g. the info after an invoke) changes nothing.
            F::Start if !active.contains_key(&name) => {
                active.insert(name.clone(), out.len());
                last_stopped.remove(&name);
                out.push(Fault {
                    name,
                    start: e.time,
                    end: None,
                });
            }
            F::Stop => {
                if let Some(slot) = active.remove(&name) {
                    out[slot].end = Some(e.time);
                    last_stopped.insert(name, slot);
                } else if let Some(&slot) = last_stopped.get(&name) {
                    // The completion of a stop we already saw invoked.
                    out[slot].end = Some(e.time);
                }
            }
            _ => {}
        }
    }
    out
}

fn fault_name(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Nil => "fault".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;

    fn ev(p: u64, kind: EventType, f: F, v: impl Into<Value>, t: u64) -> Event {
        Event::new(Process::Client(p), kind, f, v).at(t)
    }

    #[test]
    fn pairs_by_process_and_marks_outcomes() {
        let mut h = History::new();
        h.push(ev(1, EventType::Invoke, F::Write, 1, 0));
        h.push(ev(2, EventType::Invoke, F::Read, Value::Nil, 1));
        h.push(ev(2, EventType::Ok, F::Read, 1, 5));
        h.push(ev(1, EventType::Info, F::Write, 1, 9).with_error("timeout"));
        h.push(ev(3, EventType::Invoke, F::Write, 2, 10));
        h.push(ev(3, EventType::Fail, F::Write, 2, 11));
        h.push(ev(4, EventType::Invoke, F::Write, 3, 12));
        let ops = h.operations().unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!(
            (ops[0].outcome, ops[0].ret, ops[0].completed_at),
            (Outcome::Info, None, Some(9))
        );
        assert_eq!(ops[0].error.as_deref(), Some("timeout"));
        assert_eq!(
            (ops[1].outcome, ops[1].ret, ops[1].value.clone()),
            (Outcome::Ok, Some(5), Value::Int(1))
        );
        assert_eq!(ops[2].outcome, Outcome::Fail);
        assert_eq!((ops[3].outcome, ops[3].completed_at), (Outcome::Info, None));
    }

    #[test]
    fn malformed_histories_are_errors() {
        let mut h = History::new();
        h.push(ev(1, EventType::Ok, F::Write, 1, 0));
        assert!(matches!(
            h.operations(),
            Err(HistoryError::UnmatchedCompletion { .. })
        ));

        let mut h = History::new();
        h.push(ev(1, EventType::Invoke, F::Write, 1, 0));
        h.push(ev(1, EventType::Invoke, F::Write, 1, 1));
        assert!(matches!(
            h.operations(),
            Err(HistoryError::DoubleInvoke { .. })
        ));

        let mut h = History::new();
        h.push(ev(1, EventType::Invoke, F::Write, 1, 0));
        h.push(ev(1, EventType::Ok, F::Read, 1, 1));
        assert!(matches!(
            h.operations(),
            Err(HistoryError::MismatchedCompletion { .. })
        ));

        let mut h = History::new();
        h.push(ev(1, EventType::Invoke, F::Write, 1, 5));
        h.push(ev(1, EventType::Ok, F::Write, 1, 4));
        assert!(matches!(
            h.operations(),
            Err(HistoryError::TimeTravel { .. })
        ));
    }

    #[test]
    fn nemesis_is_not_an_operation_and_faults_pair_up() {
        let mut h = History::new();
        h.push(Event::new(Process::Nemesis, EventType::Invoke, F::Start, "partition").at(1));
        h.push(Event::new(Process::Nemesis, EventType::Info, F::Start, "partition").at(2));
        h.push(ev(1, EventType::Invoke, F::Read, Value::Nil, 3));
        h.push(Event::new(Process::Nemesis, EventType::Invoke, F::Stop, "partition").at(4));
        h.push(Event::new(Process::Nemesis, EventType::Info, F::Stop, "partition").at(6));
        h.push(Event::new(Process::Nemesis, EventType::Info, F::Start, "kill n1").at(7));
        h.push(ev(1, EventType::Ok, F::Read, Value::Nil, 8));
        assert_eq!(h.operations().unwrap().len(), 1);
        assert_eq!(
            h.faults(),
            vec![
                Fault {
                    name: "partition".into(),
                    start: 1,
                    end: Some(6)
                },
                Fault {
                    name: "kill n1".into(),
                    start: 7,
                    end: None
                },
            ]
        );
    }
}
