//! Read-write locks, semaphores and multi-locks on a real three-member
//! cluster: grants wake exactly the waiters whose answer changed (counted
//! with the wake-up counter, as the lock's no-herd test does), session
//! ends release holds, overlapping multi-locks in opposite orders both
//! complete, and timeouts leave nothing queued.

mod common;

use std::time::Duration;

use common::{eventually, settings, Cluster, WAIT};
use raftlock_node::core::{CoreError, QueueKind, RwMode, SessionId, SharedKind};
use raftlock_node::{AcquireOptions, Consistency, Grant, Node, NodeError};
use tokio::task::JoinHandle;

fn wait(d: Duration) -> AcquireOptions {
    AcquireOptions::wait(d)
}

async fn session(node: &Node, name: &str) -> SessionId {
    node.open_session(name, Duration::from_secs(60))
        .await
        .expect("open")
        .id
}

/// Waits until `node` has `n` waiter registrations, failing if a waiter
/// task ended early.
async fn registered(node: &Node, n: usize, tasks: &mut [JoinHandle<Result<Grant, NodeError>>]) {
    let done = tokio::time::timeout(Duration::from_secs(120), async {
        while node.counters().waiter_registrations < n {
            if let Some(t) = tasks.iter_mut().find(|t| t.is_finished()) {
                panic!("a waiter ended early: {:?}", t.await);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "only {} registrations",
        node.counters().waiter_registrations
    );
}

fn spawn_rw(
    node: &Node,
    name: &str,
    mode: RwMode,
    i: usize,
) -> JoinHandle<Result<Grant, NodeError>> {
    let node = node.clone();
    let name = name.to_string();
    tokio::spawn(async move {
        let s = node
            .open_session(&format!("w{i}"), Duration::from_secs(60))
            .await?;
        node.acquire_rwlock(&name, s.id, mode, wait(Duration::from_secs(120)))
            .await
    })
}

/// A writer holds; readers, then a writer, then readers queue behind it.
/// The writer's release wakes the first run of readers and nothing else;
/// releasing those readers wakes the second writer once, after the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_releases_wake_only_the_entries_they_grant() {
    const RUN: usize = 100;
    let cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let node = cluster
        .running()
        .find(|n| n.id() != leader)
        .expect("follower")
        .clone();
    let first = session(&node, "first").await;
    node.acquire_rwlock("rw", first, RwMode::Write, wait(WAIT))
        .await
        .expect("writer granted");
    // Queue in a known order: each batch registers before the next.
    let mut readers: Vec<_> = (0..RUN)
        .map(|i| spawn_rw(&node, "rw", RwMode::Read, i))
        .collect();
    registered(&node, 2 * RUN, &mut readers).await;
    let mut writer = vec![spawn_rw(&node, "rw", RwMode::Write, RUN)];
    registered(&node, 2 * RUN + 2, &mut writer).await;
    let mut later: Vec<_> = (0..RUN)
        .map(|i| spawn_rw(&node, "rw", RwMode::Read, RUN + 1 + i))
        .collect();
    registered(&node, 4 * RUN + 2, &mut later).await;

    let before = node.counters().wakeups;
    node.release_shared(SharedKind::RwLock, "rw", first)
        .await
        .expect("release");
    eventually("the readers are granted", WAIT, || {
        readers.iter().all(|t| t.is_finished())
    })
    .await;
    assert_eq!(
        node.counters().wakeups - before,
        RUN as u64,
        "one wake-up per reader granted"
    );
    assert!(!writer[0].is_finished() && later.iter().all(|t| !t.is_finished()));
    let mut holders = Vec::new();
    for t in readers {
        holders.push(t.await.expect("task").expect("granted"));
    }
    let view = node
        .read_state(Consistency::Linearizable, |s| {
            s.shared_queue(SharedKind::RwLock, "rw")
        })
        .await
        .expect("read");
    assert_eq!(view.holders.len(), RUN, "the readers share the lock");
    assert_eq!(view.waiters.len(), RUN + 1);

    let before = node.counters().wakeups;
    for h in &holders {
        node.release_shared(SharedKind::RwLock, "rw", h.session)
            .await
            .expect("release");
    }
    eventually("the writer is granted", WAIT, || writer[0].is_finished()).await;
    assert_eq!(
        node.counters().wakeups - before,
        1,
        "only the last reader's release wakes"
    );
    let w = writer
        .pop()
        .expect("writer")
        .await
        .expect("task")
        .expect("granted");
    assert!(holders.iter().all(|h| w.fencing_token > h.fencing_token));
    // Closing the writer's session grants the later readers, as a
    // release would.
    node.close_session(w.session).await.expect("close");
    eventually("the later readers are granted", WAIT, || {
        later.iter().all(|t| t.is_finished())
    })
    .await;
    cluster.shutdown().await;
}

/// A semaphore of 3 with a long queue: each holder's release wakes
/// exactly one waiter, and never more than 3 hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_release_wakes_one_waiter() {
    const WAITERS: usize = 300;
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(cluster.leader().await).clone();
    let mut holders = Vec::new();
    for i in 0..3 {
        let s = session(&node, &format!("h{i}")).await;
        node.acquire_semaphore("sem", s, 3, wait(WAIT))
            .await
            .expect("granted");
        holders.push(s);
    }
    let other = session(&node, "other").await;
    let refused = node.acquire_semaphore("sem", other, 4, wait(WAIT)).await;
    assert!(
        matches!(
            refused,
            Err(NodeError::Core(CoreError::LimitMismatch {
                limit: 3,
                requested: 4,
                ..
            }))
        ),
        "{refused:?}"
    );
    let try_once = node
        .acquire_semaphore("sem", other, 3, wait(Duration::ZERO))
        .await;
    assert!(
        matches!(try_once, Err(NodeError::Core(CoreError::LockHeld { .. }))),
        "{try_once:?}"
    );
    let mut tasks: Vec<_> = (0..WAITERS)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move {
                let s = node
                    .open_session(&format!("w{i}"), Duration::from_secs(60))
                    .await?;
                node.acquire_semaphore("sem", s.id, 3, wait(Duration::from_secs(120)))
                    .await
            })
        })
        .collect();
    registered(&node, 2 * WAITERS, &mut tasks).await;
    for (i, h) in holders.iter().enumerate() {
        let before = node.counters().wakeups;
        node.release_shared(SharedKind::Semaphore, "sem", *h)
            .await
            .expect("release");
        eventually("one waiter is granted", WAIT, || {
            tasks.iter().filter(|t| t.is_finished()).count() == i + 1
        })
        .await;
        assert_eq!(
            node.counters().wakeups - before,
            1,
            "one release, one wake-up"
        );
    }
    let view = node
        .read_state(Consistency::Linearizable, |s| {
            s.shared_queue(SharedKind::Semaphore, "sem")
        })
        .await
        .expect("read");
    assert_eq!(view.holders.len(), 3);
    for t in &tasks {
        t.abort();
    }
    cluster.shutdown().await;
}

