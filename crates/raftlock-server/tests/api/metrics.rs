//! The metrics operators alert on, from real servers: each appears in
//! `/metrics` and moves when the thing it counts happens.

use serde_json::json;

use crate::common::{eventually, TestCluster};

/// `name`'s value (the first series whose name and labels start with
/// `series`) in member `i`'s `/metrics`.
async fn value(c: &TestCluster, i: usize, series: &str) -> Option<f64> {
    let text = c
        .http
        .get(format!("{}/metrics", c.urls[i]))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn must(c: &TestCluster, i: usize, series: &str) -> f64 {
    value(c, i, series)
        .await
        .unwrap_or_else(|| panic!("{series} missing on member {i}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_metrics_appear_and_move() {
    let mut c = TestCluster::start().await;
    let leader = c.leader().await;

    // Commit latency and fsync latency move with a write.
    let commits = must(&c, leader, "raftlock_commit_seconds_count").await;
    let fsyncs = must(&c, leader, "raftlock_fsync_seconds_count").await;
    let session = c.open_session(leader, "metrics").await;
    assert!(must(&c, leader, "raftlock_commit_seconds_count").await > commits);
    assert!(must(&c, leader, "raftlock_commit_seconds_sum").await > 0.0);
    assert!(must(&c, leader, "raftlock_fsync_seconds_count").await > fsyncs);
    assert!(must(&c, leader, "raftlock_fsync_seconds_sum").await > 0.0);

    // Per-route latency, labelled by the route template.
    let route =
        "raftlock_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/sessions/{id}\"}";
    let before = value(&c, leader, route).await.unwrap_or(0.0);
    c.get(leader, &format!("/v1/sessions/{session}"))
        .await
        .expect(200, "inspect");
    assert_eq!(must(&c, leader, route).await, before + 1.0);

    // A session that stops its keepalives is expired by the leader.
    let expired = must(&c, leader, "raftlock_session_expiries_total").await;
    let short = c
        .post(leader, "/v1/sessions", json!({"ttl_ms": 200}))
        .await
        .expect(201, "open a short session")["session_id"]
        .as_str()
        .expect("id")
        .to_string();
    eventually("the short session's expiry", || async {
        must(&c, leader, "raftlock_session_expiries_total").await > expired
    })
    .await;
    c.get(leader, &format!("/v1/sessions/{short}"))
        .await
        .expect_error(404, "session_not_found", "expired");

    // Process metrics.
    assert!(must(&c, leader, "process_resident_memory_bytes").await > 0.0);
    assert!(must(&c, leader, "process_open_fds").await >= 3.0);
    assert!(must(&c, leader, "process_max_fds").await > 0.0);
    assert!(must(&c, leader, "process_cpu_seconds_total").await > 0.0);

    // Leader changes: every member saw the first leader; a survivor sees
    // the next one when the leader stops.
    let survivor = (leader + 1) % 3;
    let changes = must(&c, survivor, "raftlock_leader_changes_total").await;
    assert!(changes >= 1.0);
    c.stop_node(leader).await;
    eventually("a new leader seen by the survivor", || async {
        must(&c, survivor, "raftlock_leader_changes_total").await > changes
    })
    .await;
    c.shutdown().await;
}
