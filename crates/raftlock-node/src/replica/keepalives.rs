//! Group keepalives: concurrent keepalives on one node reach the leader
//! together, as concurrent writes do (`proposer`).
//!
//! Why: a keepalive is cheap at the leader (no log entry, see
//! `keepalive`), but one request per keepalive is not. Under a storm of
//! renewals (docs/overload.md: 50,000 sessions at a 1 s TTL) each
//! follower forwarded every keepalive as its own internal HTTP request,
//! and at the leader each waited for its own leadership confirmation,
//! woken by every acknowledged heartbeat. That cost grows with the number
//! of keepalives in flight, and a lock holder's keepalive queued behind
//! all of them.
//!
//! How: at most [`IN_FLIGHT`] keepalive requests per node are
//! outstanding. A keepalive that finds a free slot goes out at once, by
//! itself (an idle node adds no delay, and a lone keepalive keeps the
//! wire form older members know). Otherwise it queues, and one task turns
//! the queue into one request for everything queued (up to [`MAX_IDS`]),
//! answered with one confirmation at the leader (`keepalive`).
//!
//! Each keepalive still gets its own result and retry (`at_leader`): a
//! group is transport, nothing more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use raftlock_core::SessionId;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::Replica;
use crate::error::NodeError;

/// Keepalive requests outstanding at once from one node. Two, so that a
/// group held up by a slow step (a checkpointed session's renewal entry
/// after an election) does not hold every later keepalive behind it.
const IN_FLIGHT: usize = 2;
/// Sessions per request at most (16 bytes each).
const MAX_IDS: usize = 8_192;

type Answer = Result<u64, NodeError>;

struct Pending {
    id: SessionId,
    answer: oneshot::Sender<Answer>,
}

/// The queue side, held by the `Replica`.
pub(crate) struct Keepalives {
    queue: mpsc::UnboundedSender<Pending>,
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

/// The task side, run by [`run`].
pub(crate) struct KeepaliveQueue {
    queue: mpsc::UnboundedReceiver<Pending>,
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    keepalives: AtomicU64,
}

impl Counters {
    fn count(&self, keepalives: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.keepalives
            .fetch_add(keepalives as u64, Ordering::Relaxed);
    }
}

impl Keepalives {
    pub(crate) fn new() -> (Keepalives, KeepaliveQueue) {
        let (queue, rx) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let counters = Arc::new(Counters::default());
        let task_side = KeepaliveQueue {
            queue: rx,
            slots: slots.clone(),
            counters: counters.clone(),
        };
        (
            Keepalives {
                queue,
                slots,
                counters,
            },
            task_side,
        )
    }

    /// Requests that carried keepalives to the leader (or to this node's
    /// own leader role) so far.
    pub(crate) fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Keepalives those requests carried.
    pub(crate) fn keepalives(&self) -> u64 {
        self.counters.keepalives.load(Ordering::Relaxed)
    }

    /// One attempt to renew `id` through the leader, in the next request:
    /// no retry (`NoLeader` and `OutcomeUnknown` are the caller's).
    pub(crate) async fn renew(&self, replica: &Replica, id: SessionId) -> Answer {
        if let Ok(_slot) = self.slots.try_acquire() {
            self.counters.count(1);
            return replica.keepalive_once(id).await;
        }
        let (answer, rx) = oneshot::channel();
        self.queue
            .send(Pending { id, answer })
            .map_err(|_| NodeError::ShuttingDown)?;
        rx.await.unwrap_or(Err(NodeError::ShuttingDown))
    }
}

/// Drains the queue into grouped requests until the node stops.
pub(crate) async fn run(replica: Arc<Replica>, side: KeepaliveQueue) {
    let KeepaliveQueue {
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
        // along.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut group = vec![first];
        while group.len() < MAX_IDS {
            let Ok(next) = queue.try_recv() else { break };
            group.push(next);
        }
        counters.count(group.len());
        let replica = replica.clone();
        tokio::spawn(async move {
            let (ids, answers): (Vec<SessionId>, Vec<oneshot::Sender<Answer>>) =
                group.into_iter().map(|p| (p.id, p.answer)).unzip();
            let results = replica.keepalive_many_once(ids).await;
            drop(slot);
            for (answer, result) in answers.into_iter().zip(results) {
                // A caller that gave up is fine.
                let _ = answer.send(result);
            }
        });
    }
}
