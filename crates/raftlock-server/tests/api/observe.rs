//! `observe` as Server-Sent Events: the state at connect, then one event
//! per change of leader or value, across a Raft leader change, ending on
//! graceful shutdown.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{TestCluster, WAIT};

/// Reads Server-Sent Events from a streaming response.
pub(crate) struct Events {
    pub response: reqwest::Response,
    pub buffer: String,
}

impl Events {
    /// The next `leader` event's data; skips keep-alive comments.
    pub async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let mut event = None;
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = Some(name.trim().to_string());
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                if event.as_deref() == Some("leader") {
                    return serde_json::from_str(&data).expect("event data is JSON");
                }
                continue;
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("an event in time")
                .expect("stream readable")
                .expect("stream still open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// True once the server ended the stream.
    async fn ended(&mut self) -> bool {
        loop {
            match tokio::time::timeout(WAIT, self.response.chunk()).await {
                Ok(Ok(Some(_))) => continue,
                Ok(Ok(None)) | Ok(Err(_)) => return true,
                Err(_) => return false,
            }
        }
    }
}

fn leader(event: &Value) -> (Value, Value) {
    (
        event["leader"]["session_id"].clone(),
        event["leader"]["value"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_streams_leader_and_value_changes() {
    let mut c = TestCluster::start().await;
    let l = c.leader().await;
    let (f, f2) = ((l + 1) % 3, (l + 2) % 3);
    let a = c.open_session(l, "a").await;
    let b = c.open_session(f, "b").await;

    let stream_client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let response = stream_client
        .get(format!("{}/v1/elections/svc/observe", c.urls[f]))
        .send()
        .await
        .expect("connect");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"].to_str().expect("ascii");
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let mut events = Events {
        response,
        buffer: String::new(),
    };

    // The state at connect.
    assert_eq!(
        events.next().await,
        json!({"election": "svc", "leader": null})
    );

    // A leader is elected.
    let campaign = |s: &str, v: &str| json!({"session_id": s, "value": v, "wait_ms": 20_000});
    c.post(l, "/v1/elections/svc/campaign", campaign(&a, "A"))
        .await
        .expect(200, "campaign");
    let event = events.next().await;
    assert_eq!(leader(&event), (json!(a), json!("A")));
    assert!(event["leader"]["node"].is_string() && event["leader"]["fencing_token"].is_u64());

    // A proclaim changes the value.
    c.post(
        f2,
        "/v1/elections/svc/proclaim",
        json!({"session_id": a, "value": "A2"}),
    )
    .await
    .expect(204, "proclaim");
    assert_eq!(leader(&events.next().await), (json!(a), json!("A2")));

    // A queued candidate is no change; the leader resigning is.
    let candidate = {
        let (http, url, body) = (c.http.clone(), c.urls[f].clone(), campaign(&b, "B"));
        tokio::spawn(async move {
            let reply = http
                .post(format!("{url}/v1/elections/svc/campaign"))
                .json(&body)
                .send()
                .await
                .expect("send");
            reply.status().as_u16()
        })
    };
    crate::common::eventually("b is a candidate", || async {
        c.get(l, "/v1/elections?prefix=svc").await.body["elections"][0]["candidates"] == 1
    })
    .await;
    c.post(l, "/v1/elections/svc/resign", json!({"session_id": a}))
        .await
        .expect(204, "resign");
    assert_eq!(leader(&events.next().await), (json!(b), json!("B")));
    assert_eq!(candidate.await.expect("join"), 200);

    // The stream on a follower survives the Raft leader going away.
    c.stop_node(l).await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        // 503 while the survivors elect a leader; retried (a 404 means an
        // earlier attempt whose answer was lost did close it).
        let reply = c
            .call(f2, Method::DELETE, &format!("/v1/sessions/{b}"), None)
            .await;
        match reply.status.as_u16() {
            204 | 404 => break,
            503 if std::time::Instant::now() < deadline => continue,
            other => panic!("close after failover: {other} {}", reply.body),
        }
    }
    assert_eq!(
        events.next().await,
        json!({"election": "svc", "leader": null})
    );

    // Graceful shutdown ends the stream and does not wait for it.
    c.stop_api(f).await;
    assert!(events.ended().await, "stream ended by shutdown");
    c.shutdown().await;
}
