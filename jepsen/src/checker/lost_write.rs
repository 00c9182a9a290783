//! The no-lost-acknowledged-write checker for registers.
//!
//! Linearizability already implies this, but this checker is cheap, needs no
//! search budget (so it still decides when the search says `Unknown`), and
//! its answer reads plainly: "write #17 of 5 to x was acknowledged and is
//! gone".
//!
//! For each key, take the final read (the `ok` read that returned last). An
//! acknowledged write (`write` ok, or `cas` ok that swapped) that completed
//! before that read began must be *visible* (the read returned its value) or
//! *superseded*: some other write of the value the read returned (ok or
//! info) could have taken effect after it, i.e. did not end before it
//! began, and began before the read ended. Otherwise it was lost.

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Value, F};
use serde::Serialize;
use std::collections::BTreeMap;

/// An acknowledged write that no final read can account for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostWrite {
    /// The key.
    pub key: Option<String>,
    /// The write's invoke index.
    pub write: u64,
    /// The value it wrote.
    pub value: Value,
    /// The final read's invoke index.
    pub read: u64,
    /// What the final read returned.
    pub read_value: Value,
}

/// The checker's report.
#[derive(Debug, Clone, Serialize)]
pub struct LostWriteReport {
    /// Keys that have a final read.
    pub keys_checked: usize,
    /// Keys with acknowledged writes but no read: cannot be checked.
    pub keys_unread: Vec<Option<String>>,
    /// Acknowledged writes that were required to be visible.
    pub writes_checked: usize,
    /// The lost ones.
    pub lost: Vec<LostWrite>,
    /// The verdict.
    pub verdict: Verdict,
}

impl LostWriteReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let summary = format!(
            "{} acknowledged writes checked on {} key(s), {} lost, {} key(s) never read",
            self.writes_checked,
            self.keys_checked,
            self.lost.len(),
            self.keys_unread.len()
        );
        let mut lines: Vec<String> = self
            .lost
            .iter()
            .map(|l| {
                format!(
                    "lost write: #{} wrote {} to {:?}, acknowledged, but final read #{} returned {}",
                    l.write, l.value, l.key, l.read, l.read_value
                )
            })
            .collect();
        if !self.keys_unread.is_empty() {
            lines.push(format!(
                "undecided: keys never read: {:?}",
                self.keys_unread
            ));
        }
        let highlight = self.lost.iter().flat_map(|l| [l.write, l.read]).collect();
        CheckResult {
            checker: "no-lost-writes".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight,
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// The value a write-like op stores, if it stores one: `write`, or a `cas`
/// that swapped (ok, value not `false`) or may have (info).
fn written_value(op: &Operation) -> Option<&Value> {
    match (&op.f, op.outcome) {
        (F::Write, Outcome::Ok | Outcome::Info) => Some(&op.invoke_value),
        (F::Cas, Outcome::Ok) if op.value == Value::Bool(false) => None,
        (F::Cas, Outcome::Ok | Outcome::Info) => match &op.invoke_value {
            Value::List(v) if v.len() == 2 => Some(&v[1]),
            _ => None,
        },
        _ => None,
    }
}

/// Checks every key of a register history.
pub fn check(ops: &[Operation]) -> LostWriteReport {
    let mut by_key: BTreeMap<Option<String>, Vec<&Operation>> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| matches!(o.f, F::Read | F::Write | F::Cas))
    {
        by_key.entry(op.key.clone()).or_default().push(op);
    }
    let mut lost = Vec::new();
    let mut keys_checked = 0;
    let mut keys_unread = Vec::new();
    let mut writes_checked = 0;
    for (key, ops) in by_key {
        let writes: Vec<(&Operation, &Value)> = ops
            .iter()
            .filter_map(|o| written_value(o).map(|v| (*o, v)))
            .collect();
        let acked: Vec<&(&Operation, &Value)> = writes.iter().filter(|(o, _)| o.is_ok()).collect();
        let final_read = ops
            .iter()
            .filter(|o| o.f == F::Read && o.is_ok())
            .max_by_key(|o| (o.ret, o.index));
        let Some(read) = final_read else {
            if !acked.is_empty() {
                keys_unread.push(key);
            }
            continue;
        };
        keys_checked += 1;
        let read_ret = read.ret.unwrap_or(u64::MAX);
        for (w, value) in acked {
            if w.ret.is_none_or(|r| r >= read.call) {
                continue; // concurrent with the final read: not required
            }
            writes_checked += 1;
            if *value == &read.value {
                continue;
            }
            let superseded = writes.iter().any(|(w2, v2)| {
                w2.index != w.index
                    && *v2 == &read.value
                    && w2.ret.is_none_or(|r| r >= w.call)
                    && w2.call < read_ret
            });
            if !superseded {
                lost.push(LostWrite {
                    key: key.clone(),
                    write: w.index,
                    value: (*value).clone(),
                    read: read.index,
                    read_value: read.value.clone(),
                });
            }
        }
    }
    let verdict = if !lost.is_empty() {
        Verdict::Invalid
    } else if !keys_unread.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    LostWriteReport {
        keys_checked,
        keys_unread,
        writes_checked,
        lost,
        verdict,
    }
}
