//! The fencing checker for the `fenced` workload.
//!
//! The harness owns an in-memory counter (one per `key`) that accepts an
//! increment only when its fencing token is ≥ the highest token it has
//! seen. History conventions:
//! - `acquire` ok carries the granted fencing `token` (key = lock name);
//! - `incr` carries the client's `token`; `ok` = accepted, with value the
//!   counter value *after* the increment (the store's accept order), `fail`
//!   = rejected as stale, `info` = unknown;
//! - `read` ok returns the counter value (the run ends with a final read).
//!
//! Checked, each a guarantee fencing must give:
//! 1. **No lost or phantom increment**: every ok read sees at least the
//!    increments acknowledged before the read began, and at most those
//!    invoked before it ended (`info` ones may or may not count).
//! 2. **No duplicate acknowledgement**: two accepted increments never report
//!    the same post-value (that would be a lost read-modify-write update).
//! 3. **No stale token accepted**: in accept order, tokens never decrease.
//!    Accept order is the post-value order when every accepted increment
//!    reports one, else completion order.
//! 4. **Grant tokens increase** per lock: a grant that began after another
//!    ended has a larger token (equal only for the same process, since a
//!    re-acquire by the holding session returns its existing node), and no
//!    token is granted to two processes.

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Process, F};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// One broken fencing guarantee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FencedViolation {
    /// A read saw fewer increments than were acknowledged before it began.
    LostIncrement {
        /// Counter key.
        key: Option<String>,
        /// The read.
        read: u64,
        /// What it returned.
        value: i64,
        /// Increments acknowledged before the read began.
        at_least: i64,
    },
    /// A read saw more increments than could have happened.
    PhantomIncrement {
        /// Counter key.
        key: Option<String>,
        /// The read.
        read: u64,
        /// What it returned.
        value: i64,
        /// Increments (ok or info) invoked before the read ended.
        at_most: i64,
    },
    /// Two accepted increments report the same counter value.
    DuplicateAck {
        /// Counter key.
        key: Option<String>,
        /// The reported value.
        value: i64,
        /// The two increments.
        ops: [u64; 2],
    },
    /// An increment was accepted with a token lower than one accepted
    /// before it.
    StaleTokenAccepted {
        /// Counter key.
        key: Option<String>,
        /// The stale increment.
        op: u64,
        /// Its token.
        token: u64,
        /// The earlier increment with the higher token.
        after_op: u64,
        /// That token.
        after_token: u64,
    },
    /// A later grant of a lock got a token not above an earlier grant's.
    TokenNotIncreasing {
        /// Lock name.
        lock: Option<String>,
        /// The earlier grant (completed before `later` was invoked).
        earlier: u64,
        /// Its token.
        earlier_token: u64,
        /// The later grant.
        later: u64,
        /// Its token.
        later_token: u64,
    },
    /// The same token was granted to two processes.
    DuplicateToken {
        /// Lock name.
        lock: Option<String>,
        /// The token.
        token: u64,
        /// The two grants.
        ops: [u64; 2],
    },
}

impl fmt::Display for FencedViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FencedViolation::LostIncrement { key, read, value, at_least } => write!(
                f,
                "lost increment: read #{read} of {key:?} saw {value}, but {at_least} increments were acknowledged before it"
            ),
            FencedViolation::PhantomIncrement { key, read, value, at_most } => write!(
                f,
                "phantom increment: read #{read} of {key:?} saw {value}, but at most {at_most} increments were attempted"
            ),
            FencedViolation::DuplicateAck { key, value, ops } => write!(
                f,
                "lost update: increments #{} and #{} of {key:?} both report value {value}",
                ops[0], ops[1]
            ),
            FencedViolation::StaleTokenAccepted { key, op, token, after_op, after_token } => write!(
                f,
                "stale token accepted: #{op} with token {token} accepted after #{after_op} with token {after_token} ({key:?})"
            ),
            FencedViolation::TokenNotIncreasing { lock, earlier, earlier_token, later, later_token } => write!(
                f,
                "token not increasing on lock {lock:?}: grant #{later} got {later_token}, after grant #{earlier} got {earlier_token}"
            ),
            FencedViolation::DuplicateToken { lock, token, ops } => write!(
                f,
                "token {token} of lock {lock:?} granted to two processes (#{} and #{})",
                ops[0], ops[1]
            ),
        }
    }
}

