//! The in-process cluster: members serve the API on the addresses the
//! membership names, and a stopped member comes back with its API.

#![cfg(feature = "in-process")]

use raftlock_testkit::{eventually, Options, TestCluster, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_serve_the_api_the_membership_names() {
    let cluster = TestCluster::start(Options::default()).await;
    let leader = cluster.leader().await;
    assert_eq!(cluster.endpoints().len(), 3);
    for id in 1..=3 {
        cluster.get(id, "/v1/health").await.expect(200, "health");
        let view = cluster.get(id, "/v1/cluster").await;
        let view = view.expect(200, "cluster");
        assert_eq!(view["node_id"], id, "{view}");
        assert_eq!(view["leader_id"], leader, "{view}");
        for member in view["members"].as_array().expect("members") {
            let member_id = member["id"].as_u64().expect("id");
            let api = format!("http://{}", member["api_addr"].as_str().expect("api_addr"));
            assert_eq!(api, cluster.url(member_id, ""), "{view}");
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_member_serves_its_api_on_the_old_port() {
    let mut cluster = TestCluster::start(Options::default()).await;
    let old = cluster.leader().await;
    cluster.stop(old).await;
    assert_eq!(cluster.endpoints().len(), 2);
    let next = cluster.leader().await;
    assert_ne!(next, old);
    cluster.restart(old).await;
    assert_eq!(cluster.endpoints().len(), 3);
    let c = &cluster;
    eventually("the restarted member is healthy", WAIT, || async move {
        c.get(old, "/v1/health").await.status.as_u16() == 200
    })
    .await;
    let view = cluster.get(old, "/v1/cluster").await;
    assert_eq!(view.expect(200, "cluster")["node_id"], old);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_api_members_are_reached_through_their_nodes() {
    let options = Options {
        api: None,
        ..Options::default()
    };
    let cluster = TestCluster::start(options).await;
    assert!(cluster.endpoints().is_empty());
    let leader = cluster.leader().await;
    assert!(cluster.node(leader).status().leader_id == Some(leader));
    cluster.shutdown().await;
}
