//! A leader cut off from the majority: what it may still answer, and that
//! every answer ends in bounded time. In-process members with their links
//! cut (`LocalCluster::isolate`); the Jepsen harness checks the same with
//! real processes and TCP proxies.

mod common;

use std::time::Duration;

use common::{settings, Cluster, WAIT};
use raftlock_node::core::{Command, QueueKind};
use raftlock_node::NodeError;
use tokio::time::Instant;

/// Longest any operation on an isolated member may take: the leader wait
/// (3 s default) twice (the first attempt's bound plus retries), and slack
/// for a loaded machine.
const BOUND: Duration = Duration::from_secs(10);

/// Finding 1 of the partition review: an isolated leader acknowledged its
/// clients' keepalives from memory while the majority expired their
/// sessions and handed their locks on — two holders of one lock.
///
/// Client C holds `x` through the leader L and keeps its session alive
/// through L only (as an embedded application does). L is cut off. D
/// waits for `x` on a follower. The invariant: D is granted `x` only
/// after every keepalive L acknowledged has run out, i.e. after (send time
/// of C's last acknowledged keepalive) + TTL. C's `lost()` fires before
/// that instant, so C stops before D starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_never_renews_a_session_the_majority_can_expire() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let follower_id = (1..=3).find(|id| *id != leader_id).expect("a follower");
    let follower = cluster.node(follower_id).clone();
    let ttl = Duration::from_millis(1_500);

    let c = leader.open_session("c", ttl).await.expect("open c");
    let c_grant = leader
        .acquire(QueueKind::Lock, "x", c.id, vec![], WAIT)
        .await
        .expect("c holds x");
    let d = follower
        .open_session("d", Duration::from_secs(60))
        .await
        .expect("open d");

    cluster.inner.isolate(leader_id, true);
    let isolated_at = Instant::now();

    // C renews through L every ttl/6 and remembers when it sent the last
    // keepalive L acknowledged.
    let keepalives = {
        let leader = leader.clone();
        tokio::spawn(async move {
            let mut last_acknowledged_send = isolated_at;
            let mut refused = 0u32;
            while isolated_at.elapsed() < Duration::from_secs(8) {
                let sent = Instant::now();
                match leader.keepalive(c.id).await {
                    Ok(_) => last_acknowledged_send = sent,
                    Err(_) => refused += 1,
                }
                tokio::time::sleep(ttl / 6).await;
            }
            (last_acknowledged_send, refused)
        })
    };
    let d_grant = follower
        .acquire(QueueKind::Lock, "x", d.id, vec![], Duration::from_secs(20))
        .await
        .expect("the majority expires c and grants x to d");
    let granted_at = Instant::now();
    let (last_acknowledged_send, refused) = keepalives.await.expect("keepalive task");

    assert!(d_grant.fencing_token > c_grant.fencing_token);
    assert!(
        last_acknowledged_send + ttl <= granted_at,
        "double grant: L acknowledged a keepalive sent {:?} after isolation, so C may hold x \
         until {:?} after isolation, but D was granted x at {:?}",
        last_acknowledged_send - isolated_at,
        last_acknowledged_send + ttl - isolated_at,
        granted_at - isolated_at,
    );
    assert!(refused > 0, "the isolated leader refused keepalives");
    cluster.inner.isolate(leader_id, false);
    cluster.shutdown().await;
}

/// Finding 2: a write through a leader without a quorum waited forever in
/// openraft's `client_write`, holding the node's only proposal slot, so
/// every later write through that member hung too, try-locks included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_an_isolated_leader_end_in_bounded_time() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let session = leader
        .open_session("s", Duration::from_secs(30))
        .await
        .expect("open");
    cluster.inner.isolate(leader_id, true);

    let try_lock = {
        let leader = leader.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = leader
                .acquire(QueueKind::Lock, "t", session.id, vec![], Duration::ZERO)
                .await;
            (outcome, started.elapsed())
        })
    };
    let put = {
        let leader = leader.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = leader
                .submit_command(Command::Put {
                    path: "/app/k".into(),
                    data: b"v".to_vec(),
                    session: None,
                    sequential: false,
                    expected_version: None,
                })
                .await;
            (outcome.map(|_| ()), started.elapsed())
        })
    };
    let started = Instant::now();
    let open = tokio::time::timeout(BOUND, leader.open_session("t", Duration::from_secs(5))).await;
    let open_took = started.elapsed();

    let (try_lock, try_took) = tokio::time::timeout(BOUND, try_lock)
        .await
        .expect("the try-lock ends in bounded time")
        .expect("task");
    let (put, put_took) = tokio::time::timeout(BOUND, put)
        .await
        .expect("the put ends in bounded time")
        .expect("task");
    let open = open.expect("the open ends in bounded time");
    for (what, outcome, took) in [
        ("try-lock", try_lock.map(|_| ()), try_took),
        ("put", put, put_took),
        ("open", open.map(|_| ()), open_took),
    ] {
        assert!(
            matches!(
                outcome,
                Err(NodeError::NoLeader | NodeError::OutcomeUnknown(_))
            ),
            "{what}: {outcome:?}"
        );
        assert!(took < BOUND, "{what} took {took:?}");
    }

    // Healed, the member serves writes again: no proposal slot was left
    // stuck behind the writes above.
    cluster.inner.isolate(leader_id, false);
    cluster.leader().await;
    let s2 = tokio::time::timeout(BOUND, leader.open_session("after", Duration::from_secs(5)))
        .await
        .expect("bounded")
        .expect("writes through the old leader work again");
    leader.close_session(s2.id).await.expect("close");
    cluster.shutdown().await;
}

