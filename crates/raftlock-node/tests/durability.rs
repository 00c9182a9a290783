//! Deferred durability: the log store tells openraft an append is persisted
//! as soon as it is written, and the node holds back everything that acts
//! on an entry until a disk has it (see `raftlock_storage::DurableIndex`).
//! These tests stall disks (`Node::stall_log_sync`) and check that no write
//! is committed, applied or answered on the strength of a volatile copy.
//!
//! Each asserts that something does *not* happen while a disk is stalled;
//! that needs a window of time, `HELD`, long enough for a wrongly committed
//! entry to be applied everywhere many times over (a commit round trip in
//! this cluster takes milliseconds). The positive steps poll state.

mod common;

use std::time::Duration;

use common::{eventually, holding, settings, Cluster, WAIT};
use raftlock_node::core::{CoreError, QueueKind};
use raftlock_node::{Consistency, Node, NodeError};

/// How long a stalled state is watched for a wrong commit.
const HELD: Duration = Duration::from_millis(400);

fn last_log_index(node: &Node) -> u64 {
    node.status().last_log_index.unwrap_or(0)
}

async fn every_member_applies_what_the_leader_wrote(cluster: &Cluster, leader: &Node) {
    let written = last_log_index(leader);
    eventually("every member to apply the leader's log", WAIT, || {
        cluster
            .running()
            .all(|n| n.status().applied_index >= written)
    })
    .await;
}

/// Nothing may be applied, on any member, while the only durable copies are
/// on the followers and the leader's own copy is volatile: openraft already
/// counts the leader as having it, so one follower's answer "commits" it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_member_applies_an_entry_the_leaders_disk_does_not_have() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let session = leader
        .open_session("stall", Duration::from_secs(30))
        .await
        .expect("open");
    let before = last_log_index(&leader);

    leader.stall_log_sync(true);
    let acquire = tokio::spawn({
        let leader = leader.clone();
        async move {
            leader
                .acquire(QueueKind::Lock, "stalled-leader", session.id, vec![], WAIT)
                .await
        }
    });
    eventually("the followers to hold the new entry", WAIT, || {
        cluster
            .running()
            .filter(|n| n.id() != leader_id)
            .all(|n| last_log_index(n) > before)
    })
    .await;
    tokio::time::sleep(HELD).await;
    assert!(
        !acquire.is_finished(),
        "an acquire was answered before the leader's disk had it"
    );
    for node in cluster.running() {
        assert!(
            node.status().applied_index <= before,
            "node {} applied an entry that was durable on the followers only",
            node.id()
        );
    }

    leader.stall_log_sync(false);
    acquire
        .await
        .expect("join")
        .expect("granted once the leader's disk has it");
    every_member_applies_what_the_leader_wrote(&cluster, &leader).await;
    cluster.shutdown().await;
}

/// A follower must not acknowledge entries its disk does not have yet:
/// with both followers' disks stalled, a write on the leader cannot commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_acknowledge_entries_only_once_durable() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let followers: Vec<Node> = cluster
        .running()
        .filter(|n| n.id() != leader_id)
        .cloned()
        .collect();
    let session = leader
        .open_session("stall", Duration::from_secs(30))
        .await
        .expect("open");
    let before = last_log_index(&leader);

    for follower in &followers {
        follower.stall_log_sync(true);
    }
    let acquire = tokio::spawn({
        let leader = leader.clone();
        async move {
            leader
                .acquire(
                    QueueKind::Lock,
                    "stalled-followers",
                    session.id,
                    vec![],
                    WAIT,
                )
                .await
        }
    });
    eventually("the followers to hold the new entry", WAIT, || {
        followers.iter().all(|n| last_log_index(n) > before)
    })
    .await;
    tokio::time::sleep(HELD).await;
    assert!(
        !acquire.is_finished(),
        "committed with only the leader's disk holding the entry"
    );
    assert!(
        leader.status().applied_index <= before,
        "the leader applied an entry no follower had on disk"
    );

    // One follower's disk is enough for a majority.
    followers[0].stall_log_sync(false);
    acquire
        .await
        .expect("join")
        .expect("granted once a follower's disk has it");
    followers[1].stall_log_sync(false);
    every_member_applies_what_the_leader_wrote(&cluster, &leader).await;
    cluster.shutdown().await;
}