/// The fencing checker's full report.
#[derive(Debug, Clone, Serialize)]
pub struct FencedReport {
    /// Accepted increments.
    pub acked_increments: usize,
    /// Increments with unknown outcome.
    pub info_increments: usize,
    /// Increments rejected (stale token, as designed).
    pub rejected_increments: usize,
    /// Acknowledged grants with a token.
    pub grants: usize,
    /// Ok reads checked.
    pub reads: usize,
    /// The last read's value per counter key.
    pub final_values: BTreeMap<String, i64>,
    /// Everything broken.
    pub violations: Vec<FencedViolation>,
    /// Why the checker could not decide, if it could not.
    pub unknown_reasons: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
}

impl FencedReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let summary = format!(
            "{} acked / {} info / {} rejected increments, {} grants, {} reads, final {:?}, {} violation(s)",
            self.acked_increments,
            self.info_increments,
            self.rejected_increments,
            self.grants,
            self.reads,
            self.final_values,
            self.violations.len()
        );
        let lines: Vec<String> = self
            .violations
            .iter()
            .map(ToString::to_string)
            .chain(
                self.unknown_reasons
                    .iter()
                    .map(|r| format!("undecided: {r}")),
            )
            .collect();
        let highlight = self.violations.iter().flat_map(violation_ops).collect();
        CheckResult {
            checker: "fenced".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}

fn violation_ops(v: &FencedViolation) -> Vec<u64> {
    match v {
        FencedViolation::LostIncrement { read, .. }
        | FencedViolation::PhantomIncrement { read, .. } => {
            vec![*read]
        }
        FencedViolation::DuplicateAck { ops, .. } | FencedViolation::DuplicateToken { ops, .. } => {
            ops.to_vec()
        }
        FencedViolation::StaleTokenAccepted { op, after_op, .. } => vec![*after_op, *op],
        FencedViolation::TokenNotIncreasing { earlier, later, .. } => vec![*earlier, *later],
    }
}

/// Checks the fencing guarantees over all operations.
pub fn check(ops: &[Operation]) -> FencedReport {
    let mut violations = Vec::new();
    let mut unknown_reasons = Vec::new();
    let incrs: Vec<&Operation> = ops.iter().filter(|o| o.f == F::Incr).collect();
    let reads: Vec<&Operation> = ops.iter().filter(|o| o.f == F::Read && o.is_ok()).collect();
    let grants: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.f == F::Acquire && o.is_ok())
        .collect();

    let mut final_values = BTreeMap::new();
    for key in keys(&incrs, &reads) {
        let incrs: Vec<&Operation> = incrs.iter().copied().filter(|o| o.key == key).collect();
        let reads: Vec<&Operation> = reads.iter().copied().filter(|o| o.key == key).collect();
        check_reads(&key, &incrs, &reads, &mut violations, &mut unknown_reasons);
        if let Some(v) = reads
            .iter()
            .max_by_key(|r| r.ret)
            .and_then(|r| r.value.as_int())
        {
            final_values.insert(key.clone().unwrap_or_default(), v);
        }
        if reads.is_empty() && incrs.iter().any(|o| o.is_ok()) {
            unknown_reasons.push(format!(
                "no read of counter {key:?}: lost increments undetectable"
            ));
        }
        check_accept_order(&key, &incrs, &mut violations, &mut unknown_reasons);
    }
    check_grants(&grants, &mut violations, &mut unknown_reasons);

    let verdict = if !violations.is_empty() {
        Verdict::Invalid
    } else if !unknown_reasons.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    FencedReport {
        acked_increments: incrs.iter().filter(|o| o.is_ok()).count(),
        info_increments: incrs.iter().filter(|o| o.is_info()).count(),
        rejected_increments: incrs.iter().filter(|o| o.outcome == Outcome::Fail).count(),
        grants: grants.len(),
        reads: reads.len(),
        final_values,
        violations,
        unknown_reasons,
        verdict,
    }
}

