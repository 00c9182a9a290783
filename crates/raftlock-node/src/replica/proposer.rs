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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use raftlock_core::{AclEntry, Applied, Command, Compare, TreeOp, TxnOp};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::at_leader::{LeaderAnswer, LeaderRequest};
use super::Replica;
use crate::error::NodeError;
use crate::typ::{Proposal, Reply};

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

struct Pending {
    command: Command,
    answer: oneshot::Sender<Attempt>,
}

/// The queue side, held by the `Replica`.
pub(crate) struct Proposer {
    queue: mpsc::UnboundedSender<Pending>,
    /// Outstanding proposals; shared with the task.
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    proposals: AtomicU64,
    commands: AtomicU64,
}

impl Counters {
    fn count(&self, commands: usize) {
        self.proposals.fetch_add(1, Ordering::Relaxed);
        self.commands.fetch_add(commands as u64, Ordering::Relaxed);
    }
}

/// The task side, run by [`run`].
pub(crate) struct ProposerQueue {
    queue: mpsc::UnboundedReceiver<Pending>,
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

impl Proposer {
    pub(crate) fn new() -> (Proposer, ProposerQueue) {
        let (queue, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let task_side = ProposerQueue {
            queue: rx,
            slots: slots.clone(),
            counters: counters.clone(),
        };
        let proposer = Proposer {
            queue,
            slots,
            counters,
        };
        (proposer, task_side)
    }

    /// Proposals sent so far.
    pub(crate) fn proposals(&self) -> u64 {
        self.counters.proposals.load(Ordering::Relaxed)
    }

    /// Commands carried by those proposals.
    pub(crate) fn commands(&self) -> u64 {
        self.counters.commands.load(Ordering::Relaxed)
    }

    /// Sends `command` to the current leader in the next proposal: one
    /// attempt, with no retry (`NoLeader` and `OutcomeUnknown` are the
    /// caller's to handle).
    pub(crate) async fn propose(&self, replica: &Replica, command: Command) -> Attempt {
        // Nothing outstanding: no proposal to ride along with, so skip the
        // queue (and the hop to the proposer task).
        if let Ok(_slot) = self.slots.try_acquire() {
            self.counters.count(1);
            return match attempt(replica, vec![command]).await {
                Ok((index, results)) => results
                    .into_iter()
                    .next()
                    .map(|applied| (index, applied))
                    .ok_or_else(|| NodeError::internal("a command had no result")),
                Err(e) => Err(e),
            };
        }
        let (answer, rx) = oneshot::channel();
        self.queue
            .send(Pending { command, answer })
            .map_err(|_| NodeError::ShuttingDown)?;
        rx.await.unwrap_or(Err(NodeError::ShuttingDown))
    }
}

/// Drains the queue into proposals until the node stops.
pub(crate) async fn run(replica: Arc<Replica>, side: ProposerQueue) {
    let ProposerQueue {
        mut queue,
        slots,
        counters,
    } = side;
    loop {
        let first = tokio::select! {
            next = queue.recv() => match next {
                Some(p) => p,
                None => return,
            },
            _ = replica.shutdown.stopped() => return,
        };
        // Wait for a slot before draining: whatever queues meanwhile rides
        // along in this proposal.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let batch = drain(first, &mut queue);
        counters.count(batch.len());
        let replica = replica.clone();
        tokio::spawn(async move {
            submit(&replica, batch).await;
            drop(slot);
        });
    }
}

/// `first` and whatever else is queued, within the caps.
fn drain(first: Pending, queue: &mut mpsc::UnboundedReceiver<Pending>) -> Vec<Pending> {
    let mut bytes = weight(&first.command);
    let mut batch = vec![first];
    while batch.len() < MAX_COMMANDS && bytes < MAX_BYTES {
        let Ok(next) = queue.try_recv() else { break };
        bytes += weight(&next.command);
        batch.push(next);
    }
    batch
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

/// One attempt for the whole batch; every pending write gets its own
/// command's outcome.
async fn submit(replica: &Replica, batch: Vec<Pending>) {
    let (commands, answers): (Vec<Command>, Vec<oneshot::Sender<Attempt>>) =
        batch.into_iter().map(|p| (p.command, p.answer)).unzip();
    match attempt(replica, commands).await {
        Ok((index, results)) => {
            for (answer, applied) in answers.into_iter().zip(results) {
                // A caller that gave up is fine.
                let _ = answer.send(Ok((index, applied)));
            }
        }
        Err(e) => {
            for answer in answers {
                let _ = answer.send(Err(e.clone()));
            }
        }
    }
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
