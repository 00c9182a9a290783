//! Member identity (docs/design.md, "Member identity"): a member whose
//! data directory was wiped restarts with a new incarnation, is refused by
//! the cluster's traffic (it never votes or takes entries under its old
//! id), says how to fix it, and comes back cleanly once removed and added
//! again. A member of another cluster is refused too.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, settings, Cluster, WAIT};
use raftlock_node::{Consistency, Member, MembershipError, Node, NodeConfig, NodeError, PeerState};
use tokio::net::TcpListener;

/// The members other than `id` agree on a leader that is not `id`.
fn others_agree(cluster: &Cluster, id: u64) -> Option<u64> {
    let mut leaders = cluster
        .running()
        .filter(|n| n.id() != id)
        .map(|n| n.status().leader_id);
    let first = leaders.next().flatten()?;
    (first != id && leaders.all(|l| l == Some(first))).then_some(first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_member_is_refused_until_removed_and_added_again() {
    let mut cluster = Cluster::start(3, settings()).await;
    let leader = cluster.leader().await;
    let wiped = (1..=3).find(|id| *id != leader).expect("a follower");
    let other = (1..=3)
        .find(|id| *id != leader && *id != wiped)
        .expect("another");
    let before = cluster.node(wiped).identity();
    let cluster_id = cluster.node(leader).identity().cluster_id;
    assert!(cluster_id.is_some(), "the founder drew a cluster id");
    assert_eq!(before.cluster_id, cluster_id, "members learn it");
    let view = cluster.node(leader).membership();
    let named = view.members.iter().find(|m| m.id == wiped).expect("listed");
    assert_eq!(
        named.incarnation, before.incarnation,
        "the founder named it"
    );

    let kept = cluster
        .node(leader)
        .open_session("kept", Duration::from_secs(60))
        .await
        .expect("open");

    // Wipe the follower's disk and start it again at the same address.
    let data_dir = cluster.node(wiped).config().data_dir.clone();
    cluster.stop(wiped).await;
    std::fs::remove_dir_all(&data_dir).expect("wipe");
    cluster.restart(wiped).await;
    let node = cluster.node(wiped).clone();
    assert_ne!(node.identity().incarnation, before.incarnation);
    eventually("the wiped member to be refused", WAIT, || {
        node.replaced().is_some()
    })
    .await;
    let message = node.replaced().expect("refused");
    assert!(
        message.contains(&format!("raftlock member remove {wiped}")),
        "{message}"
    );
    match node.read_state(Consistency::Stale, |_| ()).await {
        Err(NodeError::Membership(MembershipError::Replaced { id, .. })) => assert_eq!(id, wiped),
        other => panic!("a wiped member served a read: {other:?}"),
    }
    assert!(!node.is_healthy());

    // Another member campaigns: the wiped one must not vote for it (its
    // log is empty and its vote forgotten, so it would).
    cluster
        .node(other)
        .raft()
        .trigger()
        .elect()
        .await
        .expect("trigger");
    let deadline = tokio::time::Instant::now() + WAIT;
    let settled = loop {
        if let Some(l) = others_agree(&cluster, wiped) {
            break l;
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let vote = node.raft().metrics().borrow().vote;
    assert_eq!(
        vote.leader_id.term, 0,
        "the wiped member voted or took entries: {vote:?}"
    );
    assert!(!node.raft().is_initialized().await.expect("initialized?"));
    cluster
        .node(settled)
        .keepalive(kept.id)
        .await
        .expect("the two others still commit");
    // (The election may still be settling: ask whoever leads now.)
    eventually("the leader to see the refusal", WAIT, || {
        others_agree(&cluster, wiped)
            .is_some_and(|l| cluster.node(l).member_state(wiped) == Some(PeerState::Replaced))
    })
    .await;
    assert_eq!(node.member_state(wiped), Some(PeerState::Replaced));

    // The fix the message names: remove it, then add it back.
    let survivor = cluster.node(settled).clone();
    let view = survivor.remove_member(wiped).await.expect("remove");
    assert!(view.members.iter().all(|m| m.id != wiped));
    let raft_addr = node.config().me().raft_addr.clone();
    let view = survivor
        .add_member(wiped, Member::new("127.0.0.1:0", raft_addr))
        .await
        .expect("add back");
    let named = view.members.iter().find(|m| m.id == wiped).expect("listed");
    assert!(named.voter);
    assert_eq!(named.incarnation, node.identity().incarnation);
    eventually("the re-added member to serve", WAIT, || {
        node.replaced().is_none() && node.is_healthy()
    })
    .await;
    assert_eq!(node.identity().cluster_id, cluster_id, "it learnt the id");
    assert_eq!(node.member_state(wiped), Some(PeerState::Ok));
    eventually("the leader to reach it again", WAIT, || {
        others_agree(&cluster, wiped)
            .is_some_and(|l| cluster.node(l).member_state(wiped) == Some(PeerState::Ok))
    })
    .await;
    let sessions = node
        .read_state(Consistency::Linearizable, |sm| {
            sm.session(kept.id).is_some()
        })
        .await
        .expect("read");
    assert!(sessions, "the re-added member caught up");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_another_cluster_is_refused() {
    let cluster = Cluster::start(1, settings()).await;
    let ours = cluster.node(1).clone();
    // A one-member cluster of its own, as member 2.
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let raft_addr = listener.local_addr().expect("addr").to_string();
    let config = NodeConfig {
        id: 2,
        members: BTreeMap::from([(2, Member::new("127.0.0.1:0", raft_addr.clone()))]),
        data_dir: dir.path().join("node-2"),
        settings: settings(),
        peer_overrides: BTreeMap::new(),
        tls: None,
    };
    let theirs = Node::start_with_listener(config, listener)
        .await
        .expect("start");
    theirs.wait_for_leader(WAIT).await.expect("their leader");
    let their_cluster = theirs.identity().cluster_id.expect("founded");
    assert_ne!(Some(their_cluster), ours.identity().cluster_id);

    match ours
        .add_member(2, Member::new("127.0.0.1:0", raft_addr.clone()))
        .await
    {
        Err(NodeError::Membership(MembershipError::OtherCluster { id, message })) => {
            assert_eq!(id, 2);
            assert!(message.contains("another cluster") || message.contains("cluster"));
        }
        other => panic!("a member of another cluster was added: {other:?}"),
    }
    assert_eq!(ours.membership().voters(), vec![1]);

    // Raft traffic from our cluster to theirs is refused before Raft sees it.
    let ours_id = ours.identity().cluster_id.expect("founded");
    let answer = reqwest::Client::new()
        .post(format!("http://{raft_addr}/raft/vote"))
        .header("x-raftlock-cluster", format!("{ours_id:016x}"))
        .header("x-raftlock-from", "1")
        .body(Vec::<u8>::new())
        .send()
        .await
        .expect("send");
    assert_eq!(answer.status().as_u16(), 409);
    let text = answer.text().await.expect("text");
    assert!(text.contains("other_cluster"), "{text}");
    theirs.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_founder_rejoins_instead_of_founding_a_second_cluster() {
    let mut cluster = Cluster::start(3, settings()).await;
    let cluster_id = cluster.node(1).identity().cluster_id;
    let data_dir = cluster.node(1).config().data_dir.clone();
    cluster.stop(1).await;
    std::fs::remove_dir_all(&data_dir).expect("wipe");
    cluster.restart(1).await;
    let founder = cluster.node(1).clone();
    eventually("the wiped founder to be refused", WAIT, || {
        founder.replaced().is_some()
    })
    .await;
    // It asked the seeds, saw a cluster, and founded nothing.
    assert!(!founder.raft().is_initialized().await.expect("initialized?"));
    assert_eq!(founder.identity().cluster_id, None);
    eventually("the others to agree on a leader", WAIT, || {
        others_agree(&cluster, 1).is_some()
    })
    .await;
    for id in [2, 3] {
        assert_eq!(cluster.node(id).identity().cluster_id, cluster_id);
    }
    cluster.shutdown().await;
}