fn keys(incrs: &[&Operation], reads: &[&Operation]) -> Vec<Option<String>> {
    let mut keys: Vec<Option<String>> = incrs.iter().chain(reads).map(|o| o.key.clone()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Bounds every read: at least the increments acknowledged before it began,
/// at most those invoked before it ended.
fn check_reads(
    key: &Option<String>,
    incrs: &[&Operation],
    reads: &[&Operation],
    violations: &mut Vec<FencedViolation>,
    unknown: &mut Vec<String>,
) {
    for r in reads {
        let Some(value) = r.value.as_int() else {
            unknown.push(format!(
                "read #{} returned non-integer {}",
                r.index, r.value
            ));
            continue;
        };
        let (Some(r_ret), r_call) = (r.ret, r.call) else {
            continue;
        };
        let at_least = incrs
            .iter()
            .filter(|i| i.is_ok() && i.ret.is_some_and(|t| t < r_call))
            .count();
        let at_most = incrs
            .iter()
            .filter(|i| i.outcome != Outcome::Fail && i.call < r_ret)
            .count();
        let (at_least, at_most) = (at_least as i64, at_most as i64);
        if value < at_least {
            violations.push(FencedViolation::LostIncrement {
                key: key.clone(),
                read: r.index,
                value,
                at_least,
            });
        } else if value > at_most {
            violations.push(FencedViolation::PhantomIncrement {
                key: key.clone(),
                read: r.index,
                value,
                at_most,
            });
        }
    }
}

/// Accepted tokens must not decrease in accept order; post-values must be
/// distinct.
fn check_accept_order(
    key: &Option<String>,
    incrs: &[&Operation],
    violations: &mut Vec<FencedViolation>,
    unknown: &mut Vec<String>,
) {
    let mut accepted: Vec<&Operation> = incrs.iter().copied().filter(|o| o.is_ok()).collect();
    if let Some(o) = accepted.iter().find(|o| o.token.is_none()) {
        unknown.push(format!("accepted increment #{} has no token", o.index));
        return;
    }
    let by_value = accepted.iter().all(|o| o.value.as_int().is_some());
    if by_value {
        accepted.sort_by_key(|o| (o.value.as_int(), o.complete_index));
        for pair in accepted.windows(2) {
            if pair[0].value == pair[1].value {
                violations.push(FencedViolation::DuplicateAck {
                    key: key.clone(),
                    value: pair[0].value.as_int().unwrap_or_default(),
                    ops: [pair[0].index, pair[1].index],
                });
            }
        }
    } else {
        accepted.sort_by_key(|o| o.complete_index);
    }
    let mut highest: Option<(u64, u64)> = None; // (token, op)
    for o in accepted {
        let token = o.token.unwrap_or_default();
        match highest {
            Some((t, op)) if token < t => violations.push(FencedViolation::StaleTokenAccepted {
                key: key.clone(),
                op: o.index,
                token,
                after_op: op,
                after_token: t,
            }),
            Some((t, _)) if token == t => {}
            _ => highest = Some((token, o.index)),
        }
    }
}

/// Grants that are ordered in real time must have increasing tokens.
fn check_grants(
    grants: &[&Operation],
    violations: &mut Vec<FencedViolation>,
    unknown: &mut Vec<String>,
) {
    let mut by_lock: BTreeMap<Option<String>, Vec<&Operation>> = BTreeMap::new();
    for g in grants {
        if g.token.is_none() {
            unknown.push(format!("grant #{} carries no fencing token", g.index));
            continue;
        }
        by_lock.entry(g.key.clone()).or_default().push(g);
    }
    for (lock, grants) in by_lock {
        let mut owner_of: HashMap<u64, (Process, u64)> = HashMap::new();
        for g in &grants {
            let token = g.token.unwrap_or_default();
            match owner_of.get(&token) {
                Some(&(p, first)) if p != g.process => {
                    violations.push(FencedViolation::DuplicateToken {
                        lock: lock.clone(),
                        token,
                        ops: [first, g.index],
                    })
                }
                Some(_) => {}
                None => {
                    owner_of.insert(token, (g.process, g.index));
                }
            }
        }
        // Sweep: grants by invoke time; fold in every grant that completed
        // before it, tracking the highest token among them.
        let mut by_call = grants.clone();
        by_call.sort_by_key(|g| (g.call, g.index));
        let mut by_ret = grants.clone();
        by_ret.sort_by_key(|g| (g.ret, g.index));
        let mut done = 0;
        let mut highest: Option<&Operation> = None;
        for g in by_call {
            while done < by_ret.len() && by_ret[done].ret.is_some_and(|r| r < g.call) {
                let cand = by_ret[done];
                if highest.is_none_or(|h| cand.token > h.token) {
                    highest = Some(cand);
                }
                done += 1;
            }
            if let Some(h) = highest {
                let same_holder = h.token == g.token && h.process == g.process;
                if g.token <= h.token && !same_holder {
                    violations.push(FencedViolation::TokenNotIncreasing {
                        lock: lock.clone(),
                        earlier: h.index,
                        earlier_token: h.token.unwrap_or_default(),
                        later: g.index,
                        later_token: g.token.unwrap_or_default(),
                    });
                }
            }
        }
    }
}
