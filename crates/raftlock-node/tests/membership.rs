//! Membership changes in one process: the refusals, and a leader that
//! removes itself (openraft 0.9.25 panics a removed leader's Raft core if
//! it is asked for another change; the node must refuse instead).

mod common;

use std::time::Duration;

use common::{eventually, settings, Cluster};
use raftlock_node::{Member, MembershipError, NodeError};

fn membership_error(result: Result<raftlock_node::MembershipView, NodeError>) -> MembershipError {
    match result {
        Err(NodeError::Membership(e)) => e,
        other => panic!("expected a membership refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_change_nothing() {
    let cluster = Cluster::start(1, settings()).await;
    let node = cluster.node(1);
    cluster.leader().await;
    let before = node.membership();
    assert_eq!(before.voters(), vec![1]);
    assert_eq!(
        membership_error(node.remove_member(1).await),
        MembershipError::LastVoter { id: 1 }
    );
    assert_eq!(
        membership_error(node.remove_member(9).await),
        MembershipError::UnknownMember { id: 9 }
    );
    let bad = Member {
        api_addr: "nowhere".into(),
        raft_addr: "127.0.0.1:1".into(),
        incarnation: 0,
    };
    assert!(matches!(
        membership_error(node.add_member(2, bad).await),
        MembershipError::Invalid(_)
    ));
    let elsewhere = Member {
        api_addr: "127.0.0.1:1".into(),
        raft_addr: "127.0.0.1:2".into(),
        incarnation: 0,
    };
    assert!(matches!(
        membership_error(node.add_member(1, elsewhere).await),
        MembershipError::MemberExists { id: 1, .. }
    ));
    // Adding the voter again at its own addresses is a no-op.
    let same = before
        .members
        .iter()
        .find(|m| m.id == 1)
        .map(|m| Member {
            api_addr: m.api_addr.clone(),
            raft_addr: m.raft_addr.clone(),
            incarnation: 0,
        })
        .expect("member 1");
    assert_eq!(node.add_member(1, same).await.expect("no-op"), before);
    assert_eq!(node.membership(), before);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_removed_itself_refuses_further_changes_until_the_next_leader() {
    let cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let view = cluster
        .node(others[0])
        .remove_member(leader)
        .await
        .expect("remove the leader");
    assert_eq!(view.voters(), others);
    // At once, through the removed leader: it must not hand the change
    // to openraft (whose core would panic), and the others elect.
    let old = cluster.node(leader);
    match old.remove_member(others[1]).await {
        Err(NodeError::NoLeader) => {}
        other => panic!("a removed leader took a change: {other:?}"),
    }
    let survivor = cluster.node(others[0]);
    eventually(
        "a new leader among the others",
        Duration::from_secs(10),
        || {
            survivor
                .status()
                .leader_id
                .is_some_and(|l| others.contains(&l))
        },
    )
    .await;
    // The old leader's Raft core is still alive (not panicked).
    old.raft()
        .is_initialized()
        .await
        .expect("the removed leader's Raft core still answers");
    let session = survivor
        .open_session("after", Duration::from_secs(5))
        .await
        .expect("the two remaining voters commit");
    survivor.close_session(session.id).await.expect("close");
    cluster.shutdown().await;
}
