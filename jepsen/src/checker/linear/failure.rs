//! A human-readable account of a linearizability violation.

use super::search::Stuck;
use crate::history::Operation;
use serde::Serialize;
use std::fmt;

/// How many ops of the linearizable prefix a report shows.
const PREFIX_SHOWN: usize = 8;
/// How many real-time-overlapping ops a report lists.
const OVERLAP_SHOWN: usize = 20;

/// An op that could have been linearized next at the failure point.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The operation.
    pub op: Operation,
    /// Whether the model accepts it from the state after the prefix. An
    /// accepted candidate still failed: every continuation after it did.
    pub legal_here: bool,
}

/// The smallest window that shows why a partition is not linearizable.
///
/// The search reports the deepest point it reached: the longest prefix of
/// operations it could linearize, the op whose deadline (return time) passed
/// there without it being linearizable, and the ops concurrent with it
/// (every op invoked before it returned and not yet linearized).
#[derive(Debug, Clone, Serialize)]
pub struct LinearFailure {
    /// The partition key.
    pub key: Option<String>,
    /// The op that could not be linearized.
    pub op: Operation,
    /// The model state after the prefix, as the model prints it.
    pub state: String,
    /// Invoke indexes of the longest linearizable prefix, in order.
    pub prefix: Vec<u64>,
    /// The last few ops of that prefix, for reading.
    pub prefix_tail: Vec<Operation>,
    /// The candidates at the failure point: ops not yet linearized that
    /// began before the failing op's return.
    pub concurrent: Vec<Candidate>,
    /// Ops whose real-time interval overlaps the failing op's (linearized
    /// or not), in invocation order: the neighbourhood to look at first.
    pub overlapping: Vec<Operation>,
}

impl LinearFailure {
    pub(super) fn from_stuck<S: fmt::Debug>(
        key: Option<String>,
        stuck: &Stuck<S>,
        originals: &[&Operation],
    ) -> Self {
        let prefix: Vec<u64> = stuck.prefix.iter().map(|&i| originals[i].index).collect();
        let tail_start = stuck.prefix.len().saturating_sub(PREFIX_SHOWN);
        let bad = originals[stuck.blocking];
        let overlapping = originals
            .iter()
            .filter(|o| o.index != bad.index)
            .filter(|o| bad.ret.is_none_or(|r| o.call <= r) && o.ret.is_none_or(|r| r >= bad.call))
            .take(OVERLAP_SHOWN)
            .map(|o| (*o).clone())
            .collect();
        LinearFailure {
            key,
            op: bad.clone(),
            state: format!("{:?}", stuck.state),
            prefix,
            prefix_tail: stuck.prefix[tail_start..]
                .iter()
                .map(|&i| originals[i].clone())
                .collect(),
            concurrent: stuck
                .candidates
                .iter()
                .map(|&(i, legal_here)| Candidate {
                    op: originals[i].clone(),
                    legal_here,
                })
                .collect(),
            overlapping,
        }
    }

    /// Invoke indexes of the ops worth highlighting: the failing op and its
    /// concurrent window.
    pub fn highlighted(&self) -> Vec<u64> {
        let mut v: Vec<u64> = std::iter::once(self.op.index)
            .chain(self.concurrent.iter().map(|c| c.op.index))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl fmt::Display for LinearFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => writeln!(f, "not linearizable (key {k:?}): this op cannot be placed:")?,
            None => writeln!(f, "not linearizable: this op cannot be placed:")?,
        }
        writeln!(f, "    {}", self.op)?;
        let hidden = self.prefix.len() - self.prefix_tail.len();
        write!(
            f,
            "  after the longest linearizable prefix ({} ops",
            self.prefix.len()
        )?;
        if hidden > 0 {
            write!(f, ", {hidden} earlier not shown")?;
        }
        writeln!(f, "):")?;
        if self.prefix_tail.is_empty() {
            writeln!(f, "    (none)")?;
        }
        for op in &self.prefix_tail {
            writeln!(f, "    {op}")?;
        }
        writeln!(f, "  model state after the prefix: {}", self.state)?;
        writeln!(f, "  concurrent ops that could have gone next:")?;
        for c in &self.concurrent {
            let why = if c.legal_here {
                "legal here, but no continuation works"
            } else {
                "illegal in this state"
            };
            writeln!(f, "    {}  <- {why}", c.op)?;
        }
        if !self.overlapping.is_empty() {
            writeln!(f, "  ops overlapping it in real time:")?;
            for op in &self.overlapping {
                writeln!(f, "    {op}")?;
            }
        }
        Ok(())
    }
}
