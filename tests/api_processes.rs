//! API conformance against three real `raftlock serve` processes: every
//! endpoint of docs/api.md answers through a member, and every error code
//! of the contract is produced. (The exhaustive bad-input table runs in
//! crates/raftlock-server/tests against in-process nodes.)

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::ProcessCluster;

async fn send(
    cluster: &ProcessCluster,
    member: u64,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = cluster.url(member, path);
    let request = match method {
        "GET" => cluster.http.get(url),
        "POST" => cluster.http.post(url),
        "PUT" => cluster.http.put(url),
        "DELETE" => cluster.http.delete(url),
        other => panic!("method {other}"),
    };
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn code(body: &Value) -> &str {
    body["error"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_and_error_code_through_real_processes() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let f: Vec<u64> = (1..=3).filter(|m| *m != leader).collect();
    let (a, b) = (f[0], f[1]);

    // Sessions.
    let s1 = cluster.open_session(a, "one", 30_000).await;
    let s2 = cluster.open_session(b, "two", 30_000).await;
    let (st, body) = send(
        &cluster,
        b,
        "POST",
        &format!("/v1/sessions/{s1}/keepalive"),
        None,
    )
    .await;
    assert_eq!((st, body["ttl_ms"].as_u64()), (200, Some(30_000)));
    let (st, body) = send(&cluster, leader, "GET", &format!("/v1/sessions/{s1}"), None).await;
    assert_eq!((st, body["owner"].as_str()), (200, Some("one")));

    // Locks: acquire, try-lock conflict, timeout, inspect, list, fencing.
    let (st, held) = send(
        &cluster,
        a,
        "POST",
        "/v1/locks/q/acquire",
        Some(json!({"session_id": s1, "wait_ms": 0})),
    )
    .await;
    assert_eq!(st, 200, "{held}");
    let token = held["fencing_token"].as_u64().expect("token");
    let (st, body) = send(
        &cluster,
        b,
        "POST",
        "/v1/locks/q/acquire",
        Some(json!({"session_id": s2, "wait_ms": 0})),
    )
    .await;
    assert_eq!((st, code(&body)), (409, "lock_held"));
    let (st, body) = send(
        &cluster,
        b,
        "POST",
        "/v1/locks/q/acquire",
        Some(json!({"session_id": s2, "wait_ms": 200})),
    )
    .await;
    assert_eq!((st, code(&body)), (408, "timeout"));
    let (st, body) = send(&cluster, b, "GET", "/v1/locks/q", None).await;
    assert_eq!(
        (st, body["holder"]["fencing_token"].as_u64()),
        (200, Some(token))
    );
    assert_eq!(
        body["waiters"].as_array().map(Vec::len),
        Some(0),
        "timed-out node withdrawn"
    );
    let (st, body) = send(&cluster, leader, "GET", "/v1/locks?prefix=q", None).await;
    assert_eq!((st, body["locks"].as_array().map(Vec::len)), (200, Some(1)));
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/fencing/check",
        Some(json!({"lock": "q", "fencing_token": token})),
    )
    .await;
    assert_eq!((st, body["valid"].as_bool()), (200, Some(true)));
    let (st, body) = send(
        &cluster,
        b,
        "POST",
        "/v1/locks/q/release",
        Some(json!({"session_id": s2})),
    )
    .await;
    assert_eq!((st, code(&body)), (403, "not_owner"));
    let (st, _) = send(
        &cluster,
        a,
        "POST",
        "/v1/locks/q/release",
        Some(json!({"session_id": s1})),
    )
    .await;
    assert_eq!(st, 204);
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/locks/q/release",
        Some(json!({"session_id": s1})),
    )
    .await;
    assert_eq!((st, code(&body)), (404, "not_found"));

    // Elections, including the first server-sent event.
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/elections/e/campaign",
        Some(json!({"session_id": s1, "value": "host-a", "wait_ms": 0})),
    )
    .await;
    assert_eq!((st, body["leader"].as_bool()), (200, Some(true)));
    let (st, body) = send(
        &cluster,
        b,
        "POST",
        "/v1/elections/e/proclaim",
        Some(json!({"session_id": s2, "value": "x"})),
    )
    .await;
    assert_eq!((st, code(&body)), (409, "not_leader"));
    let (st, _) = send(
        &cluster,
        b,
        "POST",
        "/v1/elections/e/proclaim",
        Some(json!({"session_id": s1, "value": "host-a2"})),
    )
    .await;
    assert_eq!(st, 204);
    let (st, body) = send(&cluster, leader, "GET", "/v1/elections/e", None).await;
    assert_eq!(
        (st, body["leader"]["value"].as_str()),
        (200, Some("host-a2"))
    );
    let mut events = cluster
        .http
        .get(cluster.url(b, "/v1/elections/e/observe"))
        .send()
        .await
        .expect("observe");
    assert_eq!(events.status().as_u16(), 200);
    let first = tokio::time::timeout(Duration::from_secs(10), events.chunk())
        .await
        .expect("an event at connect")
        .expect("stream")
        .expect("chunk");
    assert!(
        String::from_utf8_lossy(&first).contains("host-a2"),
        "{first:?}"
    );
    drop(events);
    let (st, _) = send(
        &cluster,
        a,
        "POST",
        "/v1/elections/e/resign",
        Some(json!({"session_id": s1})),
    )
    .await;
    assert_eq!(st, 204);

    // Generic nodes: create, CAS, children, stale read, delete.
    let (st, body) = send(
        &cluster,
        a,
        "PUT",
        "/v1/nodes/cfg/db",
        Some(json!({"data": "aGk="})),
    )
    .await;
    assert_eq!((st, body["version"].as_u64()), (201, Some(1)));
    let (st, body) = send(
        &cluster,
        b,
        "PUT",
        "/v1/nodes/cfg/db",
        Some(json!({"data": "aG8=", "expected_version": 7})),
    )
    .await;
    assert_eq!((st, code(&body)), (409, "version_mismatch"));
    let (st, _) = send(
        &cluster,
        b,
        "PUT",
        "/v1/nodes/cfg/db",
        Some(json!({"data": "aG8=", "expected_version": 1})),
    )
    .await;
    assert_eq!(st, 200);
    let (st, body) = send(&cluster, leader, "GET", "/v1/nodes/cfg?children=true", None).await;
    assert_eq!((st, body["children"].clone()), (200, json!(["db"])));
    let (st, body) = send(
        &cluster,
        a,
        "GET",
        "/v1/nodes/cfg/db?consistency=stale",
        None,
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let (st, _) = send(
        &cluster,
        a,
        "DELETE",
        "/v1/nodes/cfg/db?expected_version=2",
        None,
    )
    .await;
    assert_eq!(st, 204);
    let (st, body) = send(&cluster, a, "GET", "/v1/nodes/cfg/db", None).await;
    assert_eq!((st, code(&body)), (404, "not_found"));

    // Input errors from the router and extractors.
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/sessions",
        Some(json!({"ttl": 5000})),
    )
    .await;
    assert_eq!((st, code(&body)), (400, "bad_request"));
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/locks/q/acquire",
        Some(json!({"session_id": "0123456789abcdef0123456789abcdef", "wait_ms": 0})),
    )
    .await;
    assert_eq!((st, code(&body)), (404, "session_not_found"));
    // Its own connection: the server answers 413 before reading the body
    // and then closes the connection, which a pooled client would reuse.
    let huge = "x".repeat(2 * 1024 * 1024);
    let response = reqwest::Client::new()
        .put(cluster.url(a, "/v1/nodes/big"))
        .json(&json!({"data": huge}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(code(&body), "too_large");
    let response = cluster
        .http
        .post(cluster.url(a, "/v1/sessions"))
        .header("Content-Type", "text/plain")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 415);
    let (st, body) = send(&cluster, a, "DELETE", "/v1/cluster", None).await;
    assert_eq!((st, code(&body)), (405, "method_not_allowed"));

    // Cluster, health, metrics.
    let (st, body) = send(&cluster, b, "GET", "/v1/cluster", None).await;
    assert_eq!((st, body["leader_id"].as_u64()), (200, Some(leader)));
    assert_eq!(body["members"].as_array().map(Vec::len), Some(3));
    let (st, _) = send(&cluster, b, "GET", "/v1/health", None).await;
    assert_eq!(st, 200);
    let (st, body) = send(&cluster, a, "GET", "/metrics", None).await;
    assert_eq!(st, 200);
    assert!(
        body.as_str().is_some_and(|t| t.contains("raftlock_")),
        "{body}"
    );
    let (st, _) = send(&cluster, a, "DELETE", &format!("/v1/sessions/{s1}"), None).await;
    assert_eq!(st, 204);

    // With two members down there is no leader: 503 no_leader.
    cluster.kill9(leader);
    cluster.kill9(b);
    let (st, body) = send(
        &cluster,
        a,
        "POST",
        "/v1/sessions",
        Some(json!({"ttl_ms": 5000})),
    )
    .await;
    assert_eq!((st, code(&body)), (503, "no_leader"), "{body}");
}

