//! The checker of the `multilock` workload ([`crate::workload::multilock`]):
//! transfers between accounts under multi-locks conserve the total.
//!
//! - **Conservation**: every `read` of all the balances (taken under a
//!   multi-lock of every account, and the quiet phase's final one) sums
//!   to the expected total, the read's invocation value. A transfer
//!   writes both balances in one guarded transaction, so a correct
//!   cluster never shows another sum, whatever the faults.
//! - **Exclusion**: no two holders of the same account's lock at once.
//!   A hold is the interval from the multi-lock acquire's ok (value: the
//!   locks) to the release invoked by the same process or the observed
//!   loss of its session, as for [`super::rwlock`]; per lock, holds must
//!   not overlap.
//!
//! Without an ok read of all the balances the verdict is unknown.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Process, Value, F};

/// A broken guarantee.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MultiViolation {
    /// A read of every balance did not sum to the total.
    Total {
        /// The read.
        read: u64,
        /// Its sum.
        sum: i64,
        /// The expected total.
        expected: i64,
    },
    /// Two holds of one account's lock overlapped.
    Overlap {
        /// The lock.
        lock: String,
        /// The earlier hold's acquire.
        first: u64,
        /// The overlapping hold's acquire.
        second: u64,
    },
}

/// The checker's report.
#[derive(Debug, Clone, Serialize)]
pub struct MultiReport {
    /// Valid, invalid, or unknown (no read of every balance).
    pub verdict: Verdict,
    /// Reads of every balance.
    pub reads: usize,
    /// Transfers that committed.
    pub transfers: usize,
    /// Multi-lock holds found.
    pub holds: usize,
    /// Violations (at most 20).
    pub violations: Vec<MultiViolation>,
}

/// One hold of a set of locks.
struct Hold {
    op: u64,
    locks: Vec<String>,
    start: u64,
    end: u64,
}

fn holds(ops: &[Operation]) -> Vec<Hold> {
    let mut out = Vec::new();
    for op in ops {
        let (F::Acquire, Outcome::Ok, Process::Client(pid), Value::List(names)) =
            (&op.f, op.outcome, op.process, &op.invoke_value)
        else {
            continue;
        };
        let locks: Vec<String> = names
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let start = op.ret.unwrap_or(op.call);
        let end = ops
            .iter()
            .filter(|o| match (&o.f, o.process, &o.invoke_value) {
                (F::Release, Process::Client(p), _) => p == pid && o.call >= start,
                (F::Expire | F::Lost, _, Value::Int(p)) => u64::try_from(*p).ok() == Some(pid),
                _ => false,
            })
            .map(|o| o.call)
            .min()
            .unwrap_or(u64::MAX);
        if end > start {
            out.push(Hold {
                op: op.index,
                locks,
                start,
                end,
            });
        }
    }
    out
}

/// Checks the history of a `multilock` run.
pub fn check(ops: &[Operation]) -> MultiReport {
    let mut violations = Vec::new();
    let mut reads = 0;
    for op in ops.iter().filter(|o| o.f == F::Read && o.is_ok()) {
        let (Some(expected), Value::List(balances)) = (op.invoke_value.as_int(), &op.value) else {
            continue;
        };
        reads += 1;
        let sum: i64 = balances.iter().filter_map(Value::as_int).sum();
        if sum != expected {
            violations.push(MultiViolation::Total {
                read: op.index,
                sum,
                expected,
            });
        }
    }
    let holds = holds(ops);
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in &holds {
        for lock in &h.locks {
            by_lock.entry(lock.as_str()).or_default().push(h);
        }
    }
    for (lock, mut list) in by_lock {
        list.sort_by_key(|h| (h.start, h.op));
        let mut latest: Option<&Hold> = None;
        for h in list {
            if let Some(prev) = latest.filter(|p| p.end > h.start) {
                violations.push(MultiViolation::Overlap {
                    lock: lock.to_string(),
                    first: prev.op,
                    second: h.op,
                });
            }
            if latest.is_none_or(|p| h.end > p.end) {
                latest = Some(h);
            }
        }
    }
    let transfers = ops
        .iter()
        .filter(|o| o.f == F::Other("transfer".into()) && o.is_ok())
        .count();
    let verdict = if !violations.is_empty() {
        Verdict::Invalid
    } else if reads == 0 {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    violations.truncate(20);
    MultiReport {
        verdict,
        reads,
        transfers,
        holds: holds.len(),
        violations,
    }
}

impl MultiReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let summary = format!(
            "{} transfers, {} reads of every balance, {} holds, {} violation(s)",
            self.transfers,
            self.reads,
            self.holds,
            self.violations.len()
        );
        let mut highlight = Vec::new();
        let lines: Vec<String> = self
            .violations
            .iter()
            .map(|v| match v {
                MultiViolation::Total {
                    read,
                    sum,
                    expected,
                } => {
                    highlight.push(*read);
                    format!("read #{read} sums to {sum}, not the total {expected}")
                }
                MultiViolation::Overlap {
                    lock,
                    first,
                    second,
                } => {
                    highlight.extend([*first, *second]);
                    format!("#{first} and #{second} held {lock} at once")
                }
            })
            .collect();
        CheckResult {
            checker: "multilock-conservation".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}
