//! Group proposal: concurrent writes submitted on one node travel to the
//! leader together and become one Raft log entry.
//!
//! Why: every log entry costs a replication round, a durability barrier on
//! each member and a wake-up of every task along the way. Under load most
//! of a write's cost was that per-entry overhead, not the command itself.
//! A forwarding follower also needed one HTTP request (and, under a burst,
//! one connection) per write; 1,000 concurrent acquires on a follower
//! opened hundreds of connections to the leader.
//!
//! How: at most [`IN_FLIGHT`] proposals per node are outstanding. A write
//! that finds a free slot goes out at once, by itself, from the caller's
//! task (an idle node adds no delay). Otherwise it queues, and one task
//! per node turns the queue into proposals: whenever a slot frees, the
//! next proposal takes everything queued (up to the caps).
//!
//! Each command still gets its own result and its own retry decision (in
//! `Replica::write`): a proposal is transport, not a transaction.

use std::sync::Arc;

use raftlock_core::{AclEntry, Applied, Command, Compare, TreeOp, TxnOp};

use super::at_leader::{LeaderAnswer, LeaderRequest};
use super::group::{Group, Kind};
use super::Replica;
use crate::error::NodeError;
use crate::raft::typ::{Proposal, Reply};

/// Proposals outstanding at once from one node. More would let a lone
/// write skip the queue behind a large proposal; fewer makes proposals
/// larger, and each proposal costs a durability barrier on every member.
/// Measured (64 clients, `raftlock-bench … --workloads uncontended`,
/// alternating builds, 5 pairs): 1 beat 2 in four pairs (2,076–3,205 vs
/// 1,251–2,443 cycles/s), and 4 was worst (1,231–1,328).
const IN_FLIGHT: usize = 1;
/// Caps on one proposal, so one entry stays a modest replication message.
const MAX_COMMANDS: usize = 512;
const MAX_BYTES: usize = 4 * 1024 * 1024;

/// The outcome of one attempt: the entry's log index and the command's own
/// result.
pub(crate) type Attempt = Result<(u64, Applied), NodeError>;

/// Writes, grouped into proposals.
pub(crate) struct Writes;

/// The queue side, held by the `Replica`: `submit` sends a command to the
/// current leader in the next proposal.
pub(crate) type Proposer = Group<Writes>;

impl Kind for Writes {
    type Item = Command;
    type Output = (u64, Applied);
    const IN_FLIGHT: usize = IN_FLIGHT;
    const MAX_ITEMS: usize = MAX_COMMANDS;
    const MAX_WEIGHT: usize = MAX_BYTES;

    fn weight(command: &Command) -> usize {
        weight(command)
    }

    async fn alone(replica: &Replica, command: Command) -> Attempt {
        match attempt(replica, vec![command]).await {
            Ok((index, results)) => results
                .into_iter()
                .next()
                .map(|applied| (index, applied))
                .ok_or_else(|| NodeError::internal("a command had no result")),
            Err(e) => Err(e),
        }
    }

    /// One attempt for the whole batch; every pending write gets its own
    /// command's outcome.
    async fn together(replica: Arc<Replica>, commands: Vec<Command>) -> Vec<Attempt> {
        let n = commands.len();
        match attempt(&replica, commands).await {
            Ok((index, results)) => results
                .into_iter()
                .map(|applied| Ok((index, applied)))
                .collect(),
            Err(e) => vec![Err(e); n],
        }
    }
}

/// Rough encoded size: the payload plus a generous allowance for the rest.
fn weight(command: &Command) -> usize {
    let payload = match command {
        Command::Put { data, .. }
        | Command::Acquire { data, .. }
        | Command::Proclaim { value: data, .. } => data.len(),
        Command::CheckpointSessions { sessions } => 24 * sessions.len(),
        Command::RenewSessions { ids } => 16 * ids.len(),
        Command::AcquireMulti { locks, .. } | Command::ReleaseMulti { locks, .. } => {
            locks.iter().map(String::len).sum()
        }
        Command::GuardedWrite { op, .. } => op_weight(op),
        Command::TreeOps { ops } => ops
            .iter()
            .map(|op| match op {
                TreeOp::Create { data, .. } | TreeOp::SetData { data, .. } => data.len(),
                TreeOp::CreateWithAcl { data, acl, .. } => data.len() + acl_weight(acl),
                TreeOp::ReplaceAcl { acl, .. } => acl_weight(acl),
                TreeOp::Delete { .. } | TreeOp::Check { .. } | TreeOp::SetAcl { .. } => 0,
            } + op.path().len() + 32)
            .sum(),
        Command::Txn {
            compare,
            success,
            failure,
        } => {
            let compares: usize = compare
                .iter()
                .map(|c| match c {
                    Compare::Value { path, value } => path.len() + value.len(),
                    Compare::Version { path, .. } => path.len(),
                    Compare::Holder(guard) => guard.lock.len(),
                })
                .sum();
            compares + success.iter().chain(failure).map(op_weight).sum::<usize>()
        }
        Command::Stamped { command, .. } => return weight(command) + 8,
        Command::Kv(op) => op.weight(),
        _ => 0,
    };
    payload + 128
}

/// An ACL's strings and numbers.
fn acl_weight(acl: &[AclEntry]) -> usize {
    acl.iter().map(|e| e.scheme.len() + e.id.len() + 20).sum()
}

/// A transaction operation's payload and a per-operation allowance.
fn op_weight(op: &TxnOp) -> usize {
    let data = match op {
        TxnOp::Put { data, .. } => data.len(),
        TxnOp::Delete { .. } => 0,
    };
    op.path().len() + data + 32
}

/// Proposes `commands` as one entry through the leader as this node sees
/// it. Returns the entry's index and one result per command, in order.
/// Bounded: the attempt (and with it the slot it holds) ends within the
/// leader wait, whatever the leader does.
async fn attempt(
    replica: &Replica,
    commands: Vec<Command>,
) -> Result<(u64, Vec<Applied>), NodeError> {
    let expected = commands.len();
    let answer = replica
        .once(LeaderRequest::Write(Proposal(commands)))
        .await?;
    let LeaderAnswer::Written {
        index,
        reply: Reply(results),
    } = answer
    else {
        return Err(NodeError::internal(format!(
            "the leader answered a write with {answer:?}"
        )));
    };
    if results.len() != expected {
        return Err(NodeError::internal(format!(
            "a proposal of {expected} commands had {} results",
            results.len()
        )));
    }
    Ok((index, results))
}
