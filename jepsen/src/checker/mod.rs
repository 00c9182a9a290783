//! Checkers: each judges a history and returns a [`CheckResult`].
//!
//! - [`linear`]: linearizability against a [`crate::model::Model`];
//! - [`fenced`]: the fenced-counter invariants (no lost increment, no stale
//!   token accepted, grant tokens increase);
//! - [`lost_write`]: every acknowledged register write survives;
//! - [`rwlock`]: never a writer together with another holder;
//! - [`semaphore`]: never more than N holders;
//! - [`lock_delay`]: nobody granted a lock inside its delay after the
//!   holder's session was lost;
//! - [`multilock`]: transfers under multi-locks conserve the total, and
//!   no account's lock has two holders at once.
//!
//! [`check_history`] runs the right set for a workload; the run driver and
//! the `check` subcommand both go through it.

pub mod fenced;
pub mod lease_grant;
pub mod linear;
pub mod lock_delay;
pub mod lost_write;
pub mod multilock;
pub mod rwlock;
pub mod semaphore;

use crate::history::{History, HistoryError, Operation, F};
use crate::model::{Model, MutexModel, RegisterModel};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A checker's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The property holds for this history.
    Valid,
    /// The property is violated; the result explains where.
    Invalid,
    /// The checker could not decide (budget exhausted, missing data).
    /// Never to be read as valid.
    Unknown,
}

impl Verdict {
    /// Combines verdicts: any `Invalid` wins, then any `Unknown`.
    pub fn all(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut out = Verdict::Valid;
        for v in verdicts {
            match v {
                Verdict::Invalid => return Verdict::Invalid,
                Verdict::Unknown => out = Verdict::Unknown,
                Verdict::Valid => {}
            }
        }
        out
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "INVALID",
            Verdict::Unknown => "unknown",
        })
    }
}

/// What one checker concluded, in a uniform shape for reports.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// Checker name, e.g. `linearizable(register)`.
    pub checker: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// One line for the summary screen.
    pub summary: String,
    /// Multi-line explanation of a violation or of an `Unknown`.
    pub explanation: Option<String>,
    /// Invoke indexes of ops involved in a violation (timeline highlights).
    pub highlight: Vec<u64>,
    /// The checker's full report.
    pub details: serde_json::Value,
}

/// Which workload a history comes from; decides which checkers apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// get/set/cas registers: linearizability + no lost writes.
    Register,
    /// acquire/release of locks: linearizability of the mutex.
    Mutex,
    /// locks plus a fenced counter: mutex linearizability + fencing.
    Fenced,
    /// read-write locks: writer exclusion and grant token order.
    #[serde(rename = "rwlock")]
    RwLock,
    /// semaphores: at most N holders and grant token order.
    Semaphore,
    /// locks with a lock-delay: mutex linearizability + no grant inside a
    /// delay.
    #[serde(rename = "lock-delay")]
    LockDelay,
    /// transfers under multi-locks: conservation + per-lock exclusion.
    #[serde(rename = "multilock")]
    MultiLock,
    /// `fenced` through the ZooKeeper door (ZooKeeper's lock recipe, the
    /// lock node's czxid as the token): the same checks as `fenced`.
    #[serde(rename = "zk-mutex")]
    ZkMutex,
    /// `fenced` through the etcd door (clientv3's `concurrency.Mutex`
    /// recipe, the lock key's create revision as the token): the same
    /// checks as `fenced`, and no grant after the client saw its lease
    /// expire.
    #[serde(rename = "etcd-mutex")]
    EtcdMutex,
}

