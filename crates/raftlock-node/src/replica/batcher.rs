//! The batching shared by writes (`proposer`) and keepalives
//! (`keepalives`): concurrent requests on one node travel to the leader
//! together.
//!
//! How: at most `in_flight` batches per node are outstanding. A request
//! that finds a free slot goes out at once, by itself, from the caller's
//! task (an idle node adds no delay, nor a hop to another task).
//! Otherwise it queues, and one task per batcher turns the queue into
//! batches: whenever a slot frees, the next batch takes everything queued,
//! up to the caps.
//!
//! Each request still gets its own result (and its caller its own retry
//! decision): a batch is transport, nothing more.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::Replica;
use crate::error::NodeError;

/// How large one batch may grow: at most `items` requests, and no more
/// once the sum of `weight` over them reached `max_weight`.
pub(crate) struct Caps<T> {
    pub items: usize,
    pub weight: fn(&T) -> usize,
    pub max_weight: usize,
}

struct Pending<T, R> {
    item: T,
    answer: oneshot::Sender<Result<R, NodeError>>,
}

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    items: AtomicU64,
}

impl Counters {
    fn count(&self, items: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.items.fetch_add(items as u64, Ordering::Relaxed);
    }
}

/// The queue side, held by the `Replica`.
pub(crate) struct Batcher<T, R> {
    queue: mpsc::UnboundedSender<Pending<T, R>>,
    /// Outstanding batches; shared with the task.
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

/// The task side, run by [`run`].
pub(crate) struct BatchQueue<T, R> {
    queue: mpsc::UnboundedReceiver<Pending<T, R>>,
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

impl<T, R> Batcher<T, R> {
    /// A batcher with `in_flight` batches outstanding at most (at least
    /// one), and its task side.
    pub(crate) fn new(in_flight: usize) -> (Batcher<T, R>, BatchQueue<T, R>) {
        let (queue, rx) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(in_flight.max(1)));
        let counters = Arc::new(Counters::default());
        let task_side = BatchQueue {
            queue: rx,
            slots: slots.clone(),
            counters: counters.clone(),
        };
        let batcher = Batcher {
            queue,
            slots,
            counters,
        };
        (batcher, task_side)
    }

    /// Batches sent so far (a request sent alone counts as one).
    pub(crate) fn batches(&self) -> u64 {
        self.counters.batches.load(Ordering::Relaxed)
    }

    /// Requests those batches carried.
    pub(crate) fn items(&self) -> u64 {
        self.counters.items.load(Ordering::Relaxed)
    }

    /// `item`'s result: sent by `alone` from this task when no batch is
    /// outstanding, else in the next batch of [`run`].
    pub(crate) async fn send<F, Fut>(&self, item: T, alone: F) -> Result<R, NodeError>
    where
        F: FnOnce(T) -> Fut,
        Fut: Future<Output = Result<R, NodeError>>,
    {
        // Nothing outstanding: no batch to ride along with, so skip the
        // queue (and the hop to the batching task).
        if let Ok(_slot) = self.slots.try_acquire() {
            self.counters.count(1);
            return alone(item).await;
        }
        let (answer, rx) = oneshot::channel();
        self.queue
            .send(Pending { item, answer })
            .map_err(|_| NodeError::ShuttingDown)?;
        rx.await.unwrap_or(Err(NodeError::ShuttingDown))
    }
}

/// Drains the queue into batches until the node stops; `submit` sends
/// one batch and returns one result per request, in order.
pub(crate) async fn run<T, R, F, Fut>(
    replica: Arc<Replica>,
    side: BatchQueue<T, R>,
    caps: &Caps<T>,
    submit: F,
) where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Arc<Replica>, Vec<T>) -> Fut,
    Fut: Future<Output = Vec<Result<R, NodeError>>> + Send + 'static,
{
    let BatchQueue {
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
        // along in this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let batch = drain(first, &mut queue, caps);
        counters.count(batch.len());
        let (items, answers): (Vec<T>, Vec<oneshot::Sender<Result<R, NodeError>>>) =
            batch.into_iter().map(|p| (p.item, p.answer)).unzip();
        let sent = submit(replica.clone(), items);
        tokio::spawn(async move {
            let mut results = sent.await.into_iter();
            drop(slot);
            for answer in answers {
                let result = results
                    .next()
                    .unwrap_or_else(|| Err(NodeError::internal("a batched request had no result")));
                // A caller that gave up is fine.
                let _ = answer.send(result);
            }
        });
    }
}

/// `first` and whatever else is queued, within `caps`.
fn drain<T, R>(
    first: Pending<T, R>,
    queue: &mut mpsc::UnboundedReceiver<Pending<T, R>>,
    caps: &Caps<T>,
) -> Vec<Pending<T, R>> {
    let mut weight = (caps.weight)(&first.item);
    let mut batch = vec![first];
    while batch.len() < caps.items && weight < caps.max_weight {
        let Ok(next) = queue.try_recv() else { break };
        weight += (caps.weight)(&next.item);
        batch.push(next);
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(
        n: usize,
    ) -> (
        mpsc::UnboundedReceiver<Pending<usize, ()>>,
        Pending<usize, ()>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        for i in 1..n {
            let (answer, _) = oneshot::channel();
            let _ = tx.send(Pending { item: i, answer });
        }
        let (answer, _) = oneshot::channel();
        (rx, Pending { item: 0, answer })
    }

    #[test]
    fn a_batch_stops_at_either_cap() {
        let by_count = Caps {
            items: 3,
            weight: |_| 1,
            max_weight: usize::MAX,
        };
        let (mut rx, first) = queued(10);
        assert_eq!(drain(first, &mut rx, &by_count).len(), 3);
        // The weight cap is reached by the item that crosses it.
        let by_weight = Caps {
            items: 100,
            weight: |_| 40,
            max_weight: 100,
        };
        let (mut rx, first) = queued(10);
        assert_eq!(drain(first, &mut rx, &by_weight).len(), 3);
        let (mut rx, first) = queued(2);
        assert_eq!(drain(first, &mut rx, &by_count).len(), 2);
    }
}
