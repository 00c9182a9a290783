//! The lock-delay checker for the `lock-delay` workload (docs/api.md,
//! "Lock-delay"): after a holder's session is lost, nobody is granted the
//! lock until the delay has passed.
//!
//! What the history can prove: a `lost` op (value = the holder's process)
//! is invoked at the instant its client stopped holding, which is no
//! later than the server's end of that session. For the deadline rule
//! that instant is (last acknowledged keepalive's send time) + TTL − a
//! margin, before the server may expire it; a client that gives a live
//! session up closes it after that instant ([`crate::workload::session`]).
//! So when the process held the lock at its loss (an ok acquire, and no
//! release invoked after it: a release of unknown outcome may have
//! freed the lock without a delay), every later grant must come at least
//! the delay after the loss; an acquire of another process that completed
//! ok sooner was granted inside the delay. `expire` ops (the cluster said
//! the session was gone, at some unknown earlier time) bound nothing and
//! are skipped.

use serde::Serialize;

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Process, Value, F};

/// A grant inside a delay.
#[derive(Debug, Clone, Serialize)]
pub struct EarlyGrant {
    /// The `lost` op of the holder.
    pub lost: u64,
    /// The acquire granted too soon.
    pub grant: u64,
    /// How long after the loss it completed (ms).
    pub after_ms: f64,
}

/// The checker's report.
#[derive(Debug, Clone, Serialize)]
pub struct LockDelayReport {
    /// Valid or invalid.
    pub verdict: Verdict,
    /// The delay the acquires asked for (ms).
    pub delay_ms: Option<u64>,
    /// Losses of a holder: each one starts a delay.
    pub held_losses: usize,
    /// The shortest gap between such a loss and the next grant (ms).
    pub shortest_gap_ms: Option<f64>,
    /// Grants inside a delay (at most 20).
    pub early: Vec<EarlyGrant>,
}

/// The lock-delay an acquire asked for.
fn delay_of(op: &Operation) -> Option<u64> {
    match &op.invoke_value {
        Value::Map(m) => m.get("lock_delay_ms")?.as_int()?.try_into().ok(),
        _ => None,
    }
}

/// Whether process `pid` held the lock at `at`: its last ok acquire
/// before `at`, with no release of it invoked after.
fn held_at(ops: &[Operation], pid: u64, at: u64) -> bool {
    let mine = |o: &&Operation| o.process == Process::Client(pid);
    let Some(granted) = ops
        .iter()
        .filter(mine)
        .filter(|o| o.f == F::Acquire && o.outcome == Outcome::Ok)
        .filter_map(|o| o.ret.filter(|r| *r <= at))
        .max()
    else {
        return false;
    };
    !ops.iter()
        .filter(mine)
        .any(|o| o.f == F::Release && o.call >= granted && o.call <= at)
}

/// Checks the history of a `lock-delay` run.
pub fn check(ops: &[Operation]) -> LockDelayReport {
    let delay_ms = ops.iter().filter(|o| o.f == F::Acquire).find_map(delay_of);
    let Some(delay) = delay_ms else {
        return LockDelayReport {
            verdict: Verdict::Unknown,
            delay_ms,
            held_losses: 0,
            shortest_gap_ms: None,
            early: Vec::new(),
        };
    };
    let delay_ns = delay * 1_000_000;
    let mut held_losses = 0;
    let mut shortest: Option<u64> = None;
    let mut early = Vec::new();
    for lost in ops.iter().filter(|o| o.f == F::Lost) {
        let Some(pid) = lost
            .invoke_value
            .as_int()
            .and_then(|p| u64::try_from(p).ok())
        else {
            continue;
        };
        if !held_at(ops, pid, lost.call) {
            continue;
        }
        held_losses += 1;
        let next = ops
            .iter()
            .filter(|o| o.f == F::Acquire && o.outcome == Outcome::Ok)
            .filter(|o| o.process != Process::Client(pid))
            .filter_map(|o| o.ret.filter(|r| *r > lost.call).map(|r| (r, o.index)))
            .min();
        let Some((at, grant)) = next else { continue };
        let gap = at - lost.call;
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        if gap < delay_ns && early.len() < 20 {
            early.push(EarlyGrant {
                lost: lost.index,
                grant,
                after_ms: gap as f64 / 1e6,
            });
        }
    }
    LockDelayReport {
        verdict: if early.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        },
        delay_ms,
        held_losses,
        shortest_gap_ms: shortest.map(|g| g as f64 / 1e6),
        early,
    }
}

impl LockDelayReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let gap = self
            .shortest_gap_ms
            .map_or_else(|| "none".to_string(), |g| format!("{g:.0} ms"));
        let summary = format!(
            "{} loss(es) of a holder, delay {} ms, shortest gap to the next grant {gap}, {} early grant(s)",
            self.held_losses,
            self.delay_ms.unwrap_or(0),
            self.early.len()
        );
        let explanation = (!self.early.is_empty()).then(|| {
            self.early
                .iter()
                .map(|e| {
                    format!(
                        "#{} granted {:.0} ms after the holder's loss #{}, inside the delay",
                        e.grant, e.after_ms, e.lost
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
        let highlight = self.early.iter().flat_map(|e| [e.lost, e.grant]).collect();
        CheckResult {
            checker: "lock-delay".into(),
            verdict: self.verdict,
            summary,
            explanation,
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}
