//! Requests in flight per member (`api.max_requests_in_flight`): one past
//! the limit waits `max_queue_wait_ms` for a slot, then gets `503
//! overloaded` with `Retry-After`; a keepalive of a session that owns
//! nodes never waits (crates/raftlock-server/src/overload/admission.rs), and is
//! served past the connection cap too (`overflow.rs`).

use std::time::{Duration, Instant};

use raftlock_core::QueueKind;
use raftlock_node::Consistency;
use raftlock_server::ApiConfig;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::common::{eventually, raw_http, Reply, TestCluster};

#[track_caller]
fn expect_overloaded(reply: &Reply, what: &str) {
    reply.expect_error(503, "overloaded", what);
    let retry = reply.headers.get("retry-after").map(|v| v.as_bytes());
    assert_eq!(retry, Some(&b"1"[..]), "{what}: {:?}", reply.headers);
}

/// A waiting acquire on member `i` in the background.
fn wait_in_background(c: &TestCluster, i: usize, lock: &str, session: &str) -> JoinHandle<u16> {
    let url = format!("{}/v1/locks/{lock}/acquire", c.urls[i]);
    let (http, body) = (
        c.http.clone(),
        json!({"session_id": session, "wait_ms": 4_000}),
    );
    tokio::spawn(async move {
        let reply = http.post(url).json(&body).send().await.expect("send");
        reply.status().as_u16()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_in_flight_limit_requests_wait_then_get_503_but_a_holder_keepalive_passes() {
    let wait = Duration::from_millis(300);
    let c = TestCluster::start_with(ApiConfig {
        max_requests_in_flight: 2,
        max_queue_wait_ms: wait.as_millis() as u64,
        ..ApiConfig::default()
    })
    .await;
    let l = c.leader().await;
    let other = (l + 1) % 3;
    let holder = c.open_session(l, "holder").await;
    let idle = c.open_session(l, "idle").await;
    c.acquire(l, "busy", &holder, 0).await.expect(200, "held");
    let w1 = c.open_session(l, "w1").await;
    let w2 = c.open_session(l, "w2").await;
    // Two long polls take both slots of member l for their wait.
    let polls = [
        wait_in_background(&c, l, "busy", &w1),
        wait_in_background(&c, l, "busy", &w2),
    ];
    eventually("both long polls wait", || async {
        c.node(l)
            .read_state(Consistency::Stale, |s| {
                s.queue(QueueKind::Lock, "busy").waiters.len()
            })
            .await
            .is_ok_and(|n| n == 2)
    })
    .await;

    // One more request waits its time for a slot, then is refused.
    let started = Instant::now();
    let refused = c.get(l, "/v1/health").await;
    let waited = started.elapsed();
    expect_overloaded(&refused, "a request past the limit");
    assert!(
        refused.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_requests_in_flight")),
        "the message names the limit: {}",
        refused.body
    );
    assert!(
        waited >= wait - Duration::from_millis(50),
        "refused after {waited:?}, before its wait of {wait:?} for a slot"
    );
    // A keepalive of the session that holds `busy` takes no slot.
    let keepalive = |s: &str| format!("/v1/sessions/{s}/keepalive");
    c.post(l, &keepalive(&holder), Value::Null)
        .await
        .expect(200, "the holder's keepalive past the limit");
    // A waiter owns a node too (its place in line).
    c.post(l, &keepalive(&w1), Value::Null)
        .await
        .expect(200, "a waiter's keepalive past the limit");
    // A session that owns nothing waits like any request.
    expect_overloaded(
        &c.post(l, &keepalive(&idle), Value::Null).await,
        "an idle session's keepalive past the limit",
    );
    // The limit is per member.
    // (A route that does not exist: answered 404 whatever the member's
    // state, so only a refusal could be 503.)
    c.get(other, "/v1/no-such-route")
        .await
        .expect_error(404, "not_found", "another member");
    // The long polls end (408 at their wait); the slots are free again.
    for poll in polls {
        assert_eq!(poll.await.expect("poll"), 408, "the long poll timed out");
    }
    c.get(l, "/v1/no-such-route").await.expect_error(
        404,
        "not_found",
        "served again once the long polls ended",
    );
    c.shutdown().await;
}

/// Sends a request for a route that does not exist (answered `404` by any
/// member, whatever its state) on a new keep-alive connection to member
/// `i` and reads the status line: the caller keeps the connection when it
/// was served (it holds one of the member's connection slots).
async fn hold_a_connection(c: &TestCluster, i: usize) -> (u16, TcpStream) {
    let addr = c.urls[i].trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /v1/no-such-route HTTP/1.1\r\nhost: raftlock\r\n\r\n")
        .await
        .expect("write");
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
        .await
        .expect("an answer in time")
        .expect("read the status line");
    let status = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_holder_keepalive_is_still_served() {
    let c = TestCluster::start_with(ApiConfig {
        max_connections: 3,
        ..ApiConfig::default()
    })
    .await;
    let l = c.leader().await;
    let (holder, idle) = c.holder_and_idle(l).await;
    // Fill every slot with a kept connection.
    let mut kept = Vec::new();
    loop {
        let (status, stream) = hold_a_connection(&c, l).await;
        if status != 404 {
            assert_eq!(status, 503, "refused past the cap");
            break;
        }
        kept.push(stream);
        assert!(kept.len() <= 3, "more connections served than the cap");
    }
    assert_eq!(kept.len(), 3, "the cap's slots are taken");
    let keepalive = |s: &str| {
        format!(
            "POST /v1/sessions/{s}/keepalive HTTP/1.1\r\nhost: raftlock\r\n\
             content-length: 0\r\nconnection: close\r\n\r\n"
        )
    };
    let (status, body) = raw_http(&c.urls[l], &keepalive(&holder.to_string())).await;
    assert_eq!(status, 200, "the holder's keepalive past the cap: {body}");
    let (status, body) = raw_http(&c.urls[l], &keepalive(&idle.to_string())).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("overloaded")),
        "an idle session's keepalive past the cap: {body}"
    );
    drop(kept);
    eventually("the slots are free again", || async {
        hold_a_connection(&c, l).await.0 == 404
    })
    .await;
    c.shutdown().await;
}
