//! Limits that protect a shared cluster, against real servers: sessions
//! in total and per owner, waiters per lock and election (`429
//! too_many_requests` with `Retry-After`), and slow clients (slowloris)
//! cut off by the header and body read deadlines.

use std::time::{Duration, Instant};

use raftlock_node::Consistency;
use raftlock_server::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::common::{eventually, Reply, TestCluster};

#[track_caller]
fn expect_too_many(reply: &Reply, what: &str) {
    reply.expect_error(429, "too_many_requests", what);
    let retry = reply.headers.get("retry-after").map(|v| v.as_bytes());
    assert!(
        retry.is_some_and(|v| std::str::from_utf8(v).is_ok_and(|s| s.parse::<u64>().is_ok())),
        "{what}: Retry-After missing: {:?}",
        reply.headers
    );
}

/// A waiting acquire (or campaign, with `value`) in the background.
fn wait_in_background(
    c: &TestCluster,
    i: usize,
    path: String,
    body: Value,
) -> JoinHandle<(u16, Value)> {
    let (http, url) = (c.http.clone(), format!("{}{path}", c.urls[i]));
    tokio::spawn(async move {
        let reply = http.post(url).json(&body).send().await.expect("send");
        let status = reply.status().as_u16();
        (status, reply.json().await.unwrap_or(Value::Null))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_and_waiter_limits_answer_429_with_retry_after() {
    let c = TestCluster::start_with(ApiConfig {
        max_sessions: 4,
        max_sessions_per_owner: Some(2),
        max_waiters_per_lock: 1,
        ..ApiConfig::default()
    })
    .await;
    // Through the leader: its replica has applied every open it answered,
    // so its count is exact (a follower's may lag; see limits.rs).
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let a1 = c.open_session(l, "a").await;
    let _a2 = c.open_session(l, "a").await;
    let open = |owner: &str| json!({"ttl_ms": 60_000, "owner": owner});
    expect_too_many(
        &c.post(l, "/v1/sessions", open("a")).await,
        "third session of owner a",
    );
    let b1 = c.open_session(l, "b").await;
    let b2 = c.open_session(l, "b").await;
    let full = c.post(l, "/v1/sessions", open("c")).await;
    expect_too_many(&full, "fifth session in the cluster");
    assert!(
        full.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_sessions")),
        "the message names the limit: {}",
        full.body
    );
    // A follower enforces the same limit once it has applied the opens.
    eventually("the follower applied every open", || async {
        c.node(f)
            .read_state(Consistency::Stale, |s| s.session_count())
            .await
            .is_ok_and(|n| n == 4)
    })
    .await;
    expect_too_many(
        &c.post(f, "/v1/sessions", open("c")).await,
        "full cluster, through a follower",
    );
    // Closing a session makes room again.
    c.call(l, Method::DELETE, &format!("/v1/sessions/{a1}"), None)
        .await
        .expect(204, "close");
    let a3 = c.open_session(l, "a").await;
    assert_eq!(c.state().await.session_count(), 4);

    // Waiters per lock: b1 holds, b2 waits (the one allowed waiter).
    c.acquire(l, "job", &b1, 0).await.expect(200, "b1 holds");
    let b2_waits = wait_in_background(
        &c,
        l,
        "/v1/locks/job/acquire".into(),
        json!({"session_id": b2, "wait_ms": 20_000}),
    );
    eventually("b2 is queued", || async {
        c.node(l)
            .read_state(Consistency::Stale, |s| {
                s.queue_place(
                    raftlock_core::QueueKind::Lock,
                    "job",
                    b2.parse().expect("id"),
                )
            })
            .await
            .is_ok_and(|(_, queued)| queued)
    })
    .await;
    expect_too_many(
        &c.acquire(l, "job", &a3, 5_000).await,
        "second waiter of one lock",
    );
    // A try-lock never queues: it is refused as held, not as too many.
    c.acquire(l, "job", &a3, 0)
        .await
        .expect_error(409, "lock_held", "try-lock on a full queue");
    // An unknown session still wins over a full queue.
    let ghost = "0123456789abcdef0123456789abcdef";
    c.acquire(l, "job", ghost, 5_000).await.expect_error(
        404,
        "session_not_found",
        "unknown session",
    );
    // Another lock is unaffected.
    c.acquire(l, "other", &a3, 0)
        .await
        .expect(200, "other lock");

    // Elections share the queue limit: b1 leads, b2 is the one candidate
    // allowed to wait.
    let campaign = |session: &str, wait_ms: u64| json!({"session_id": session, "value": "v", "wait_ms": wait_ms});
    c.post(l, "/v1/elections/boss/campaign", campaign(&b1, 0))
        .await
        .expect(200, "b1 leads");
    let b2_campaigns = wait_in_background(
        &c,
        l,
        "/v1/elections/boss/campaign".into(),
        campaign(&b2, 20_000),
    );
    eventually("b2 is a candidate", || async {
        c.node(l)
            .read_state(Consistency::Stale, |s| {
                s.queue_place(
                    raftlock_core::QueueKind::Election,
                    "boss",
                    b2.parse().expect("id"),
                )
            })
            .await
            .is_ok_and(|(_, queued)| queued)
    })
    .await;
    expect_too_many(
        &c.post(l, "/v1/elections/boss/campaign", campaign(&a3, 5_000))
            .await,
        "second waiting candidate",
    );

    // Released: the waiter is granted and the queue has room again.
    c.post(l, "/v1/locks/job/release", json!({"session_id": b1}))
        .await
        .expect(204, "release");
    let (status, body) = b2_waits.await.expect("join");
    assert_eq!(status, 200, "the waiter is granted: {body}");
    c.acquire(l, "job", &a3, 100).await.expect_error(
        408,
        "timeout",
        "queued again, then timed out",
    );
    c.post(l, "/v1/elections/boss/resign", json!({"session_id": b1}))
        .await
        .expect(204, "resign");
    let (status, body) = b2_campaigns.await.expect("join");
    assert_eq!(status, 200, "the candidate is elected: {body}");
    c.shutdown().await;
}

/// Writes `prefix`, then one byte of `trickle` every `every` until the
/// server closes the connection; returns (time to the close, what the
/// server sent). Panics if the server keeps it open past `limit`.
async fn trickle(
    url: &str,
    prefix: &str,
    trickle: &[u8],
    every: Duration,
    limit: Duration,
) -> (Duration, String) {
    let addr = url.trim_start_matches("http://");
    let stream = TcpStream::connect(addr).await.expect("connect");
    let started = Instant::now();
    let (mut read, mut write) = stream.into_split();
    let reader = tokio::spawn(async move {
        let mut received = Vec::new();
        // Ends on EOF or a reset: either way the server let go.
        let _ = read.read_to_end(&mut received).await;
        (
            started.elapsed(),
            String::from_utf8_lossy(&received).into_owned(),
        )
    });
    write.write_all(prefix.as_bytes()).await.expect("prefix");
    for byte in trickle.iter().cycle() {
        if reader.is_finished() {
            break;
        }
        assert!(
            started.elapsed() < limit,
            "the server still reads a client that sends a byte every {every:?} after {limit:?}"
        );
        if write.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(every).await;
    }
    reader.await.expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_by_the_read_deadlines() {
    let c = TestCluster::start_with(ApiConfig {
        header_read_timeout_ms: 1_000,
        body_read_timeout_ms: 1_000,
        ..ApiConfig::default()
    })
    .await;
    let url = c.urls[0].clone();
    let every = Duration::from_millis(400);
    let limit = Duration::from_secs(8);

    // Headers that never end: one byte at a time, faster than 1 byte/s.
    let (took, answer) = trickle(
        &url,
        "GET /v1/health HTTP/1.1\r\nHost: raftlock\r\nX-Slow: ",
        b"a",
        every,
        limit,
    )
    .await;
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "header deadline 1 s, connection closed after {took:?}"
    );
    assert!(!answer.contains("200 OK"), "{answer}");

    // Complete headers, a body that trickles: 408 request_timeout, closed.
    let (took, answer) = trickle(
        &url,
        "POST /v1/sessions HTTP/1.1\r\nHost: raftlock\r\n\
         Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{",
        b" ",
        every,
        limit,
    )
    .await;
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "body deadline 1 s, connection closed after {took:?}"
    );
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("\"request_timeout\""),
        "{answer}"
    );

    // The deadlines cover reading the request only: a long poll that
    // outlasts them is answered normally.
    let holder = c.open_session(0, "holder").await;
    let waiter = c.open_session(0, "waiter").await;
    c.acquire(0, "slow", &holder, 0).await.expect(200, "held");
    let started = Instant::now();
    c.acquire(0, "slow", &waiter, 2_500).await.expect_error(
        408,
        "timeout",
        "a long poll past the read deadlines",
    );
    assert!(started.elapsed() >= Duration::from_millis(2_400));
    c.shutdown().await;
}
