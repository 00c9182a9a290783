//! A three-node cluster in one process: locking through every node,
//! predecessor-only wake-ups, expiry, snapshots, restarts.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, holder_and_waiter, holding, settings, Cluster, Queued, WAIT};
use raftlock_node::core::{Command, QueueKind, Response};
use raftlock_node::{Consistency, NodeError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_every_node_with_increasing_tokens() {
    let mut cluster = Cluster::start(3, settings()).await;
    let mut last_token = 0;
    for node in cluster.running() {
        let session = node
            .open_session("test", Duration::from_secs(5))
            .await
            .expect("open");
        let grant = node
            .acquire(QueueKind::Lock, "jobs/1", session.id, vec![], WAIT)
            .await
            .expect("granted");
        assert!(grant.fencing_token > last_token, "tokens increase");
        last_token = grant.fencing_token;
        // Every replica agrees, linearizably, on who holds it.
        for other in cluster.running() {
            let holder = other
                .read_state(Consistency::Linearizable, |s| {
                    s.queue(QueueKind::Lock, "jobs/1").holder
                })
                .await
                .expect("read")
                .expect("held");
            assert_eq!(holder.session, session.id);
        }
        node.release(QueueKind::Lock, "jobs/1", session.id)
            .await
            .expect("release");
        node.keepalive(session.id)
            .await
            .expect("keepalive from any node");
        node.close_session(session.id).await.expect("close");
        assert!(matches!(
            node.keepalive(session.id).await,
            Err(NodeError::Core(
                raftlock_node::core::CoreError::SessionNotFound(_)
            ))
        ));
    }
    // A stopped leader's handle must not keep acknowledging keepalives.
    let leader = cluster.leader().await;
    let stopped = cluster.node(leader).clone();
    let survivor = cluster
        .running()
        .find(|n| n.id() != leader)
        .expect("follower")
        .clone();
    let session = survivor
        .open_session("late", Duration::from_secs(5))
        .await
        .expect("open");
    cluster.stop(leader).await;
    assert!(matches!(
        stopped.keepalive(session.id).await,
        Err(NodeError::ShuttingDown)
    ));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_with_many_waiters_wakes_exactly_one() {
    const WAITERS: usize = 1000;
    let cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    // Waiters on a follower: woken by the follower's own apply loop.
    let follower = cluster
        .running()
        .find(|n| n.id() != leader)
        .expect("follower")
        .clone();
    let (holder, _) = holding(&follower, "holder", Duration::from_secs(30), "herd").await;
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let node = follower.clone();
        tasks.push(tokio::spawn(async move {
            let s = node
                .open_session(&format!("w{i}"), Duration::from_secs(60))
                .await?;
            node.acquire(
                QueueKind::Lock,
                "herd",
                s.id,
                vec![],
                Duration::from_secs(120),
            )
            .await
        }));
    }
    // Each waiter registers under its predecessor and its own node.
    let registered = tokio::time::timeout(Duration::from_secs(120), async {
        while follower.counters().waiter_registrations < 2 * WAITERS {
            if let Some(t) = tasks.iter_mut().find(|t| t.is_finished()) {
                panic!("a waiter ended early: {:?}", t.await);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        registered.is_ok(),
        "only {} registrations",
        follower.counters().waiter_registrations
    );
    // The follower forwarded those 2,000 writes in far fewer proposals
    // (the first ones go out alone; the rest queue behind them).
    let counters = follower.counters();
    assert!(counters.proposed_commands >= 2 * WAITERS as u64);
    assert!(
        counters.proposals * 4 <= counters.proposed_commands,
        "{} proposals for {} commands",
        counters.proposals,
        counters.proposed_commands
    );
    let before = follower.counters().wakeups;
    follower
        .release(QueueKind::Lock, "herd", holder.id)
        .await
        .expect("release");
    eventually("the successor is granted", WAIT, || {
        tasks.iter().filter(|t| t.is_finished()).count() == 1
    })
    .await;
    assert_eq!(
        follower.counters().wakeups - before,
        1,
        "one release, one wake-up"
    );
    assert_eq!(follower.counters().waiter_registrations, 2 * (WAITERS - 1));
    for t in &tasks {
        t.abort();
    }
    cluster.shutdown().await;
}

/// Concurrent writes share proposals (log entries); each caller must still
/// get its own command's outcome, and a failing command must not take the
/// others in its proposal down with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_in_a_shared_proposal_gets_its_own_outcome() {
    const CLIENTS: usize = 64;
    let cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    for node in [
        cluster.node(leader).clone(),
        cluster
            .running()
            .find(|n| n.id() != leader)
            .expect("follower")
            .clone(),
    ] {
        let before = node.counters();
        let mut tasks = Vec::new();
        for i in 0..CLIENTS {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let s = node
                    .open_session(&format!("c{i}"), Duration::from_secs(30))
                    .await
                    .expect("open");
                let lock = format!("own/{}/{i}", node.id());
                // Ride along with the acquires: a release that must fail.
                let stranger = raftlock_node::core::SessionId(u128::from(i as u64) + 1);
                let (grant, refused) = tokio::join!(
                    node.acquire(QueueKind::Lock, &lock, s.id, vec![], Duration::ZERO),
                    node.release(QueueKind::Lock, &lock, stranger)
                );
                (s.id, lock, grant.expect("granted"), refused)
            }));
        }
        let mut tokens = std::collections::BTreeSet::new();
        for task in tasks {
            let (session, lock, grant, refused) = task.await.expect("task");
            assert!(refused.is_err(), "a stranger released {lock}");
            assert_eq!(grant.session, session, "someone else's grant");
            assert!(tokens.insert(grant.fencing_token), "token given twice");
            let holder = node
                .read_state(Consistency::Linearizable, |s| {
                    s.queue(QueueKind::Lock, &lock).holder
                })
                .await
                .expect("read")
                .expect("held");
            assert_eq!(holder.session, session);
            assert_eq!(holder.fencing_token, grant.fencing_token);
        }
        let after = node.counters();
        assert!(
            after.proposals - before.proposals < after.proposed_commands - before.proposed_commands,
            "no two writes shared a proposal"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_passes_its_lock_to_the_next_waiter() {
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(2).clone();
    let (dead, first) = holding(&node, "dead", Duration::from_millis(500), "job").await;
    let live = node
        .open_session("live", Duration::from_secs(30))
        .await
        .expect("open");
    let started = tokio::time::Instant::now();
    // No keepalives for `dead`: the leader expires it, the lock passes.
    let second = node
        .acquire(QueueKind::Lock, "job", live.id, vec![], WAIT)
        .await
        .expect("granted after expiry");
    let waited = started.elapsed();
    assert!(second.fencing_token > first.fencing_token);
    assert!(
        waited >= Duration::from_millis(400),
        "expired too early: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "expired too late: {waited:?}"
    );
    assert!(matches!(
        node.keepalive(dead.id).await,
        Err(NodeError::Core(
            raftlock_node::core::CoreError::SessionNotFound(_)
        ))
    ));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_session_dies_is_told_at_once() {
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(1).clone();
    let Queued {
        waiter, waiting, ..
    } = holder_and_waiter(&node, "j", Duration::from_secs(30)).await;
    eventually("waiter registered", WAIT, || {
        node.counters().waiter_registrations == 2
    })
    .await;
    cluster
        .node(3)
        .close_session(waiter.id)
        .await
        .expect("close elsewhere");
    let result = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("woken")
        .expect("join");
    assert!(matches!(
        result,
        Err(NodeError::Core(
            raftlock_node::core::CoreError::SessionNotFound(_)
        ))
    ));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_stays_bounded_while_leaders_keep_changing() {
    const TTL: Duration = Duration::from_millis(1500);
    let cluster = Cluster::start(3, settings()).await;
    let node = cluster.node(1).clone();
    let Queued {
        holder: silent,
        grant: held,
        waiting,
        ..
    } = holder_and_waiter(&node, "job", TTL).await;
    let started = tokio::time::Instant::now();
    let mut elections = 0;
    // Force a new election every ~300 ms; without checkpoints each new
    // leader would restart the TTL and the session would never expire.
    while !waiting.is_finished() {
        let elapsed = started.elapsed();
        assert!(
            elapsed < TTL * 4,
            "session still holds the lock after {elapsed:?} and {elections} elections"
        );
        let leader = cluster.leader().await;
        let next = cluster
            .running()
            .find(|n| n.id() != leader)
            .expect("follower");
        let _ = next.raft().trigger().elect().await;
        elections += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let granted = waiting
        .await
        .expect("join")
        .expect("the waiter gets the lock");
    let elapsed = started.elapsed();
    println!("silent session expired after {elapsed:?} across {elections} forced elections");
    assert!(elections >= 3, "the test must actually change leaders");
    assert!(
        granted.fencing_token > held.fencing_token,
        "tokens increase across failovers"
    );
    let gone = node
        .read_state(Consistency::Linearizable, |s| {
            s.session(silent.id).is_none()
        })
        .await
        .expect("read");
    assert!(gone);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_follower_catches_up_through_a_snapshot_and_restarts_lose_nothing() {
    // At least this many writes, and on until the leader purged the log
    // the lagging follower would need (it keeps 1,000 entries behind its
    // snapshots), so only a snapshot can catch it up.
    const MIN_WRITES: usize = 2_000;
    const WRITERS: usize = 8;
    let mut cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let lagging = (1..=3).find(|id| *id != leader).expect("follower");
    let lagging_index = cluster.node(lagging).status().applied_index;
    cluster.stop(lagging).await;
    let writer = cluster.node(leader).clone();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let (node, next) = (writer.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut written = 0;
            loop {
                let purged = node.raft().metrics().borrow().purged.map_or(0, |l| l.index);
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= MIN_WRITES && purged > lagging_index {
                    return written;
                }
                assert!(i < 50 * MIN_WRITES, "the leader never purged its log");
                let command = Command::Put {
                    path: format!("/data/k{i}"),
                    data: i.to_le_bytes().to_vec(),
                    session: None,
                    sequential: false,
                    expected_version: None,
                };
                match node.submit_command(command).await {
                    Ok(Response::Put { .. }) => written += 1,
                    other => panic!("write {i}: {other:?}"),
                }
            }
        }));
    }
    let mut writes = 0;
    for t in tasks {
        writes += t.await.expect("writer");
    }
    cluster.restart(lagging).await;
    let node = cluster.node(lagging).clone();
    let count = node
        .read_state(Consistency::Linearizable, |s| {
            s.children("/data").map_or(0, |c| c.len())
        })
        .await
        .expect("read");
    assert_eq!(count, writes);
    // Through a snapshot, not by replaying the log: the leader purged it.
    // Snapshot bytes are not kept in memory, so the leader read this one
    // back from its file to send it.
    assert!(
        node.counters().snapshots_installed >= 1,
        "caught up without a snapshot: {:?}",
        node.counters()
    );
    // Restart every node: everything acknowledged is still there.
    for id in 1..=3 {
        cluster.stop(id).await;
    }
    for id in 1..=3 {
        cluster.restart(id).await;
    }
    cluster.leader().await;
    for node in cluster.running() {
        let count = node
            .read_state(Consistency::Linearizable, |s| {
                s.children("/data").map_or(0, |c| c.len())
            })
            .await
            .expect("read after restart");
        assert_eq!(count, writes);
    }
    cluster.shutdown().await;
}
