//! The `etcd-mutex` workload's lease checks: etcd's known lock hazard is
//! a grant to a waiter whose lease expired while it waited (clientv3's
//! `Mutex.Lock` returned success after the session was gone, until it
//! learned to read its own key after the wait). Two checks, each a
//! guarantee the recipe must give:
//!
//! 1. **No grant after the client saw its lease expire** (from the
//!    history alone, [`check`]): an `acquire` ok of process P whose
//!    client last found its lease alive at `alive_at` (the ok's value;
//!    the completion time without one) must not come after an `expire` of
//!    P's lease (the cluster said it was gone) or a `lost` (the client's
//!    deadline passed, or it gave the lease up) observed before then.
//! 2. **No grant on a lease the cluster revoked before the grant** (from
//!    the door's history, after the run: [`audit_result`] wraps what the
//!    `etcd-mutex` quiet phase reads): at the revision the grant was
//!    decided at, the client's key existed, with its lease, and no key
//!    under the lock's prefix was older. A key that is gone at that
//!    revision is a lease revoked (or expired) before the grant; an older
//!    key still there is a second holder.
//!
//! History conventions (`etcd-mutex`): an `acquire` ok carries the token
//! (the key's create revision) and a map value with `key`, `lease`,
//! `revision` (the store revision the grant was decided at) and
//! `alive_at` (run time, ns, of the client's last look at its lease before
//! it recorded the grant).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{CheckResult, Verdict};
use crate::history::{Operation, Outcome, Process, Value, F};

/// One grant, as the client recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The acquire's invoke index.
    pub op: u64,
    /// Its process.
    pub process: u64,
    /// The lock's key.
    pub lock: Option<String>,
    /// The fencing token: the key's create revision.
    pub token: Option<u64>,
    /// The client's key under the lock's prefix.
    pub key: Option<String>,
    /// Its lease.
    pub lease: Option<i64>,
    /// The store revision the grant was decided at.
    pub revision: Option<i64>,
    /// Run time (ns) of the client's last look at its lease before the
    /// grant.
    pub alive_at: u64,
}

/// Every acknowledged grant of `ops`, in history order.
pub fn grants(ops: &[Operation]) -> Vec<Grant> {
    ops.iter()
        .filter(|o| o.f == F::Acquire && o.outcome == Outcome::Ok)
        .filter_map(|o| {
            let Process::Client(process) = o.process else {
                return None;
            };
            let field = |name: &str| match &o.value {
                Value::Map(m) => m.get(name).cloned(),
                _ => None,
            };
            let int = |name: &str| match field(name) {
                Some(Value::Int(i)) => Some(i),
                _ => None,
            };
            Some(Grant {
                op: o.index,
                process,
                lock: o.key.clone(),
                token: o.token,
                key: match field("key") {
                    Some(Value::Str(k)) => Some(k),
                    _ => None,
                },
                lease: int("lease"),
                revision: int("revision"),
                alive_at: int("alive_at")
                    .and_then(|t| u64::try_from(t).ok())
                    .or(o.ret)
                    .unwrap_or(o.call),
            })
        })
        .collect()
}

/// A grant after the client saw its lease end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LateGrant {
    /// The grant.
    pub grant: Grant,
    /// The `expire`/`lost` op that ended the lease.
    pub ended_by: u64,
    /// `expire` (the cluster said so) or `lost`.
    pub how: String,
    /// When the client saw it (run time, ns).
    pub ended_at: u64,
}

/// The history check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseReport {
    /// Valid unless some grant came after its lease ended.
    pub verdict: Verdict,
    /// Grants checked.
    pub grants: usize,
    /// Lease ends seen (`expire` and `lost`).
    pub ends: usize,
    /// The violations.
    pub late: Vec<LateGrant>,
}

/// Check 1 of the module docs.
pub fn check(ops: &[Operation]) -> LeaseReport {
    // Each process's first observed end: (time, op, how).
    let mut ended: BTreeMap<u64, (u64, u64, F)> = BTreeMap::new();
    for o in ops {
        if !matches!(o.f, F::Expire | F::Lost) || o.outcome != Outcome::Ok {
            continue;
        }
        let owner = match (&o.invoke_value, o.process) {
            (Value::Int(p), _) => u64::try_from(*p).ok(),
            (_, Process::Client(p)) => Some(p),
            _ => None,
        };
        if let Some(owner) = owner {
            let seen = ended.entry(owner).or_insert((o.call, o.index, o.f.clone()));
            if o.call < seen.0 {
                *seen = (o.call, o.index, o.f.clone());
            }
        }
    }
    let all = grants(ops);
    let late: Vec<LateGrant> = all
        .iter()
        .filter_map(|g| {
            let (at, op, f) = ended.get(&g.process)?;
            (*at <= g.alive_at).then(|| LateGrant {
                grant: g.clone(),
                ended_by: *op,
                how: f.as_str().to_string(),
                ended_at: *at,
            })
        })
        .collect();
    LeaseReport {
        verdict: if late.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        },
        grants: all.len(),
        ends: ended.len(),
        late,
    }
}

