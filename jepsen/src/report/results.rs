//! `results.json` and the one-screen text summary.

use crate::checker::{CheckResult, Verdict};
use crate::history::{Fault, History, Operation, Outcome};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many ops of one function ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Definitely happened.
    pub ok: usize,
    /// Definitely did not happen.
    pub fail: usize,
    /// Unknown outcome.
    pub info: usize,
}

/// Everything `results.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct RunResults {
    /// All checkers combined: `valid` only if every checker is.
    pub verdict: Verdict,
    /// Events in the history.
    pub events: usize,
    /// Client operations.
    pub operations: usize,
    /// Length of the run in milliseconds.
    pub duration_ms: f64,
    /// Outcome counts per function.
    pub counts: BTreeMap<String, Counts>,
    /// Faults the nemesis injected.
    pub faults: Vec<Fault>,
    /// Each checker's result.
    pub checkers: Vec<CheckResult>,
}

impl RunResults {
    /// Summarizes a checked history.
    pub fn new(history: &History, ops: &[Operation], checkers: &[CheckResult]) -> Self {
        RunResults {
            verdict: overall(checkers),
            events: history.len(),
            operations: ops.len(),
            duration_ms: history.end_time() as f64 / 1e6,
            counts: counts(ops),
            faults: history.faults(),
            checkers: checkers.to_vec(),
        }
    }

    /// The one-screen summary printed by `check` and at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} events, {} operations over {:.3} s",
            self.events,
            self.operations,
            self.duration_ms / 1e3
        );
        for (f, c) in &self.counts {
            let _ = writeln!(
                s,
                "  {f:<10} ok {:>7}  fail {:>7}  info {:>7}",
                c.ok, c.fail, c.info
            );
        }
        if !self.faults.is_empty() {
            let _ = writeln!(s, "faults: {}", self.faults.len());
            for f in self.faults.iter().take(10) {
                let end = f
                    .end
                    .map_or("end".to_string(), |e| format!("{:.3} s", e as f64 / 1e9));
                let _ = writeln!(s, "  {:<24} {:.3} s .. {end}", f.name, f.start as f64 / 1e9);
            }
            if self.faults.len() > 10 {
                let _ = writeln!(s, "  ... {} more", self.faults.len() - 10);
            }
        }
        for c in &self.checkers {
            let _ = writeln!(
                s,
                "{:<24} {:<8} {}",
                c.checker,
                c.verdict.to_string(),
                c.summary
            );
            if let Some(e) = &c.explanation {
                for line in e.lines().take(30) {
                    let _ = writeln!(s, "    {line}");
                }
            }
        }
        let _ = writeln!(s, "verdict: {}", self.verdict);
        s
    }
}

/// Every checker's verdict combined (an empty list is `Unknown`: nothing
/// was checked, so nothing is known).
pub fn overall(checkers: &[CheckResult]) -> Verdict {
    if checkers.is_empty() {
        return Verdict::Unknown;
    }
    Verdict::all(checkers.iter().map(|c| c.verdict))
}

/// Outcome counts per function.
pub fn counts(ops: &[Operation]) -> BTreeMap<String, Counts> {
    let mut m: BTreeMap<String, Counts> = BTreeMap::new();
    for op in ops {
        let c = m.entry(op.f.to_string()).or_default();
        match op.outcome {
            Outcome::Ok => c.ok += 1,
            Outcome::Fail => c.fail += 1,
            Outcome::Info => c.info += 1,
        }
    }
    m
}