/// Finding 2, the expiry loop: an expiry proposal that cannot commit must
/// neither block the loop nor be dropped. While the leader is isolated its
/// expiry of a silent session fails; once healed (and leading again) the
/// session is expired all the same, and later sessions expire too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_survives_a_leader_that_lost_its_quorum() {
    let cluster = Cluster::start(
        3,
        raftlock_node::ClusterSettings {
            snapshot_every_entries: 100,
            ..settings()
        },
    )
    .await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let silent = leader
        .open_session("silent", Duration::from_millis(400))
        .await
        .expect("open");
    cluster.inner.isolate(leader_id, true);
    // Past the TTL the isolated leader proposes the expiry, which cannot
    // commit. Meanwhile the majority moves on far enough that the old
    // leader must catch up by snapshot: its pending proposal is then
    // answered neither by apply nor by a conflict truncation (openraft
    // 0.9), so an unbounded wait for it would block the expiry loop for
    // good.
    let majority = cluster
        .running()
        .find(|n| n.id() != leader_id)
        .expect("a majority member")
        .clone();
    // One write at a time: one log entry each (concurrent writes would
    // share entries), past what a member keeps after a snapshot (1,000).
    for i in 0..1_200 {
        majority
            .submit_command(Command::Put {
                path: format!("/fill/{i}"),
                data: vec![0; 16],
                session: None,
                sequential: false,
                expected_version: None,
            })
            .await
            .expect("the majority writes");
    }
    // The majority must have purged what the old leader lacks, or it
    // would catch up by log instead (snapshots and purges run in the
    // background).
    let old_last = leader.raft().metrics().borrow().last_log_index.unwrap_or(0);
    let majority_ids: Vec<u64> = (1..=3).filter(|id| *id != leader_id).collect();
    common::eventually(
        "the majority to purge past the old leader's log",
        BOUND,
        || {
            majority_ids.iter().all(|id| {
                let purged = cluster.node(*id).raft().metrics().borrow().purged;
                purged.is_some_and(|p| p.index > old_last)
            })
        },
    )
    .await;
    cluster.inner.isolate(leader_id, false);
    common::eventually("the old leader to install a snapshot", BOUND, || {
        leader.counters().snapshots_installed > 0
    })
    .await;
    // Whoever leads now expires it.
    let deadline = Instant::now() + BOUND;
    loop {
        let gone = leader
            .read_state(raftlock_node::Consistency::Linearizable, |s| {
                s.session(silent.id).is_none()
            })
            .await
            .unwrap_or(false);
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the silent session never expired"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The old leader leads again; its expiry loop must still work.
    let deadline = Instant::now() + BOUND;
    while cluster.leader().await != leader_id {
        assert!(
            Instant::now() < deadline,
            "the old leader did not lead again"
        );
        let _ = leader.raft().trigger().elect().await;
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            let mut metrics = leader.raft().metrics();
            let _ = metrics
                .wait_for(|m| m.current_leader == Some(leader_id))
                .await;
        })
        .await;
    }
    let later = leader
        .open_session("later", Duration::from_millis(400))
        .await
        .expect("open");
    // Never kept alive: it must expire.
    let expired = async {
        loop {
            let gone = leader
                .read_state(raftlock_node::Consistency::Linearizable, |s| {
                    s.session(later.id).is_none()
                })
                .await;
            if gone == Ok(true) {
                return;
            }
            let mut applied = leader.subscribe();
            let _ = tokio::time::timeout(Duration::from_millis(200), applied.recv()).await;
        }
    };
    tokio::time::timeout(BOUND, expired)
        .await
        .expect("the later session never expired");
    cluster.shutdown().await;
}
