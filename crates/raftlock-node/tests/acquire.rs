//! Timed-out acquires: what a timeout leaves queued, and waits longer
//! than one request that keep their place in line.

mod common;

use std::time::Duration;

use common::{acquire_in_task, holding, settings, Cluster, WAIT};
use raftlock_node::core::QueueKind;
use raftlock_node::{AcquireOptions, Consistency, Node, NodeError};

/// Bound for an operation on a member cut off from the cluster.
const BOUND: Duration = Duration::from_secs(10);

/// The waiters of lock `name`, in queue order (linearizable).
async fn waiters(node: &Node, name: &str) -> Vec<raftlock_node::core::SessionId> {
    node.read_state(Consistency::Linearizable, |s| {
        s.queue(QueueKind::Lock, name)
            .waiters
            .into_iter()
            .map(|w| w.session)
            .collect()
    })
    .await
    .expect("read")
}

/// Finding 3: a timed-out acquire withdrew its node only if this very
/// request had created it. A retried acquire (the first one's answer was
/// lost) re-attaches to the existing node (`created: false`), so its
/// timeout left the node queued while telling the client nothing was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_retry_withdraws_the_node_an_earlier_request_queued() {
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(1).clone();
    holding(&node, "holder", Duration::from_secs(30), "r").await;
    let waiter = node
        .open_session("waiter", Duration::from_secs(30))
        .await
        .expect("open");
    // The first request queues the node; keep it there on timeout, as a
    // request whose answer was lost would leave it.
    let keep = AcquireOptions {
        wait: Duration::from_millis(100),
        keep_queued: true,
    };
    let first = node
        .acquire_with(QueueKind::Lock, "r", waiter.id, vec![], keep)
        .await;
    assert_eq!(first, Err(NodeError::Timeout));
    assert_eq!(waiters(&node, "r").await, vec![waiter.id], "kept queued");
    // The retry finds the existing node and times out: it must withdraw
    // it, whoever created it.
    let retry = node
        .acquire(
            QueueKind::Lock,
            "r",
            waiter.id,
            vec![],
            Duration::from_millis(100),
        )
        .await;
    assert_eq!(retry, Err(NodeError::Timeout));
    assert!(waiters(&node, "r").await.is_empty(), "nothing left queued");
    cluster.shutdown().await;
}

/// Finding 3, second path: when the withdrawal after a timeout fails, the
/// node may still be queued, so the answer is `OutcomeUnknown`, never
/// `Timeout` (which promises nothing is left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_whose_withdrawal_fails_is_an_unknown_outcome() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let follower_id = (1..=3).find(|id| *id != leader_id).expect("a follower");
    let follower = cluster.node(follower_id).clone();
    holding(&follower, "holder", Duration::from_secs(30), "w").await;
    let waiter = follower
        .open_session("waiter", Duration::from_secs(30))
        .await
        .expect("open");
    let waiting = acquire_in_task(&follower, "w", waiter.id, Duration::from_secs(1));
    // The waiter is queued; then its member loses the cluster, so the
    // withdrawal at the end of the wait cannot reach a leader.
    common::eventually("the waiter to queue", WAIT, || {
        follower.counters().waiter_registrations > 0
    })
    .await;
    cluster.inner.isolate(follower_id, true);
    let outcome = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("bounded")
        .expect("task");
    assert!(
        matches!(outcome, Err(NodeError::OutcomeUnknown(_))),
        "{outcome:?}"
    );
    cluster.inner.isolate(follower_id, false);
    cluster.shutdown().await;
}

/// Finding 5: a wait longer than one request lost its place in line, as
/// every poll's timeout withdrew the node and the next poll queued anew at
/// the back. With `keep_queued` the node stays, the next poll re-attaches
/// to it, and the earlier waiter is granted first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_in_several_polls_keeps_its_place_in_line() {
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(2).clone();
    let open = |owner: &'static str| {
        let node = node.clone();
        async move {
            node.open_session(owner, Duration::from_secs(30))
                .await
                .expect("open")
        }
    };
    let (holder, early, late) = (
        open("holder").await,
        open("early").await,
        open("late").await,
    );
    node.acquire(QueueKind::Lock, "fifo", holder.id, vec![], WAIT)
        .await
        .expect("held");
    let poll = AcquireOptions {
        wait: Duration::from_millis(100),
        keep_queued: true,
    };
    assert_eq!(
        node.acquire_with(QueueKind::Lock, "fifo", early.id, vec![], poll)
            .await,
        Err(NodeError::Timeout),
        "the first poll times out"
    );
    let late_waits = acquire_in_task(&node, "fifo", late.id, WAIT);
    let in_line = async {
        while waiters(&node, "fifo").await.len() < 2 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(WAIT, in_line)
        .await
        .expect("late queues");
    assert_eq!(waiters(&node, "fifo").await, vec![early.id, late.id]);
    // The next poll re-attaches to the same node, ahead of `late`.
    let early_waits = acquire_in_task(&node, "fifo", early.id, WAIT);
    node.release(QueueKind::Lock, "fifo", holder.id)
        .await
        .expect("release");
    let early_grant = early_waits.await.expect("task").expect("early granted");
    assert_eq!(early_grant.session, early.id);
    assert_eq!(
        waiters(&node, "fifo").await,
        vec![late.id],
        "late still waits"
    );
    node.release(QueueKind::Lock, "fifo", early.id)
        .await
        .expect("release");
    late_waits.await.expect("task").expect("late granted next");
    cluster.shutdown().await;
}
