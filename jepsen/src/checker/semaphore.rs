//! The limit checker for the `semaphore` workload: never more than N
//! holders at once.
//!
//! Holds are found as for [`super::rwlock`] (the acquire's value is the
//! limit N the client asked for, docs/api.md "Semaphores"): from the
//! acquire's ok to the release invocation or the observed loss. A sweep
//! over the hold boundaries (ends before starts at the same instant)
//! finds the most holders at once; above N is invalid. Grants are ordered
//! by their fencing tokens as in [`super::rwlock::token_order`].

use super::rwlock::{holds, token_order, RwViolation};
use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Value, F};
use serde::Serialize;

/// The checker's report.
#[derive(Debug, Clone, Serialize)]
pub struct SemReport {
    /// Valid or invalid.
    pub verdict: Verdict,
    /// The limit the clients asked for (the largest, if they differ).
    pub permits: Option<u64>,
    /// Holds found.
    pub holds: usize,
    /// The most holders at once, and the acquires holding then.
    pub max_holders: usize,
    /// The holders at the worst instant (acquire indexes).
    pub worst: Vec<u64>,
    /// Token order violations.
    pub token_violations: Vec<RwViolation>,
}

/// Checks the history of a `semaphore` run.
pub fn check(ops: &[Operation]) -> SemReport {
    let permits = ops
        .iter()
        .filter(|o| o.f == F::Acquire && o.outcome == Outcome::Ok)
        .filter_map(|o| match o.invoke_value {
            Value::Int(n) => u64::try_from(n).ok(),
            _ => None,
        })
        .max();
    let holds = holds(ops);
    // (time, is_start, hold): ends sort before starts at the same time.
    let mut edges: Vec<(u64, bool, usize)> = Vec::new();
    for (i, h) in holds.iter().enumerate() {
        edges.push((h.start, true, i));
        edges.push((h.end, false, i));
    }
    edges.sort();
    let mut current: Vec<usize> = Vec::new();
    let mut worst: Vec<usize> = Vec::new();
    for (_, start, i) in edges {
        if start {
            current.push(i);
            if current.len() > worst.len() {
                worst = current.clone();
            }
        } else {
            current.retain(|&j| j != i);
        }
    }
    let mut token_violations = token_order(&holds);
    token_violations.truncate(20);
    let over = permits.is_some_and(|n| worst.len() as u64 > n);
    let verdict = if over || !token_violations.is_empty() {
        Verdict::Invalid
    } else if permits.is_none() && !holds.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    SemReport {
        verdict,
        permits,
        holds: holds.len(),
        max_holders: worst.len(),
        worst: worst.iter().map(|&i| holds[i].op).collect(),
        token_violations,
    }
}

impl SemReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let limit = self
            .permits
            .map_or_else(|| "?".to_string(), |n| n.to_string());
        let summary = format!(
            "{} holds, at most {} at once (limit {limit}), {} token violation(s)",
            self.holds,
            self.max_holders,
            self.token_violations.len()
        );
        let mut lines = Vec::new();
        if self.permits.is_some_and(|n| self.max_holders as u64 > n) {
            lines.push(format!(
                "{} holders at once, limit {limit}: {:?}",
                self.max_holders, self.worst
            ));
        }
        for v in &self.token_violations {
            if let RwViolation::TokenOrder {
                earlier,
                earlier_token,
                later,
                later_token,
            } = v
            {
                lines.push(format!(
                    "#{later} (token {later_token}) was invoked after #{earlier} \
                     (token {earlier_token}) ended, with a token not above it"
                ));
            }
        }
        let highlight = if lines.is_empty() {
            Vec::new()
        } else {
            self.worst.clone()
        };
        CheckResult {
            checker: "semaphore-limit".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}
