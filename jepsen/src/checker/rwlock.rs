//! The exclusion checker for the `rwlock` workload: never a writer
//! together with any other holder; readers together are allowed.
//!
//! History conventions (see [`crate::workload::lock`]):
//! - `acquire` (key = lock) carries the mode, `"read"` or `"write"`, as
//!   its value, and on ok the grant's fencing `token`;
//! - `release` by the same process ends the hold at its invocation (the
//!   client stopped using the lock before it asked to give it back);
//! - `expire` / `lost` (value = the holder's process id) end the hold of
//!   that process at the instant its client observed the loss; a grant
//!   that arrives after that instant is never acted on, so it is no hold.
//!
//! A hold is the interval from the acquire's ok (the client certainly
//! holds from then) to the first of those ends, or the end of the history.
//! These are the intervals the client *acted* on, so two of them
//! overlapping, one a writer's, is a violation whatever the server thinks.
//! Also checked, with the grant tokens: an acquire invoked after another
//! hold ended has a larger token (docs/api.md: every grant has its own token,
//! the node's create revision), so grants are ordered as the server
//! ordered them.

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Process, Value, F};
use serde::Serialize;

/// One client's hold of the read-write lock.
#[derive(Debug, Clone, Serialize)]
pub struct Hold {
    /// The granting acquire (invoke index).
    pub op: u64,
    /// Its process.
    pub process: u64,
    /// True for a write hold.
    pub write: bool,
    /// The grant's fencing token.
    pub token: Option<u64>,
    /// When the acquire was invoked (ns): its queue entry, whose create
    /// revision is the token, is made after this.
    pub invoked: u64,
    /// Start (ns): the acquire's ok.
    pub start: u64,
    /// End (ns): release invoked or loss observed; `u64::MAX` if neither.
    pub end: u64,
}

/// One broken guarantee.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RwViolation {
    /// A writer held together with another holder.
    SharedWrite {
        /// The writer's acquire.
        writer: u64,
        /// The other holder's acquire.
        other: u64,
    },
    /// An acquire invoked after another hold ended got a token not above
    /// it.
    TokenOrder {
        /// The earlier hold's acquire.
        earlier: u64,
        /// Its token.
        earlier_token: u64,
        /// The later hold's acquire.
        later: u64,
        /// Its token.
        later_token: u64,
    },
}

/// The checker's report.
#[derive(Debug, Clone, Serialize)]
pub struct RwReport {
    /// Valid or invalid.
    pub verdict: Verdict,
    /// Holds found.
    pub holds: usize,
    /// Write holds among them.
    pub writes: usize,
    /// Violations (at most [`MAX_REPORTED`]).
    pub violations: Vec<RwViolation>,
}

/// Violations kept in a report.
const MAX_REPORTED: usize = 20;

/// The holds of a history, from its acquire/release/loss ops.
pub fn holds(ops: &[Operation]) -> Vec<Hold> {
    let mut out = Vec::new();
    for op in ops {
        let (F::Acquire, Outcome::Ok, Process::Client(pid)) = (&op.f, op.outcome, op.process)
        else {
            continue;
        };
        // The `rwlock` mode, or the `semaphore` limit (a shared hold).
        let write = match &op.invoke_value {
            Value::Str(m) => m == "write",
            Value::Int(_) => false,
            _ => continue,
        };
        let start = op.ret.unwrap_or(op.call);
        let end = ops
            .iter()
            .filter(|o| o.key == op.key)
            .filter(|o| match (&o.f, o.process, &o.value) {
                (F::Release, Process::Client(p), _) => p == pid && o.call >= start,
                // A loss ends every hold of the process, even one granted
                // after it: the client never acts on a grant that comes
                // after it gave the session up (the hold is then empty).
                (F::Expire | F::Lost, _, Value::Int(p)) => u64::try_from(*p).ok() == Some(pid),
                _ => false,
            })
            .map(|o| o.call)
            .min()
            .unwrap_or(u64::MAX);
        if end <= start {
            continue;
        }
        out.push(Hold {
            op: op.index,
            process: pid,
            write,
            token: op.token,
            invoked: op.call,
            start,
            end,
        });
    }
    out
}

/// Checks the history of an `rwlock` run.
pub fn check(ops: &[Operation]) -> RwReport {
    let holds = holds(ops);
    let mut violations = Vec::new();
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            if a.process == b.process {
                continue;
            }
            let overlap = a.start < b.end && b.start < a.end;
            if overlap && (a.write || b.write) {
                let (writer, other) = if a.write { (a, b) } else { (b, a) };
                violations.push(RwViolation::SharedWrite {
                    writer: writer.op,
                    other: other.op,
                });
            }
        }
    }
    violations.extend(token_order(&holds));
    let verdict = if violations.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Invalid
    };
    violations.truncate(MAX_REPORTED);
    RwReport {
        verdict,
        holds: holds.len(),
        writes: holds.iter().filter(|h| h.write).count(),
        violations,
    }
}

/// Grant token order: an acquire invoked after another hold ended must
/// get a larger token (also used by [`super::semaphore`]).
pub fn token_order(holds: &[Hold]) -> Vec<RwViolation> {
    let mut violations = Vec::new();
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            if a.process == b.process {
                continue;
            }
            // Token order from the invocation, not the ok: a waiter's
            // token is fixed when it queues, and its ok may be seen late.
            let (first, later) = if a.end <= b.invoked {
                (a, b)
            } else if b.end <= a.invoked {
                (b, a)
            } else {
                continue;
            };
            if let (Some(t1), Some(t2)) = (first.token, later.token) {
                if t2 <= t1 {
                    violations.push(RwViolation::TokenOrder {
                        earlier: first.op,
                        earlier_token: t1,
                        later: later.op,
                        later_token: t2,
                    });
                }
            }
        }
    }
    violations
}

impl RwReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let summary = format!(
            "{} holds ({} writes), {} violation(s)",
            self.holds,
            self.writes,
            self.violations.len()
        );
        let lines: Vec<String> = self
            .violations
            .iter()
            .map(|v| match v {
                RwViolation::SharedWrite { writer, other } => {
                    format!("writer #{writer} held together with #{other}")
                }
                RwViolation::TokenOrder {
                    earlier,
                    earlier_token,
                    later,
                    later_token,
                } => format!(
                    "#{later} (token {later_token}) was invoked after #{earlier} \
                     (token {earlier_token}) ended, with a token not above it"
                ),
            })
            .collect();
        let highlight = self
            .violations
            .iter()
            .flat_map(|v| match v {
                RwViolation::SharedWrite { writer, other } => [*writer, *other],
                RwViolation::TokenOrder { earlier, later, .. } => [*earlier, *later],
            })
            .collect();
        CheckResult {
            checker: "rwlock-exclusion".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}
