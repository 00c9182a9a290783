//! Read-write locks, semaphores and multi-locks over HTTP (docs/api.md):
//! shapes of the answers, the error codes, a waiter granted through a
//! follower by another session's release, and session close releasing.

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::common::{eventually, TestCluster};

fn post_in_background(
    c: &TestCluster,
    i: usize,
    path: &str,
    body: Value,
) -> JoinHandle<(u16, Value)> {
    let url = format!("{}{path}", c.urls[i]);
    let http = c.http.clone();
    tokio::spawn(async move {
        let reply = http.post(url).json(&body).send().await.expect("send");
        let status = reply.status().as_u16();
        (status, reply.json().await.expect("json"))
    })
}

async fn waiting(c: &TestCluster, path: &str) -> usize {
    let body = c.get(0, path).await;
    body.expect(200, "inspect")["waiters"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlocks_share_between_readers_and_exclude_writers() {
    let c = TestCluster::start().await;
    let (r1, r2, w) = (
        c.open_session(0, "r1").await,
        c.open_session(1, "r2").await,
        c.open_session(2, "w").await,
    );
    let acquire = |s: &str, mode: &str, wait_ms: u64| json!({"session_id": s, "mode": mode, "wait_ms": wait_ms});
    let a = c
        .post(0, "/v1/rwlocks/docs/acquire", acquire(&r1, "read", 0))
        .await;
    let a = a.expect(200, "first reader").clone();
    assert_eq!(a["rwlock"], "docs");
    assert_eq!(a["mode"], "read");
    let b = c
        .post(1, "/v1/rwlocks/docs/acquire", acquire(&r2, "read", 0))
        .await;
    let b = b.expect(200, "second reader shares").clone();
    assert!(b["fencing_token"].as_u64() > a["fencing_token"].as_u64());
    c.post(2, "/v1/rwlocks/docs/acquire", acquire(&w, "write", 0))
        .await
        .expect_error(409, "lock_held", "try-write under readers");
    // A waiting writer, through a follower, granted by the last release.
    let writer = post_in_background(
        &c,
        2,
        "/v1/rwlocks/docs/acquire",
        acquire(&w, "write", 30_000),
    );
    eventually("the writer queues", || async {
        waiting(&c, "/v1/rwlocks/docs").await == 1
    })
    .await;
    let view = c.get(0, "/v1/rwlocks/docs").await;
    let view = view.expect(200, "inspect").clone();
    assert_eq!(view["holders"].as_array().map(Vec::len), Some(2));
    assert_eq!(view["holders"][0]["mode"], "read");
    assert_eq!(view["waiters"][0]["mode"], "write");
    // The listing shows the same holders and counts the waiter.
    let listed = c.get(1, "/v1/rwlocks?prefix=do").await;
    let listed = listed.expect(200, "list").clone();
    assert_eq!(listed["rwlocks"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["rwlocks"][0]["rwlock"], "docs");
    assert_eq!(listed["rwlocks"][0]["holders"], view["holders"]);
    assert_eq!(listed["rwlocks"][0]["waiters"], 1);
    let other = c.get(2, "/v1/rwlocks?prefix=x&consistency=stale").await;
    assert_eq!(other.expect(200, "list")["rwlocks"], json!([]));
    // Locks and read-write locks are separate queues.
    let locks = c.get(0, "/v1/locks").await;
    assert_eq!(locks.expect(200, "locks")["locks"], json!([]));
    // A reader now queues behind the writer instead of overtaking it.
    let r3 = c.open_session(0, "r3").await;
    c.post(0, "/v1/rwlocks/docs/acquire", acquire(&r3, "read", 0))
        .await
        .expect_error(409, "lock_held", "a reader behind a waiting writer");
    let release = |s: &str| json!({"session_id": s});
    c.post(0, "/v1/rwlocks/docs/release", release(&r1))
        .await
        .expect(204, "release r1");
    assert!(!writer.is_finished());
    // Closing the last reader's session releases its hold.
    c.call(
        1,
        reqwest::Method::DELETE,
        &format!("/v1/sessions/{r2}"),
        None,
    )
    .await
    .expect(204, "close r2");
    let (status, body) = writer.await.expect("task");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], "write");
    c.post(
        0,
        "/v1/rwlocks/docs/acquire",
        json!({"session_id": r1, "mode": "both"}),
    )
    .await
    .expect_error(400, "bad_request", "an unknown mode");
    c.post(0, "/v1/rwlocks/docs/release", release(&r1))
        .await
        .expect_error(403, "not_owner", "release without a hold");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_fix_their_limit_and_admit_that_many() {
    let c = TestCluster::start().await;
    let mut s = Vec::new();
    for i in 0..3 {
        s.push(c.open_session(i, &format!("s{i}")).await);
    }
    let acquire = |s: &str, permits: u64, wait_ms: u64| json!({"session_id": s, "permits": permits, "wait_ms": wait_ms});
    let first = c
        .post(0, "/v1/semaphores/pool/acquire", acquire(&s[0], 2, 0))
        .await;
    assert_eq!(first.expect(200, "first")["permits"], 2);
    c.post(1, "/v1/semaphores/pool/acquire", acquire(&s[1], 3, 0))
        .await
        .expect_error(409, "limit_mismatch", "another limit");
    c.post(1, "/v1/semaphores/pool/acquire", acquire(&s[1], 0, 0))
        .await
        .expect_error(400, "bad_request", "no permits");
    c.post(1, "/v1/semaphores/pool/acquire", acquire(&s[1], 2, 0))
        .await
        .expect(200, "second");
    c.post(2, "/v1/semaphores/pool/acquire", acquire(&s[2], 2, 0))
        .await
        .expect_error(409, "lock_held", "full");
    let third = post_in_background(
        &c,
        2,
        "/v1/semaphores/pool/acquire",
        acquire(&s[2], 2, 30_000),
    );
    eventually("the third queues", || async {
        waiting(&c, "/v1/semaphores/pool").await == 1
    })
    .await;
    let view = c.get(1, "/v1/semaphores/pool").await;
    let view = view.expect(200, "inspect").clone();
    assert_eq!(view["permits"], 2);
    assert_eq!(view["holders"].as_array().map(Vec::len), Some(2));
    assert!(view["holders"][0].get("mode").is_none());
    let listed = c.get(0, "/v1/semaphores").await;
    let listed = listed.expect(200, "list").clone();
    let line = &listed["semaphores"][0];
    assert_eq!(listed["semaphores"].as_array().map(Vec::len), Some(1));
    assert_eq!(line["semaphore"], "pool");
    assert_eq!(line["permits"], 2);
    assert_eq!(line["holders"], view["holders"]);
    assert_eq!(line["waiters"], 1);
    c.get(0, "/v1/semaphores?prefix=p&limit=1")
        .await
        .expect_error(400, "bad_request", "an unknown query parameter");
    c.post(
        0,
        "/v1/semaphores/pool/release",
        json!({"session_id": s[0]}),
    )
    .await
    .expect(204, "release");
    let (status, body) = third.await.expect("task");
    assert_eq!(status, 200, "{body}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilocks_take_every_lock_or_none() {
    let c = TestCluster::start().await;
    let (a, b) = (c.open_session(0, "a").await, c.open_session(1, "b").await);
    let set = |s: &str, locks: &[&str], wait_ms: u64| json!({"session_id": s, "locks": locks, "wait_ms": wait_ms});
    let got = c
        .post(
            0,
            "/v1/multilocks/acquire",
            set(&a, &["acct/1", "acct/2"], 0),
        )
        .await;
    let got = got.expect(200, "both free").clone();
    assert_eq!(got["locks"][0]["lock"], "acct/1");
    assert_eq!(got["locks"][1]["lock"], "acct/2");
    assert_eq!(
        got["locks"][0]["fencing_token"],
        got["locks"][1]["fencing_token"]
    );
    // The locks are the ordinary locks.
    let lock = c.get(1, "/v1/locks/acct/2").await;
    assert_eq!(
        lock.expect(200, "inspect")["holder"]["node"],
        got["locks"][1]["node"]
    );
    c.post(
        1,
        "/v1/multilocks/acquire",
        set(&b, &["acct/3", "acct/2"], 0),
    )
    .await
    .expect_error(409, "lock_held", "one of them is held");
    let free = c.get(1, "/v1/locks/acct/3").await;
    assert_eq!(
        free.expect(200, "inspect")["holder"],
        Value::Null,
        "none taken"
    );
    c.post(
        1,
        "/v1/multilocks/acquire",
        set(&b, &["acct/3", "acct/3"], 0),
    )
    .await
    .expect_error(400, "bad_request", "a lock twice");
    c.post(1, "/v1/multilocks/acquire", set(&b, &[], 0))
        .await
        .expect_error(400, "bad_request", "no locks");
    let waiter = post_in_background(
        &c,
        1,
        "/v1/multilocks/acquire",
        set(&b, &["acct/2", "acct/1"], 30_000),
    );
    eventually("the set queues", || async {
        waiting(&c, "/v1/locks/acct/1").await == 1
    })
    .await;
    c.post(
        0,
        "/v1/multilocks/release",
        json!({"session_id": a, "locks": ["acct/1", "acct/2"]}),
    )
    .await
    .expect(204, "release together");
    let (status, body) = waiter.await.expect("task");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["locks"].as_array().map(Vec::len), Some(2));
    c.shutdown().await;
}
