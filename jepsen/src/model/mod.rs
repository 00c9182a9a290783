//! Sequential specifications that the linearizability checker replays.
//!
//! A [`Model`] says what a single-threaded, correct system would answer. The
//! checker looks for an order of the concurrent operations, consistent with
//! real time, in which every answer the clients saw is one the model allows.

pub mod mutex;
pub mod register;

use crate::history::Operation;
use std::fmt::Debug;
use std::hash::Hash;

pub use mutex::MutexModel;
pub use register::RegisterModel;

/// An operation the model cannot interpret (a harness bug, not a system bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operation #{index}: {reason}")]
pub struct ModelError {
    /// Invoke index of the operation.
    pub index: u64,
    /// What was wrong with it.
    pub reason: String,
}

impl ModelError {
    /// An error about `op`.
    pub fn new(op: &Operation, reason: impl Into<String>) -> Self {
        ModelError {
            index: op.index,
            reason: reason.into(),
        }
    }
}

/// A history op translated for a model: (what was asked, what was seen),
/// or `None` when the op does not concern the model.
pub type Translated<I, O> = Option<(I, O)>;

/// A sequential specification, as in Porcupine and Knossos.
///
/// `State` must be cheap to clone and hash: the search memoizes every
/// (linearized set, state) pair it has explored.
pub trait Model {
    /// The abstract state of the object (one partition of it).
    type State: Clone + Eq + Hash + Debug;
    /// What the client asked for.
    type Input: Debug;
    /// What the client observed. Models give `info` ops an output that
    /// means "unknown" and accept it wherever the input could take effect.
    type Output: Debug;

    /// A short name for reports, e.g. `register`.
    fn name(&self) -> &'static str;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Translates a history operation into model input and output.
    ///
    /// `Ok(None)` means the op is irrelevant to this model (another
    /// workload's function, or an `info` read that changes nothing) and is
    /// left out of the search. Only `ok` and `info` ops are passed in:
    /// `fail` ops definitely did not happen and are dropped before this.
    fn op(&self, op: &Operation) -> Result<Translated<Self::Input, Self::Output>, ModelError>;

    /// Applies `input` in `state`: `Some(next state)` when `output` is a
    /// legal answer there, `None` when it is not.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Self::Output,
    ) -> Option<Self::State>;

    /// Which independent partition an op belongs to (e.g. its key). Ops in
    /// different partitions never constrain each other, so each partition
    /// is checked on its own: a much smaller search. `None` (the default)
    /// puts everything in one partition.
    fn partition(&self, _op: &Operation) -> Option<String> {
        None
    }
}