/// Members advertised by DNS name (`localhost:P`), one of them listening
/// on a separate bind address, and the `[api]` table of the cluster file
/// in force in every `raftlock serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_names_binds_and_the_api_table_of_the_config_file() {
    let mut cluster = ProcessCluster::configure(3);
    let text = std::fs::read_to_string(&cluster.config).expect("config");
    // Member 1 listens on 127.0.0.1 and is advertised as localhost.
    let api1 = cluster.api[0].trim_start_matches("http://").to_string();
    let raft1 = text
        .lines()
        .find_map(|l| l.strip_prefix("raft_addr = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("member 1's raft_addr")
        .to_string();
    let binds = format!("api_bind = \"{api1}\"\nraft_bind = \"{raft1}\"\n");
    let text = text
        .replacen(
            &format!("raft_addr = \"{raft1}\"\n"),
            &format!("raft_addr = \"{raft1}\"\n{binds}"),
            1,
        )
        .replace("\"127.0.0.1:", "\"localhost:")
        + "\n[api]\nmax_sessions = 3\n";
    assert!(text.contains("api_bind") && !text.contains("addr = \"127."));
    std::fs::write(&cluster.config, &text).expect("write config");
    for url in &mut cluster.api {
        *url = url.replace("127.0.0.1", "localhost");
    }
    for id in 1..=3 {
        cluster.start_member(id);
    }
    let leader = cluster.leader(&[1, 2, 3]).await;
    let follower = if leader == 1 { 2 } else { 1 };

    let (st, body) = send(&cluster, follower, "GET", "/v1/cluster", None).await;
    assert_eq!(st, 200, "{body}");
    let addrs: Vec<&str> = body["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m["raft_addr"].as_str())
        .collect();
    assert!(
        addrs.len() == 3 && addrs.iter().all(|a| a.starts_with("localhost:")),
        "advertised by name: {body}"
    );
    // A write through a follower is forwarded to the leader by name.
    let s1 = cluster.open_session(follower, "a", 30_000).await;
    let (st, body) = send(
        &cluster,
        follower,
        "POST",
        "/v1/locks/dns/acquire",
        Some(json!({"session_id": s1, "wait_ms": 0})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    // [api] max_sessions = 3: the fourth open is refused, with Retry-After.
    cluster.open_session(leader, "a", 30_000).await;
    cluster.open_session(leader, "a", 30_000).await;
    let response = cluster
        .http
        .post(cluster.url(leader, "/v1/sessions"))
        .json(&json!({"ttl_ms": 30_000}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(code(&body), "too_many_requests", "{body}");
}
