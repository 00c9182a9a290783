//! Long-poll acquire: waiting on a follower, try-lock, timeouts that
//! withdraw, a closed session, cancel, a client that goes away and
//! retries, and graceful shutdown with a waiter pending.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::common::{eventually, TestCluster};

/// Starts an acquire in the background; yields (status, body).
fn acquire_in_background(
    c: &TestCluster,
    i: usize,
    lock: &str,
    session: &str,
    wait_ms: u64,
) -> JoinHandle<(u16, Value)> {
    let url = format!("{}/v1/locks/{lock}/acquire", c.urls[i]);
    let (http, session) = (c.http.clone(), session.to_string());
    tokio::spawn(async move {
        let reply = http
            .post(url)
            .json(&json!({"session_id": session, "wait_ms": wait_ms}))
            .send()
            .await
            .expect("send");
        let status = reply.status().as_u16();
        (status, reply.json().await.expect("json"))
    })
}

/// Sessions queued behind the holder of `lock`, read linearizably.
async fn waiters(c: &TestCluster, i: usize, lock: &str) -> Vec<String> {
    let lock = c.get(i, &format!("/v1/locks/{lock}")).await;
    lock.expect(200, "inspect")["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .map(|w| w["session_id"].as_str().expect("id").to_string())
        .collect()
}

async fn wait_until_queued(c: &TestCluster, lock: &str, session: &str) {
    eventually("the acquire is queued", || async {
        waiters(c, 0, lock).await.iter().any(|w| w == session)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_acquire() {
    let mut c = TestCluster::start().await;
    let l = c.leader().await;
    let (f, f2) = ((l + 1) % 3, (l + 2) % 3);
    let holder = c.open_session(l, "holder").await;
    let first = c.acquire(l, "job", &holder, 0).await;
    let first_token = first.expect(200, "uncontended try-lock")["fencing_token"]
        .as_u64()
        .expect("token");

    // A waiter on a follower is granted when the holder releases elsewhere.
    let w = c.open_session(f, "waiter").await;
    let waiting = acquire_in_background(&c, f, "job", &w, 20_000);
    wait_until_queued(&c, "job", &w).await;
    c.post(f2, "/v1/locks/job/release", json!({"session_id": holder}))
        .await
        .expect(204, "release on another node");
    let (status, granted) = waiting.await.expect("join");
    assert_eq!(status, 200, "{granted}");
    assert_eq!(granted["session_id"], w.as_str());
    assert!(granted["fencing_token"].as_u64().expect("token") > first_token);

    // Try-lock on the held lock: 409, nothing queued.
    c.acquire(f2, "job", &holder, 0)
        .await
        .expect_error(409, "lock_held", "try-lock");
    assert!(waiters(&c, l, "job").await.is_empty());

    // A wait that elapses: 408 and the node it created is gone.
    let started = Instant::now();
    c.acquire(f2, "job", &holder, 300)
        .await
        .expect_error(408, "timeout", "wait_ms elapsed");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(
        waiters(&c, f, "job").await.is_empty(),
        "timed-out node withdrawn"
    );
    let session = c.get(l, &format!("/v1/sessions/{holder}")).await;
    assert_eq!(session.body["nodes"], json!([]));

    // A session has one node per lock, so a timeout withdraws the
    // session's node whichever request queued it: the earlier request,
    // still waiting on it, is told `withdrawn` (finding 3 of the partition
    // review: a retried acquire re-attached to a node an earlier request
    // had queued, timed out, and left it queued while answering
    // "timeout").
    let earlier = acquire_in_background(&c, f, "job", &holder, 20_000);
    wait_until_queued(&c, "job", &holder).await;
    c.acquire(f2, "job", &holder, 200).await.expect_error(
        408,
        "timeout",
        "second acquire times out",
    );
    assert!(
        waiters(&c, l, "job").await.is_empty(),
        "the session's node is withdrawn"
    );
    let (status, body) = earlier.await.expect("join");
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("withdrawn")),
        "{body}"
    );

    // With keep_queued, a timeout keeps the node (and its place in line)
    // for the next poll, which is granted on release.
    let body = json!({"session_id": holder, "wait_ms": 200, "keep_queued": true});
    c.post(f2, "/v1/locks/job/acquire", body)
        .await
        .expect_error(408, "timeout", "kept poll times out");
    assert_eq!(
        waiters(&c, l, "job").await,
        vec![holder.clone()],
        "kept queued"
    );
    let next_poll = acquire_in_background(&c, f, "job", &holder, 20_000);
    c.post(l, "/v1/locks/job/release", json!({"session_id": w}))
        .await
        .expect(204, "release");
    let (status, granted) = next_poll.await.expect("join");
    assert_eq!(
        (status, &granted["session_id"]),
        (200, &json!(holder)),
        "{granted}"
    );

    // Closing the session of a waiting acquire answers it at once.
    let doomed = c.open_session(f2, "doomed").await;
    let waiting = acquire_in_background(&c, f, "job", &doomed, 20_000);
    wait_until_queued(&c, "job", &doomed).await;
    let closed_at = Instant::now();
    c.call(l, Method::DELETE, &format!("/v1/sessions/{doomed}"), None)
        .await
        .expect(204, "close");
    let (status, body) = waiting.await.expect("join");
    assert_eq!(
        (status, &body["error"]),
        (404, &json!("session_not_found")),
        "{body}"
    );
    assert!(
        closed_at.elapsed() < Duration::from_secs(5),
        "answered at once"
    );

    // Release while waiting cancels: the waiting acquire ends, nothing queued.
    let canceller = c.open_session(f, "canceller").await;
    let waiting = acquire_in_background(&c, f, "job", &canceller, 20_000);
    wait_until_queued(&c, "job", &canceller).await;
    c.post(
        f2,
        "/v1/locks/job/release",
        json!({"session_id": canceller}),
    )
    .await
    .expect(204, "cancel");
    let (status, body) = waiting.await.expect("join");
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("withdrawn")),
        "{body}"
    );
    assert!(waiters(&c, l, "job").await.is_empty());

    // A client that disconnects frees its registration on the server but
    // keeps its place in the queue: a retry of the same session, on any
    // node, re-attaches to the same node (idempotent acquire).
    let gone = c.open_session(f, "gone").await;
    let abandoned = acquire_in_background(&c, f, "job", &gone, 20_000);
    wait_until_queued(&c, "job", &gone).await;
    let queued = c.get(l, "/v1/locks/job").await.body["waiters"][0]["node"].clone();
    abandoned.abort();
    eventually("the abandoned long-poll is dropped", || async {
        c.node(f).counters().waiter_registrations == 0
    })
    .await;
    // The retry polls with keep_queued (as the clients' long polls do), so
    // its timeout keeps the node too.
    let retry = json!({"session_id": gone, "wait_ms": 100, "keep_queued": true});
    c.post(f2, "/v1/locks/job/acquire", retry)
        .await
        .expect_error(408, "timeout", "retry times out");
    let lock = c.get(l, "/v1/locks/job").await;
    assert_eq!(lock.body["waiters"][0]["node"], queued, "same node, kept");

    // Graceful shutdown ends a pending long-poll with 503 promptly; the node
    // stays queued, and the retry on another node is granted it.
    let waiting = acquire_in_background(&c, f, "job", &gone, 20_000);
    eventually("the long-poll waits on the follower", || async {
        c.node(f).counters().waiter_registrations > 0
    })
    .await;
    c.stop_api(f).await;
    let (status, body) = waiting.await.expect("join");
    assert_eq!(
        (status, &body["error"]),
        (503, &json!("shutting_down")),
        "{body}"
    );
    let retry = {
        let (http, url, gone) = (c.http.clone(), c.urls[f2].clone(), gone.clone());
        tokio::spawn(async move {
            let reply = http
                .post(format!("{url}/v1/locks/job/acquire"))
                .json(&json!({"session_id": gone, "wait_ms": 20_000}))
                .send()
                .await
                .expect("send");
            (
                reply.status().as_u16(),
                reply.json::<Value>().await.expect("json"),
            )
        })
    };
    c.post(l, "/v1/locks/job/release", json!({"session_id": holder}))
        .await
        .expect(204, "release");
    let (status, granted) = retry.await.expect("join");
    assert_eq!((status, &granted["node"]), (200, &queued), "{granted}");
    c.shutdown().await;
}
