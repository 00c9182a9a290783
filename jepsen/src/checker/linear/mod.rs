//! Linearizability checking of a history against a [`Model`].
//!
//! Each partition the model declares (e.g. each key) is checked on its own
//! by a Wing–Gong–Lowe search with memoization (module `search`). `fail` ops are
//! dropped (they did not happen); `info` ops may or may not have happened.
//! A partition that exhausts its step budget, or any partition reached after
//! the time limit, is `Unknown`: the checker never reports `Valid` for a
//! history it did not fully search.

mod bitset;
mod failure;
mod search;

pub use failure::{Candidate, LinearFailure};

use super::Verdict;
use crate::history::{Operation, Outcome};
use crate::model::Model;
use search::{Budget, SearchOp};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Search limits.
#[derive(Debug, Clone)]
pub struct LinearConfig {
    /// Search steps allowed per partition before giving up with `Unknown`.
    /// Deterministic, unlike time, so a verdict replays identically.
    pub max_steps: u64,
    /// Wall-clock limit for the whole check; partitions not finished by
    /// then are `Unknown`.
    pub time_limit: Option<Duration>,
}

impl Default for LinearConfig {
    /// Two billion steps per partition and five minutes in all. A
    /// 10-minute mutex campaign under every nemesis with the disk faults
    /// and membership changes (one partition of about 12,700 ops, a few
    /// hundred of them indeterminate acquires) needed 229–350 million
    /// steps (12–23 s); the old default of 200 million answered `unknown`.
    fn default() -> Self {
        LinearConfig {
            max_steps: 2_000_000_000,
            time_limit: Some(Duration::from_secs(300)),
        }
    }
}

/// The result for one partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionReport {
    /// The partition key (`None` for the single default partition).
    pub key: Option<String>,
    /// Ops searched (`ok` and `info` the model cares about).
    pub ops: usize,
    /// This partition's verdict.
    pub verdict: Verdict,
    /// Search steps taken.
    pub steps: u64,
    /// Why the verdict is `Unknown`, if it is.
    pub reason: Option<String>,
    /// The violation, if `Invalid`.
    pub failure: Option<LinearFailure>,
}

/// The result of a linearizability check.
#[derive(Debug, Clone, Serialize)]
pub struct LinearReport {
    /// The model's name.
    pub model: String,
    /// `Invalid` if any partition is; else `Unknown` if any partition is or
    /// an op could not be interpreted; else `Valid`.
    pub verdict: Verdict,
    /// Per-partition results, in key order.
    pub partitions: Vec<PartitionReport>,
    /// Ops the model could not interpret (harness bugs).
    pub errors: Vec<String>,
    /// How long the check took, in milliseconds.
    pub elapsed_ms: u64,
}

impl LinearReport {
    /// The first violation found, if any.
    pub fn failure(&self) -> Option<&LinearFailure> {
        self.partitions.iter().find_map(|p| p.failure.as_ref())
    }

    /// Total search steps over all partitions.
    pub fn steps(&self) -> u64 {
        self.partitions.iter().map(|p| p.steps).sum()
    }
}

/// The ops of one partition, with their model input and output.
type Members<'a, M> = Vec<(&'a Operation, <M as Model>::Input, <M as Model>::Output)>;

/// Checks `ops` against `model`.
pub fn check<M: Model>(model: &M, ops: &[Operation], config: &LinearConfig) -> LinearReport {
    let started = Instant::now();
    let deadline = config.time_limit.map(|t| started + t);
    let mut errors = Vec::new();
    let mut parts: BTreeMap<Option<String>, Members<'_, M>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.outcome != Outcome::Fail) {
        match model.op(op) {
            Ok(Some((input, output))) => parts
                .entry(model.partition(op))
                .or_default()
                .push((op, input, output)),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }

    let mut partitions = Vec::with_capacity(parts.len());
    for (key, members) in parts {
        let budget = Budget {
            max_steps: config.max_steps,
            deadline,
        };
        partitions.push(check_partition(model, key, members, &budget));
    }

    let verdict = if partitions.iter().any(|p| p.verdict == Verdict::Invalid) {
        Verdict::Invalid
    } else if !errors.is_empty() || partitions.iter().any(|p| p.verdict == Verdict::Unknown) {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    LinearReport {
        model: model.name().to_string(),
        verdict,
        partitions,
        errors,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

fn check_partition<M: Model>(
    model: &M,
    key: Option<String>,
    members: Members<'_, M>,
    budget: &Budget,
) -> PartitionReport {
    let n = members.len();
    if budget.deadline.is_some_and(|d| Instant::now() >= d) {
        return PartitionReport {
            key,
            ops: n,
            verdict: Verdict::Unknown,
            steps: 0,
            reason: Some("time limit reached before this partition".into()),
            failure: None,
        };
    }
    let mut originals = Vec::with_capacity(n);
    let mut search_ops = Vec::with_capacity(n);
    for (op, input, output) in members {
        originals.push(op);
        search_ops.push(SearchOp {
            input,
            output,
            call: op.call,
            ret: op.ret,
        });
    }
    let (outcome, steps) = search::search(model, &search_ops, budget);
    let (verdict, reason, failure) = match outcome {
        search::Outcome::Valid => (Verdict::Valid, None, None),
        search::Outcome::Unknown(why) => (Verdict::Unknown, Some(why.to_string()), None),
        search::Outcome::Invalid(stuck) => (
            Verdict::Invalid,
            None,
            Some(LinearFailure::from_stuck(key.clone(), &stuck, &originals)),
        ),
    };
    PartitionReport {
        key,
        ops: n,
        verdict,
        steps,
        reason,
        failure,
    }
}
