//! Lock-delay on a three-node cluster (docs/api.md, "Lock-delay"): a lost
//! session holds its lock off for the delay, a release does not, and a
//! leader killed during the delay hands the timing to the next leader,
//! which neither grants early nor restarts the delay.

mod common;

use std::time::Duration;

use common::{acquire_in_task, eventually, settings, Cluster, WAIT};
use raftlock_node::core::QueueKind;
use raftlock_node::{AcquireOptions, Consistency, Grant, Node, NodeError, OpenedSession};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Takes `lock` with `delay_ms` for a session of `ttl` through `node`.
async fn hold(node: &Node, lock: &str, ttl: Duration, delay_ms: u64) -> (OpenedSession, Grant) {
    let session = node.open_session("holder", ttl).await.expect("open holder");
    let grant = node
        .acquire_with_delay(
            QueueKind::Lock,
            lock,
            session.id,
            vec![],
            Some(delay_ms),
            AcquireOptions::wait(WAIT),
        )
        .await
        .expect("holder granted");
    (session, grant)
}

/// Queues a second session behind the holder, through `node`, naming no
/// delay (it takes the lock's).
async fn wait_behind(node: &Node, lock: &str) -> JoinHandle<Result<Grant, NodeError>> {
    let waiter = node
        .open_session("waiter", Duration::from_secs(60))
        .await
        .expect("open waiter");
    let registrations = node.counters().waiter_registrations;
    let waiting = acquire_in_task(node, lock, waiter.id, Duration::from_secs(30));
    eventually("the waiter waits", WAIT, || {
        node.counters().waiter_registrations > registrations
    })
    .await;
    waiting
}

async fn granted(waiting: JoinHandle<Result<Grant, NodeError>>) -> Grant {
    tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("granted in time")
        .expect("join")
        .expect("the waiter gets the lock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_holder_keeps_the_lock_from_everyone_for_the_delay() {
    const TTL: Duration = Duration::from_millis(400);
    const DELAY: Duration = Duration::from_millis(1_500);
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(2).clone();
    let started = Instant::now();
    // No keepalives: the leader expires the holder after its TTL.
    let (holder, held) = hold(&node, "ledger", TTL, DELAY.as_millis() as u64).await;
    let waiting = wait_behind(&node, "ledger").await;
    let deadline = Instant::now() + WAIT;
    let (valid, current) = loop {
        let read = node
            .read_state(Consistency::Linearizable, |s| {
                let gone = s.session(holder.id).is_none();
                (gone, s.fencing_check("ledger", held.fencing_token))
            })
            .await
            .expect("read");
        if read.0 {
            break read.1;
        }
        assert!(
            Instant::now() < deadline,
            "the holder's session never expired"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let expired = Instant::now();
    // Held off: nobody holds, and the old token no longer fences.
    assert!(!valid && current.is_none(), "held off, not held");
    assert!(!waiting.is_finished(), "granted as the session expired");
    let grant = granted(waiting).await;
    let waited = started.elapsed();
    assert!(grant.fencing_token > held.fencing_token);
    assert!(
        waited >= TTL + DELAY,
        "granted {waited:?} after the acquire: before TTL + delay"
    );
    assert!(
        expired.elapsed() < DELAY + Duration::from_secs(2),
        "granted long after the delay: {:?} after the expiry",
        expired.elapsed()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_on_at_once_and_a_close_by_another_waits() {
    const DELAY: Duration = Duration::from_secs(5);
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(1).clone();
    let (holder, _) = hold(
        &node,
        "a",
        Duration::from_secs(30),
        DELAY.as_millis() as u64,
    )
    .await;
    let waiting = wait_behind(&node, "a").await;
    let released = Instant::now();
    node.release(QueueKind::Lock, "a", holder.id)
        .await
        .expect("release");
    granted(waiting).await;
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "a release must skip the delay: {:?}",
        released.elapsed()
    );

    // The same lock-delay, but the holder's session is closed by someone
    // else (an operator, through another member).
    let (holder, _) = hold(&node, "b", Duration::from_secs(30), 1_500).await;
    let waiting = wait_behind(&node, "b").await;
    let closing = Instant::now();
    cluster
        .node(3)
        .close_session(holder.id)
        .await
        .expect("close elsewhere");
    granted(waiting).await;
    let waited = closing.elapsed();
    assert!(
        waited >= Duration::from_millis(1_500),
        "granted {waited:?} after the close: inside the delay"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_holds_the_lock_off_for_the_rest_of_the_delay_only() {
    const DELAY: Duration = Duration::from_secs(3);
    let mut cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let followers: Vec<u64> = cluster
        .running()
        .map(|n| n.id())
        .filter(|id| *id != leader)
        .collect();
    let [a, b] = followers[..] else {
        panic!("two followers: {followers:?}")
    };
    let node = cluster.node(a).clone();
    let (holder, _) = hold(
        &node,
        "job",
        Duration::from_secs(30),
        DELAY.as_millis() as u64,
    )
    .await;
    let waiting = wait_behind(&node, "job").await;
    let closing = Instant::now();
    cluster
        .node(b)
        .close_session(holder.id)
        .await
        .expect("close");
    // Half way through the delay, the leader that is timing it dies.
    tokio::time::sleep_until(closing + DELAY / 2).await;
    assert!(!waiting.is_finished(), "granted inside the delay");
    cluster.stop(leader).await;
    let grant = granted(waiting).await;
    let waited = closing.elapsed();
    println!("granted {waited:?} after the close (delay {DELAY:?}, leader killed half way)");
    assert!(grant.fencing_token > 0);
    assert!(
        waited >= DELAY,
        "the new leader granted {waited:?} after the close: inside the delay"
    );
    // A full delay from the new leader's election would end after
    // DELAY * 1.5 plus the election: the rest of it is what is owed.
    assert!(
        waited < DELAY + DELAY / 2 - Duration::from_millis(100),
        "the new leader restarted the delay: granted {waited:?} after the close"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_delay_wakes_exactly_the_next_in_line() {
    const WAITERS: usize = 50;
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(1).clone();
    let (holder, _) = hold(&node, "herd", Duration::from_secs(30), 500).await;
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        tasks.push(wait_behind(&node, "herd").await);
    }
    let before = node.counters().wakeups;
    cluster
        .node(2)
        .close_session(holder.id)
        .await
        .expect("close");
    eventually("the successor is granted", WAIT, || {
        tasks.iter().filter(|t| t.is_finished()).count() == 1
    })
    .await;
    assert_eq!(
        node.counters().wakeups - before,
        1,
        "the hold-off wakes nobody, its end exactly the next in line"
    );
    for t in &tasks {
        t.abort();
    }
    cluster.shutdown().await;
}