/// A leader whose `fdatasync` fails (`Node::fail_log_sync`) never answers a
/// write as done: the write in flight ends as `storage_failed`, `no_leader`
/// or `outcome_unknown`, later requests there get `StorageFailed`, the
/// other two elect a new leader and keep serving, and what was acknowledged
/// before the failure is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_fsync_fails_steps_down_and_acknowledges_nothing() {
    leader_disk_fault(Node::fail_log_sync, |e| {
        matches!(e, NodeError::StorageFailed(_))
    })
    .await;
}

/// The same with a full disk (`ENOSPC`) on the leader: refused as `DiskFull`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_disk_fills_up_steps_down_and_acknowledges_nothing() {
    leader_disk_fault(Node::fail_log_sync_out_of_space, |e| {
        matches!(e, NodeError::DiskFull(_))
    })
    .await;
}

/// Injects `fault` on the leader's next log sync; `refusal` recognises the
/// error the member answers afterwards.
async fn leader_disk_fault(fault: fn(&Node), refusal: fn(&NodeError) -> bool) {
    let cluster = Cluster::start(3, settings()).await;
    let failed_id = cluster.leader().await;
    let failed = cluster.node(failed_id).clone();
    let others: Vec<Node> = cluster
        .running()
        .filter(|n| n.id() != failed_id)
        .cloned()
        .collect();
    // Acknowledged before the failure.
    let (session, _) = holding(&failed, "fsync", Duration::from_secs(30), "before").await;

    fault(&failed);
    let during = failed
        .acquire(QueueKind::Lock, "during", session.id, vec![], WAIT)
        .await;
    assert!(
        matches!(
            during,
            Err(NodeError::NoLeader | NodeError::OutcomeUnknown(_))
        ) || during.as_ref().is_err_and(refusal),
        "a write whose barrier failed was answered {during:?}"
    );

    // Every later request that needs the log is refused, and says why.
    let after = failed
        .acquire(QueueKind::Lock, "after", session.id, vec![], WAIT)
        .await;
    assert!(
        after.as_ref().is_err_and(refusal),
        "after the failure: {after:?}"
    );
    let read = failed.read_state(Consistency::Linearizable, |_| ()).await;
    assert!(
        read.as_ref().is_err_and(refusal),
        "a linearizable read on the failed member: {read:?}"
    );

    // The other two elect a leader among themselves and serve writes.
    eventually("the others to elect a new leader", WAIT, || {
        let leaders: Vec<_> = others.iter().map(|n| n.status().leader_id).collect();
        leaders[0].is_some_and(|l| l != failed_id) && leaders[0] == leaders[1]
    })
    .await;
    let new_leader = others[0].clone();
    let fresh = new_leader
        .open_session("after-failover", Duration::from_secs(30))
        .await
        .expect("the new leader serves");
    new_leader
        .acquire(QueueKind::Lock, "after", fresh.id, vec![], WAIT)
        .await
        .expect("the new leader grants a free lock");

    // The lock acknowledged before the failure is still held by its session.
    let taken = new_leader
        .acquire(QueueKind::Lock, "before", fresh.id, vec![], Duration::ZERO)
        .await;
    match taken {
        Err(NodeError::Core(CoreError::LockHeld { holder, .. })) => assert_eq!(holder, session.id),
        other => panic!("the lock granted before the failure was lost: {other:?}"),
    }

    if refusal(&NodeError::DiskFull(String::new())) {
        // A full disk: once there is room the member rebuilds its Raft in
        // place and catches up, without a restart.
        failed.restore_disk_space();
        eventually("the member to rejoin after its full disk", WAIT, || {
            failed.check_storage().is_ok()
        })
        .await;
        assert_eq!(failed.storage_recoveries(), 1);
        every_member_applies_what_the_leader_wrote(&cluster, &new_leader).await;
        new_leader
            .acquire(QueueKind::Lock, "after-rejoin", fresh.id, vec![], WAIT)
            .await
            .expect("a write after the rejoin");
        every_member_applies_what_the_leader_wrote(&cluster, &new_leader).await;
        failed
            .acquire(
                QueueKind::Lock,
                "through-the-rejoined",
                session.id,
                vec![],
                WAIT,
            )
            .await
            .expect("the rejoined member takes writes again");
    } else {
        // Any other failure is final: long after the others moved on, the
        // member is still out and says why.
        assert!(failed.check_storage().as_ref().is_err_and(refusal));
        assert_eq!(
            failed.storage_recoveries(),
            0,
            "a failed fsync must not be retried"
        );
    }
    cluster.shutdown().await;
}

