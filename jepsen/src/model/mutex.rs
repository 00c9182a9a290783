//! A lock with one owner at a time, one lock per key.
//!
//! # Owners
//! The owner is the client **process**. The harness gives each raftlock
//! session its own process id and never reuses it for another session
//! (Jepsen's convention: a client whose op ended `info` continues under a
//! fresh process). This keeps the model state a single `Option<u64>`.
//!
//! # Operations
//! - `acquire` ok: the lock was granted. Legal when it is free, or already
//!   held by the same owner (raftlock's acquire is idempotent per session).
//! - `release` ok: legal only by the holder; the lock becomes free.
//!   A `release` that the server answers without the caller holding the lock
//!   (a waiter cancelling) must not be recorded as `release`: after an
//!   uncertain acquire, the harness should close the session and record
//!   `expire` instead (below).
//! - `fail`: did not happen (e.g. `lock_held`, `timeout`); dropped.
//! - `info` acquire: the grant may have happened at any time after the
//!   invocation (a queued node can be granted after the client gave up), or
//!   never. While it could hold the lock, nobody else may acquire it, so a
//!   later acknowledged grant to someone else forces the search to place
//!   the uncertain grant *never* or before an `expire`.
//!
//! # Session expiry
//! A session the server expires loses its locks without the client asking.
//! The harness records the end of a session as an op with `f = expire`
//! (the server said it was gone) or `lost` (the client's deadline passed,
//! or it gave the session up) by the owning process, invoked at the
//! instant the client *observed* the loss — by the Rust client's rule, the
//! send time of its last successful keepalive + ttl − margin, or the
//! `session_not_found` answer — and completed when recorded. A client
//! holds the lock until then: the window must not start at the last
//! instant the session was known alive, or an isolated leader renewing
//! sessions from memory (docs/adr/0006-keepalives-need-a-quorum.md) goes unseen. The model treats the op as
//! a release of whatever that owner held, placed anywhere inside the
//! window; it is legal whether or not the owner held the lock. Without
//! such an op, a lock held by a dead session stays held in the model, and
//! a later grant to another owner is a violation, which is exactly the
//! guarantee a lock must give.
//!
//! An `expire` whose invocation value is a process id (an integer) ends
//! *that* process's session instead of its own. The run driver records
//! expiries this way, under a fresh process: the window then starts at the
//! instant of the loss even when the owner was still in the middle of an
//! operation (a release being retried, a paused increment).

use super::{Model, ModelError, Translated};
use crate::history::{Operation, Outcome, Process, Value, F};

/// The mutex model; the state is the current holder (`None` = free).
#[derive(Debug, Clone, Copy, Default)]
pub struct MutexModel;

/// A lock operation, by owner (process id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexInput {
    /// Ask for the lock.
    Acquire(u64),
    /// Give it back.
    Release(u64),
    /// The owner's session ended; the server dropped its hold, if any.
    Expire(u64),
}

/// What the client observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexOutput {
    /// Acknowledged.
    Ok,
    /// Unknown outcome (`info`).
    Unknown,
}

impl Model for MutexModel {
    type State = Option<u64>;
    type Input = MutexInput;
    type Output = MutexOutput;

    fn name(&self) -> &'static str {
        "mutex"
    }

    fn init(&self) -> Option<u64> {
        None
    }

    fn op(&self, op: &Operation) -> Result<Translated<MutexInput, MutexOutput>, ModelError> {
        let owner = match op.process {
            Process::Client(p) => p,
            Process::Nemesis => return Ok(None),
        };
        let input = match op.f {
            F::Acquire => MutexInput::Acquire(owner),
            F::Release => MutexInput::Release(owner),
            F::Expire | F::Lost => MutexInput::Expire(match op.invoke_value {
                // On behalf of another process (see the module docs).
                Value::Int(p) => u64::try_from(p)
                    .map_err(|_| ModelError::new(op, format!("expire of process {p}")))?,
                _ => owner,
            }),
            _ => return Ok(None),
        };
        let output = match op.outcome {
            Outcome::Ok => MutexOutput::Ok,
            Outcome::Info => MutexOutput::Unknown,
            Outcome::Fail => return Ok(None),
        };
        Ok(Some((input, output)))
    }

    fn step(
        &self,
        holder: &Option<u64>,
        input: &MutexInput,
        _output: &MutexOutput,
    ) -> Option<Option<u64>> {
        // Ok and Unknown share one rule: Unknown means "it took effect here",
        // and an op that never took effect is simply never linearized.
        match *input {
            MutexInput::Acquire(p) => match *holder {
                None => Some(Some(p)),
                Some(h) if h == p => Some(Some(p)),
                Some(_) => None,
            },
            MutexInput::Release(p) => (*holder == Some(p)).then_some(None),
            MutexInput::Expire(p) => Some(if *holder == Some(p) { None } else { *holder }),
        }
    }

    fn partition(&self, op: &Operation) -> Option<String> {
        op.key.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_rules() {
        let m = MutexModel;
        let ok = MutexOutput::Ok;
        assert_eq!(m.step(&None, &MutexInput::Acquire(1), &ok), Some(Some(1)));
        assert_eq!(
            m.step(&Some(1), &MutexInput::Acquire(1), &ok),
            Some(Some(1))
        );
        assert_eq!(m.step(&Some(1), &MutexInput::Acquire(2), &ok), None);
        assert_eq!(m.step(&Some(1), &MutexInput::Release(2), &ok), None);
        assert_eq!(m.step(&None, &MutexInput::Release(2), &ok), None);
        assert_eq!(m.step(&Some(1), &MutexInput::Release(1), &ok), Some(None));
        assert_eq!(m.step(&Some(1), &MutexInput::Expire(1), &ok), Some(None));
        assert_eq!(m.step(&Some(1), &MutexInput::Expire(2), &ok), Some(Some(1)));
    }
}
