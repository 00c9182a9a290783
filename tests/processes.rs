//! Three real `raftlock serve` processes: leader kill -9, a waiter queued
//! before the kill, restart of every member.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::ProcessCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_kill_fails_over_and_loses_nothing_acknowledged() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let (f1, f2) = (followers[0], followers[1]);

    let prober = cluster.open_session(f2, "prober", 30_000).await;
    // A waiter queued before the kill, long-polling on a surviving member.
    let support::HeldAndQueued {
        holder,
        waiter,
        token: held_token,
        waiting,
    } = cluster.hold_and_queue(f2, f1, 30_000).await;

    // Writes acknowledged before the kill.
    let mut acked = Vec::new();
    for i in 0..100 {
        let path = format!("/v1/nodes/acked/k{i}");
        if let Ok(201) = cluster.put(f2, &path, json!({"data": "eA=="})).await {
            acked.push(path);
        }
    }
    assert_eq!(acked.len(), 100);

    let killed_at = Instant::now();
    cluster.kill9(leader);
    // Time from the kill to the next grant (try-locks on fresh names).
    let mut attempt = 0;
    let failover = loop {
        attempt += 1;
        let (status, _) = cluster
            .post(
                f2,
                &format!("/v1/locks/probe-{attempt}/acquire"),
                json!({"session_id": prober, "wait_ms": 0}),
            )
            .await;
        if status == 200 {
            break killed_at.elapsed();
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(20),
            "no grant after the kill"
        );
    };
    println!(
        "leader kill -9 -> next lock grant: {} ms",
        failover.as_millis()
    );

    // The holder releases through the other survivor; the waiter gets it.
    let (status, _) = cluster
        .post(f2, "/v1/locks/job/release", json!({"session_id": holder}))
        .await;
    assert_eq!(status, 204);
    let granted = waiting.await.expect("join").expect("long-poll answered");
    assert_eq!(granted.status().as_u16(), 200);
    let granted: serde_json::Value = granted.json().await.expect("json");
    assert_eq!(granted["session_id"], waiter);
    assert!(granted["fencing_token"].as_u64().expect("token") > held_token);

    // kill -9 every member, restart them all: nothing acknowledged is lost.
    cluster.start_member(leader);
    cluster.leader(&[1, 2, 3]).await;
    for id in 1..=3 {
        cluster.kill9(id);
    }
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    for id in 1..=3 {
        for path in &acked {
            let (status, _) = cluster.get(id, path).await;
            assert_eq!(status, 200, "{path} lost on member {id}");
        }
    }
    // A wiped member is refused until removed and added again:
    // tests/membership.rs, a_wiped_member_is_refused_then_removed_and_added_back.
}