impl Workload {
    /// Guesses the workload from the functions present: any `incr` means
    /// fenced, else any lock op means mutex, else register.
    pub fn detect(ops: &[Operation]) -> Workload {
        use crate::history::Value;
        let acquire_value = |pick: fn(&Value) -> bool| {
            ops.iter()
                .any(|o| o.f == F::Acquire && pick(&o.invoke_value))
        };
        if ops.iter().any(|o| o.f == F::Incr) {
            Workload::Fenced
        } else if acquire_value(|v| matches!(v, Value::List(_))) {
            Workload::MultiLock
        } else if acquire_value(|v| matches!(v, Value::Map(m) if m.contains_key("lock_delay_ms"))) {
            Workload::LockDelay
        } else if ops
            .iter()
            .any(|o| o.f == F::Acquire && matches!(o.invoke_value, crate::history::Value::Int(_)))
        {
            Workload::Semaphore
        } else if ops
            .iter()
            .any(|o| o.f == F::Acquire && matches!(o.invoke_value, crate::history::Value::Str(_)))
        {
            Workload::RwLock
        } else if ops
            .iter()
            .any(|o| matches!(o.f, F::Acquire | F::Release | F::Expire | F::Lost))
        {
            Workload::Mutex
        } else {
            Workload::Register
        }
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "register" => Ok(Workload::Register),
            "mutex" => Ok(Workload::Mutex),
            "fenced" => Ok(Workload::Fenced),
            "rwlock" => Ok(Workload::RwLock),
            "semaphore" => Ok(Workload::Semaphore),
            "lock-delay" => Ok(Workload::LockDelay),
            "multilock" => Ok(Workload::MultiLock),
            "zk-mutex" => Ok(Workload::ZkMutex),
            "etcd-mutex" => Ok(Workload::EtcdMutex),
            other => Err(format!(
                "unknown workload {other:?} \
                 (register, mutex, fenced, rwlock, semaphore, lock-delay, multilock, zk-mutex, etcd-mutex)"
            )),
        }
    }
}

/// What to check and how hard to try.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The workload; `None` detects it from the history.
    pub workload: Option<Workload>,
    /// Linearizability search limits.
    pub linear: linear::LinearConfig,
}

/// Runs every checker that applies to the history's workload.
///
/// Errors only when the history itself is malformed (see [`HistoryError`]);
/// checker problems are reported as `Unknown` results instead.
pub fn check_history(
    history: &History,
    opts: &CheckOptions,
) -> Result<Vec<CheckResult>, HistoryError> {
    let ops = history.operations()?;
    let workload = opts.workload.unwrap_or_else(|| Workload::detect(&ops));
    let results = match workload {
        Workload::Register => vec![
            linear_result(&RegisterModel, &ops, &opts.linear),
            lost_write::check(&ops).into_result(),
        ],
        Workload::Mutex => vec![linear_result(&MutexModel, &ops, &opts.linear)],
        Workload::Fenced | Workload::ZkMutex => vec![
            linear_result(&MutexModel, &ops, &opts.linear),
            fenced::check(&ops).into_result(),
        ],
        Workload::EtcdMutex => vec![
            linear_result(&MutexModel, &ops, &opts.linear),
            fenced::check(&ops).into_result(),
            lease_grant::check(&ops).into_result(),
        ],
        Workload::RwLock => vec![rwlock::check(&ops).into_result()],
        Workload::Semaphore => vec![semaphore::check(&ops).into_result()],
        Workload::LockDelay => vec![
            linear_result(&MutexModel, &ops, &opts.linear),
            lock_delay::check(&ops).into_result(),
        ],
        Workload::MultiLock => vec![multilock::check(&ops).into_result()],
    };
    Ok(results)
}

/// Runs [`linear::check`] and wraps it as a [`CheckResult`].
pub fn linear_result<M: Model>(
    model: &M,
    ops: &[Operation],
    config: &linear::LinearConfig,
) -> CheckResult {
    let report = linear::check(model, ops, config);
    let searched: usize = report.partitions.iter().map(|p| p.ops).sum();
    let summary = format!(
        "{} ops in {} partition(s), {} search steps, {} ms",
        searched,
        report.partitions.len(),
        report.steps(),
        report.elapsed_ms
    );
    let mut explanation = String::new();
    for e in &report.errors {
        explanation.push_str(&format!("uninterpretable op: {e}\n"));
    }
    for p in &report.partitions {
        if let Some(reason) = &p.reason {
            explanation.push_str(&format!("partition {:?}: unknown, {reason}\n", p.key));
        }
    }
    let highlight = report
        .failure()
        .map(|f| f.highlighted())
        .unwrap_or_default();
    if let Some(f) = report.failure() {
        explanation.push_str(&f.to_string());
    }
    CheckResult {
        checker: format!("linearizable({})", report.model),
        verdict: report.verdict,
        summary,
        explanation: (!explanation.is_empty()).then_some(explanation),
        highlight,
        details: serde_json::to_value(&report).unwrap_or(serde_json::Value::Null),
    }
}