impl LeaseReport {
    /// Wraps the report for the summary and `results.json`.
    pub fn into_result(self) -> CheckResult {
        let summary = format!(
            "{} grants, {} lease ends seen, {} grant(s) after the lease ended",
            self.grants,
            self.ends,
            self.late.len()
        );
        let lines: Vec<String> = self
            .late
            .iter()
            .map(|l| {
                format!(
                    "#{} granted process {} (lease {:?}) at {} ns, after #{} ({}) at {} ns",
                    l.grant.op,
                    l.grant.process,
                    l.grant.lease,
                    l.grant.alive_at,
                    l.ended_by,
                    l.how,
                    l.ended_at
                )
            })
            .collect();
        CheckResult {
            checker: "lease-grant".into(),
            verdict: self.verdict,
            summary,
            explanation: (!lines.is_empty()).then(|| lines.join("\n")),
            highlight: self
                .late
                .iter()
                .flat_map(|l| [l.grant.op, l.ended_by])
                .collect(),
            details: serde_json::to_value(&self).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// Check 2 of the module docs, as the quiet phase found it: `checked`
/// grants read back at their revision, `unchecked` ones it could not
/// (e.g. compacted away: the verdict is then unknown at best), and the
/// violations (the grant's op, what was wrong).
pub fn audit_result(
    checked: usize,
    unchecked: Vec<String>,
    problems: Vec<(u64, String)>,
) -> CheckResult {
    let verdict = if !problems.is_empty() {
        Verdict::Invalid
    } else if !unchecked.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    let summary = format!(
        "{checked} grants read back at their revision, {} not readable, {} violation(s)",
        unchecked.len(),
        problems.len()
    );
    let lines: Vec<String> = problems
        .iter()
        .map(|(op, why)| format!("#{op}: {why}"))
        .chain(unchecked.iter().map(|u| format!("not checked: {u}")))
        .collect();
    CheckResult {
        checker: "lease-grant(door history)".into(),
        verdict,
        summary,
        explanation: (!lines.is_empty()).then(|| lines.join("\n")),
        highlight: problems.iter().map(|(op, _)| *op).collect(),
        details: serde_json::json!({
            "checked": checked,
            "unchecked": unchecked,
            "problems": problems,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Event, EventType, History};

    fn grant_value(alive_at: i64) -> Value {
        Value::Map(BTreeMap::from([
            ("key".to_string(), Value::Str("jepsen/lock/1".into())),
            ("lease".to_string(), Value::Int(7)),
            ("revision".to_string(), Value::Int(40)),
            ("alive_at".to_string(), Value::Int(alive_at)),
        ]))
    }

    /// Process 0 acquires (invoked at 10, alive at `alive_at`, ok at 50);
    /// process 1 records process 0's lease end observed at 30.
    fn history(alive_at: i64, end: F) -> Vec<Operation> {
        let c = Process::Client;
        let mut h = History::new();
        h.push(
            Event::new(c(0), EventType::Invoke, F::Acquire, Value::Nil)
                .with_key("lock")
                .at(10),
        );
        h.push(
            Event::new(c(1), EventType::Invoke, end.clone(), Value::Int(0))
                .with_key("lock")
                .at(30),
        );
        h.push(
            Event::new(c(0), EventType::Ok, F::Acquire, grant_value(alive_at))
                .with_key("lock")
                .with_token(40)
                .at(50),
        );
        h.push(
            Event::new(c(1), EventType::Ok, end, Value::Int(0))
                .with_key("lock")
                .at(60),
        );
        h.operations().expect("a well-formed history")
    }

    #[test]
    fn a_grant_before_the_end_is_fine() {
        let r = check(&history(20, F::Expire));
        assert_eq!(r.verdict, Verdict::Valid, "{r:?}");
        assert_eq!((r.grants, r.ends), (1, 1));
    }

    #[test]
    fn a_grant_after_the_client_saw_its_lease_expire_is_caught() {
        for end in [F::Expire, F::Lost] {
            let r = check(&history(40, end));
            assert_eq!(r.verdict, Verdict::Invalid, "{r:?}");
            assert_eq!(r.late[0].grant.lease, Some(7));
            assert_eq!(r.late[0].grant.revision, Some(40));
            let result = r.into_result();
            assert!(result.explanation.unwrap_or_default().contains("after #"));
        }
    }

    #[test]
    fn the_audit_is_invalid_on_a_problem_and_unknown_when_incomplete() {
        assert_eq!(audit_result(3, vec![], vec![]).verdict, Verdict::Valid);
        assert_eq!(
            audit_result(3, vec!["compacted".into()], vec![]).verdict,
            Verdict::Unknown
        );
        let bad = audit_result(3, vec![], vec![(4, "key gone".into())]);
        assert_eq!(bad.verdict, Verdict::Invalid);
        assert_eq!(bad.highlight, vec![4]);
    }
}
