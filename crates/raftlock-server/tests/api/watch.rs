//! Node watches as Server-Sent Events: from a read's revision, every
//! later change of the node and its children in revision order, through
//! another member than the writes.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{TestCluster, WAIT};

/// The next `(event, data)` of an SSE response; skips comments.
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> (String, Value) {
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let (mut name, mut data) = (String::new(), String::new());
            for line in frame.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim().to_string();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            if name.is_empty() {
                continue;
            }
            return (
                name,
                serde_json::from_str(&data).expect("event data is JSON"),
            );
        }
        let chunk = tokio::time::timeout(WAIT, response.chunk())
            .await
            .expect("an event in time")
            .expect("stream readable")
            .expect("stream open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn a_watch_from_a_reads_revision_misses_nothing() {
    let c = TestCluster::start().await;
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let put = |v: &str| Some(json!({"data": BASE64.encode(v)}));
    c.call(l, Method::PUT, "/v1/nodes/config/a", put("1"))
        .await
        .expect(201, "create");
    let read = c.get(f, "/v1/nodes/config").await;
    read.expect(200, "read the parent");
    let revision: u64 = read.headers["raftlock-revision"]
        .to_str()
        .ok()
        .and_then(|r| r.parse().ok())
        .expect("a revision header");
    // Changes after the read and before the watch starts.
    c.call(l, Method::PUT, "/v1/nodes/config/b", put("2"))
        .await
        .expect(201, "b");
    c.call(l, Method::PUT, "/v1/nodes/other", put("x"))
        .await
        .expect(201, "not watched");
    c.call(l, Method::PUT, "/v1/nodes/config/a/deep", put("x"))
        .await
        .expect(201, "a grandchild is not watched");
    let url = format!(
        "{}/v1/nodes/config?watch=true&since_revision={revision}",
        c.urls[f]
    );
    let mut stream = c.http.get(url).send().await.expect("watch");
    assert_eq!(stream.status(), 200);
    let mut buffer = String::new();
    // And changes after it started.
    c.call(l, Method::PUT, "/v1/nodes/config/a", put("3"))
        .await
        .expect(200, "update a");
    c.call(l, Method::DELETE, "/v1/nodes/config/b", None)
        .await
        .expect(204, "delete b");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (kind, data) = next_event(&mut stream, &mut buffer).await;
        seen.push((kind, data["path"].clone(), data["revision"].clone(), data));
    }
    let kinds: Vec<(&str, &str)> = seen
        .iter()
        .map(|(k, p, _, _)| (k.as_str(), p.as_str().unwrap_or("?")))
        .collect();
    assert_eq!(
        kinds,
        [
            ("put", "/config/b"),
            ("put", "/config/a"),
            ("delete", "/config/b")
        ]
    );
    let revisions: Vec<u64> = seen.iter().filter_map(|(_, _, r, _)| r.as_u64()).collect();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
    assert!(revisions[0] > revision);
    assert_eq!(seen[1].3["node"]["version"], 2);
    assert_eq!(seen[1].3["node"]["data"], BASE64.encode("3"));
    c.shutdown().await;
}

/// A lock with a lock-delay whose holder's session ends is held off: its
/// node stays, without an owner, until the delay has passed. Both steps
/// are changes of that node, and a watch on the lock sees both, in order
/// (docs/api.md, "Lock-delay"); the listing shows the hold-off meanwhile.
#[tokio::test]
async fn a_watch_sees_a_lock_held_off_and_then_handed_on() {
    // Long enough to list the lock while it is held off, on a busy machine.
    const LOCK_DELAY_MS: u64 = 3_000;
    let c = TestCluster::start().await;
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let holder = c
        .post(
            l,
            "/v1/sessions",
            json!({"ttl_ms": 10_000, "owner": "holder"}),
        )
        .await
        .expect(201, "open")["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let grant = c
        .post(
            l,
            "/v1/locks/ledger/acquire",
            json!({"session_id": holder, "lock_delay_ms": LOCK_DELAY_MS}),
        )
        .await;
    let node = grant.expect(200, "acquire")["node"]
        .as_str()
        .expect("node")
        .to_string();
    let read = c.get(f, &format!("/v1/nodes{node}")).await;
    read.expect(200, "the holder's node");
    let revision: u64 = read.headers["raftlock-revision"]
        .to_str()
        .ok()
        .and_then(|r| r.parse().ok())
        .expect("a revision header");
    let url = format!(
        "{}/v1/nodes{node}?watch=true&since_revision={revision}",
        c.urls[f]
    );
    let mut stream = c.http.get(url).send().await.expect("watch");
    assert_eq!(stream.status(), 200);
    let mut buffer = String::new();

    c.call(l, Method::DELETE, &format!("/v1/sessions/{holder}"), None)
        .await
        .expect(204, "close the holder's session");
    let (kind, held_off) = next_event(&mut stream, &mut buffer).await;
    assert_eq!((kind.as_str(), &held_off["path"]), ("put", &json!(node)));
    assert_eq!(
        held_off["node"]["ephemeral_owner"],
        Value::Null,
        "{held_off}"
    );
    let listed = c.get(l, "/v1/locks?prefix=ledger").await;
    let listed = &listed.expect(200, "list")["locks"][0];
    assert_eq!(listed["lock_delay_ms"], LOCK_DELAY_MS, "{listed}");
    assert_eq!(listed["held_off"], true, "{listed}");
    assert_eq!(listed["holder"], Value::Null, "{listed}");
    let (kind, ended) = next_event(&mut stream, &mut buffer).await;
    assert_eq!((kind.as_str(), &ended["path"]), ("delete", &json!(node)));
    let revisions = [&held_off["revision"], &ended["revision"]].map(|r| r.as_u64());
    assert!(revisions[0] < revisions[1], "{revisions:?}");
    c.shutdown().await;
}