/// Two sessions take overlapping sets in opposite orders while a third
/// holds one of the locks: neither deadlocks, they hold one after the
/// other, and each gets every lock with one token per lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_multi_locks_in_opposite_orders_both_complete() {
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(cluster.leader().await).clone();
    let blocker = session(&node, "blocker").await;
    node.acquire(QueueKind::Lock, "b", blocker, vec![], WAIT)
        .await
        .expect("b held");
    let sets = [
        vec!["a".to_string(), "b".to_string()],
        vec!["b".to_string(), "a".to_string()],
    ];
    let mut tasks = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let node = node.clone();
        let set = set.clone();
        let s = session(&node, &format!("m{i}")).await;
        tasks.push(tokio::spawn(async move {
            let grant = node
                .acquire_multi(&set, s, wait(Duration::from_secs(60)))
                .await?;
            node.release_multi(&set, s).await?;
            Ok::<_, NodeError>(grant)
        }));
    }
    // Both queued in both locks: a queued in `a` holds it for the first set.
    eventually("both sets queue", WAIT, || {
        node.counters().waiter_registrations >= 4
    })
    .await;
    // `a` is reserved for the first set while it waits for `b`.
    let a_holder = node
        .read_state(Consistency::Linearizable, |s| {
            s.holder(QueueKind::Lock, "a")
        })
        .await
        .expect("read");
    assert!(a_holder.is_some());
    node.release(QueueKind::Lock, "b", blocker)
        .await
        .expect("release");
    for t in tasks {
        let grant = tokio::time::timeout(WAIT, t)
            .await
            .expect("no deadlock")
            .expect("task")
            .expect("granted");
        assert_eq!(grant.locks.len(), 2);
        assert!(grant
            .locks
            .iter()
            .all(|(_, g)| g.fencing_token == grant.locks[0].1.fencing_token));
    }
    // A timed-out multi-lock leaves nothing queued.
    node.acquire(QueueKind::Lock, "a", blocker, vec![], WAIT)
        .await
        .expect("a held");
    let late = session(&node, "late").await;
    let set = vec!["b".to_string(), "a".to_string()];
    let timed_out = node
        .acquire_multi(&set, late, wait(Duration::from_millis(200)))
        .await;
    assert_eq!(timed_out, Err(NodeError::Timeout));
    let queued = node
        .read_state(Consistency::Linearizable, |s| {
            (
                s.queue(QueueKind::Lock, "a").waiters.len(),
                s.queue(QueueKind::Lock, "b").holder,
            )
        })
        .await
        .expect("read");
    assert_eq!(queued, (0, None), "withdrawn from both locks");
    cluster.shutdown().await;
}
