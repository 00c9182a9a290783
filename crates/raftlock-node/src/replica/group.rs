//! What group proposal (`proposer`) and group keepalives (`keepalives`)
//! share: at most `IN_FLIGHT` requests of a kind per node are
//! outstanding. An item that finds a free slot goes out at once, by
//! itself, from the caller's task (an idle node adds no delay). Otherwise
//! it queues, and one task per node turns the queue into requests:
//! whenever a slot frees, the next request takes everything queued (up to
//! the kind's caps). Each item still gets its own answer.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::Replica;
use crate::error::NodeError;

/// One kind of grouped request.
pub(crate) trait Kind: 'static {
    type Item: Send + 'static;
    type Output: Send + 'static;
    /// Requests outstanding at once from one node.
    const IN_FLIGHT: usize;
    /// Items per request at most.
    const MAX_ITEMS: usize;
    /// Once a request's items weigh this much, it takes no more.
    const MAX_WEIGHT: usize = usize::MAX;

    /// An item's share of `MAX_WEIGHT`.
    fn weight(_item: &Self::Item) -> usize {
        0
    }

    /// One attempt for an item that found a free slot, sent by itself.
    fn alone(
        replica: &Replica,
        item: Self::Item,
    ) -> impl Future<Output = Result<Self::Output, NodeError>> + Send + '_;

    /// One attempt for a queued group: one answer per item, in order.
    fn together(
        replica: Arc<Replica>,
        items: Vec<Self::Item>,
    ) -> impl Future<Output = Vec<Result<Self::Output, NodeError>>> + Send;
}

struct Pending<K: Kind> {
    item: K::Item,
    answer: oneshot::Sender<Result<K::Output, NodeError>>,
}

/// The queue side, held by the `Replica`.
pub(crate) struct Group<K: Kind> {
    queue: mpsc::UnboundedSender<Pending<K>>,
    /// Outstanding requests; shared with the task.
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

/// The task side, run by [`run`].
pub(crate) struct GroupQueue<K: Kind> {
    queue: mpsc::UnboundedReceiver<Pending<K>>,
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    items: AtomicU64,
}

impl Counters {
    fn count(&self, items: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.items.fetch_add(items as u64, Ordering::Relaxed);
    }
}

impl<K: Kind> Group<K> {
    pub(crate) fn new() -> (Group<K>, GroupQueue<K>) {
        let (queue, rx) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(K::IN_FLIGHT));
        let counters = Arc::new(Counters::default());
        let task_side = GroupQueue {
            queue: rx,
            slots: slots.clone(),
            counters: counters.clone(),
        };
        let group = Group {
            queue,
            slots,
            counters,
        };
        (group, task_side)
    }

    /// Requests sent so far.
    pub(crate) fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Items those requests carried.
    pub(crate) fn items(&self) -> u64 {
        self.counters.items.load(Ordering::Relaxed)
    }

    /// One attempt for `item`, alone if a slot is free, else in the next
    /// request: no retry (`NoLeader` and `OutcomeUnknown` are the
    /// caller's to handle).
    pub(crate) async fn submit(
        &self,
        replica: &Replica,
        item: K::Item,
    ) -> Result<K::Output, NodeError> {
        // Nothing outstanding: no request to ride along with, so skip the
        // queue (and the hop to the task).
        if let Ok(_slot) = self.slots.try_acquire() {
            self.counters.count(1);
            return K::alone(replica, item).await;
        }
        let (answer, rx) = oneshot::channel();
        self.queue
            .send(Pending { item, answer })
            .map_err(|_| NodeError::ShuttingDown)?;
        rx.await.unwrap_or(Err(NodeError::ShuttingDown))
    }
}

/// Drains the queue into requests until the node stops.
pub(crate) async fn run<K: Kind>(replica: Arc<Replica>, side: GroupQueue<K>) {
    let GroupQueue {
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
        // along in this request.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let group = drain(first, &mut queue);
        counters.count(group.len());
        let replica = replica.clone();
        tokio::spawn(async move {
            let (items, answers): (Vec<K::Item>, Vec<_>) =
                group.into_iter().map(|p| (p.item, p.answer)).unzip();
            let results = K::together(replica, items).await;
            drop(slot);
            for (answer, result) in answers.into_iter().zip(results) {
                // A caller that gave up is fine.
                let _ = answer.send(result);
            }
        });
    }
}

/// `first` and whatever else is queued, within the caps.
fn drain<K: Kind>(
    first: Pending<K>,
    queue: &mut mpsc::UnboundedReceiver<Pending<K>>,
) -> Vec<Pending<K>> {
    let mut weight = K::weight(&first.item);
    let mut group = vec![first];
    while group.len() < K::MAX_ITEMS && weight < K::MAX_WEIGHT {
        let Ok(next) = queue.try_recv() else { break };
        weight += K::weight(&next.item);
        group.push(next);
    }
    group
}
