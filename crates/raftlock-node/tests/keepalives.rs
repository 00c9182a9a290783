//! Keepalives that arrive together travel to the leader together
//! (`replica/keepalives.rs`), and a group is held to the same promise as a
//! lone keepalive (`replica/keepalive.rs`): acknowledged only after a
//! quorum confirmed the leader's leadership.

mod common;

use std::time::Duration;

use common::{settings, Cluster, WAIT};
use raftlock_node::core::{CoreError, QueueKind};
use raftlock_node::NodeError;
use tokio::time::Instant;

/// Keepalives in flight at once in these tests.
const CONCURRENT: usize = 300;

/// A storm of renewals through a follower costs the leader a few requests,
/// not one per keepalive, and every keepalive gets its own answer: the
/// live sessions their TTL, a closed one `session_not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_keepalives_through_a_follower_travel_together() {
    let cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let follower_id = (1..=3).find(|id| *id != leader).expect("a follower");
    let follower = cluster.node(follower_id).clone();
    let mut sessions = Vec::new();
    for i in 0..CONCURRENT {
        let s = follower
            .open_session(&format!("s{i}"), Duration::from_secs(30))
            .await
            .expect("open");
        sessions.push(s.id);
    }
    let closed = sessions[7];
    follower.close_session(closed).await.expect("close");
    let before = follower.counters();
    let tasks: Vec<_> = sessions
        .iter()
        .map(|&id| {
            let follower = follower.clone();
            tokio::spawn(async move { (id, follower.keepalive(id).await) })
        })
        .collect();
    for task in tasks {
        let (id, answer) = task.await.expect("keepalive task");
        if id == closed {
            assert!(
                matches!(answer, Err(NodeError::Core(CoreError::SessionNotFound(_)))),
                "a closed session's keepalive in a group: {answer:?}"
            );
        } else {
            assert_eq!(answer, Ok(Duration::from_secs(30)), "session {id}");
        }
    }
    let after = follower.counters();
    let requests = after.keepalive_requests - before.keepalive_requests;
    let carried = after.keepalives_sent - before.keepalives_sent;
    assert_eq!(carried, CONCURRENT as u64, "every keepalive was sent once");
    // One by one, this would be CONCURRENT requests.
    assert!(
        requests <= CONCURRENT as u64 / 4,
        "{CONCURRENT} concurrent keepalives took {requests} requests to the leader"
    );
    cluster.shutdown().await;
}

/// A group of keepalives at a leader cut off from the majority is refused
/// as a lone one is (partition.rs has the lone case): had the group been
/// acknowledged from memory, the majority could expire its sessions and
/// grant their locks to others while the clients still counted on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_keepalives_at_an_isolated_leader_is_refused() {
    let cluster = Cluster::start(3, settings()).await;
    let leader_id = cluster.leader().await;
    let leader = cluster.node(leader_id).clone();
    let mut sessions = Vec::new();
    for i in 0..CONCURRENT {
        let s = leader
            .open_session(&format!("s{i}"), Duration::from_secs(30))
            .await
            .expect("open");
        sessions.push(s.id);
    }
    leader
        .acquire(QueueKind::Lock, "x", sessions[0], vec![], WAIT)
        .await
        .expect("a lock to lose");
    let before = leader.counters();
    cluster.inner.isolate(leader_id, true);
    let isolated_at = Instant::now();
    let tasks: Vec<_> = sessions
        .iter()
        .map(|&id| {
            let leader = leader.clone();
            tokio::spawn(async move {
                let sent = Instant::now();
                (sent, leader.keepalive(id).await)
            })
        })
        .collect();
    let mut acknowledged_after_isolation = Vec::new();
    for task in tasks {
        let (sent, answer) = task.await.expect("keepalive task");
        if answer.is_ok() {
            acknowledged_after_isolation.push(sent - isolated_at);
        }
    }
    let after = leader.counters();
    cluster.inner.isolate(leader_id, false);
    assert!(
        acknowledged_after_isolation.is_empty(),
        "an isolated leader acknowledged {} keepalives sent after it was cut off \
         (at {:?} after isolation)",
        acknowledged_after_isolation.len(),
        acknowledged_after_isolation.first()
    );
    // They travelled in groups (else this test checks the lone path only).
    let requests = after.keepalive_requests - before.keepalive_requests;
    let carried = after.keepalives_sent - before.keepalives_sent;
    assert!(
        carried > requests,
        "no keepalives were grouped: {carried} keepalives in {requests} requests"
    );
    cluster.shutdown().await;
}