/// A follower whose disk fills up (`ENOSPC`, injected at the barrier)
/// leaves the Raft group and answers `DiskFull`; the leader and the other
/// follower keep serving writes and reads, and a lock held across the
/// fault stays held by its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_disk_fills_up_refuses_writes_and_the_cluster_serves_on() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let full = cluster
        .running()
        .find(|n| n.id() != leader_id)
        .expect("a follower")
        .clone();
    // Held before the disk fills.
    let (session, _) = holding(&leader, "disk-full", Duration::from_secs(30), "held").await;

    full.fail_log_sync_out_of_space();
    // The next entry reaches the follower's barrier, which fails.
    leader
        .acquire(QueueKind::Lock, "while-full", session.id, vec![], WAIT)
        .await
        .expect("the leader and the other follower are a majority");
    eventually("the full follower to notice", WAIT, || {
        full.check_storage().is_err()
    })
    .await;
    let refused = full
        .acquire(QueueKind::Lock, "on-the-full-one", session.id, vec![], WAIT)
        .await;
    assert!(
        matches!(refused, Err(NodeError::DiskFull(_))),
        "a write on the full member: {refused:?}"
    );

    // Writes and linearizable reads go on; the held lock is still held.
    leader
        .acquire(QueueKind::Lock, "after", session.id, vec![], WAIT)
        .await
        .expect("writes go on");
    leader
        .read_state(Consistency::Linearizable, |_| ())
        .await
        .expect("reads go on");
    let other = leader
        .open_session("other", Duration::from_secs(30))
        .await
        .expect("open");
    let taken = leader
        .acquire(QueueKind::Lock, "held", other.id, vec![], Duration::ZERO)
        .await;
    match taken {
        Err(NodeError::Core(CoreError::LockHeld { holder, .. })) => assert_eq!(holder, session.id),
        other => panic!("the lock held across the fault was lost: {other:?}"),
    }

    // Room again: the member rejoins in place and catches up with what was
    // written while it was out.
    assert_eq!(full.storage_recoveries(), 0, "rejoined while still full");
    full.restore_disk_space();
    eventually("the follower to rejoin after its full disk", WAIT, || {
        full.check_storage().is_ok()
    })
    .await;
    assert_eq!(full.storage_recoveries(), 1);
    every_member_applies_what_the_leader_wrote(&cluster, &leader).await;
    let on_the_rejoined = full
        .read_state(Consistency::Stale, |s| s.clone())
        .await
        .expect("a read on the rejoined member");
    let on_the_leader = leader
        .read_state(Consistency::Stale, |s| s.clone())
        .await
        .expect("a read on the leader");
    assert!(
        on_the_rejoined == on_the_leader,
        "the rejoined member's state differs from the leader's"
    );
    cluster.shutdown().await;
}
