//! The dashboard's routes: its static files (`/ui`), and
//! `GET /v1/cluster/reachability`, which lets any member tell a dead
//! member from a live one (docs/api.md, "Dashboard").

use reqwest::StatusCode;

use crate::common::{eventually, TestCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_serves_the_dashboard_files() {
    let c = TestCluster::start().await;
    for (path, content_type, contains) in [
        ("/ui", "text/html", "<title>raftlock</title>"),
        ("/ui/", "text/html", "/ui/app.js"),
        ("/ui/app.js", "text/javascript", "/v1/cluster/reachability"),
        (
            "/ui/plots.js",
            "text/javascript",
            "raftlock_acquire_grants_total",
        ),
        ("/ui/app.css", "text/css", "--mono"),
    ] {
        for url in &c.urls {
            let response = c
                .http
                .get(format!("{url}{path}"))
                .send()
                .await
                .expect("get");
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            // `/ui` redirects to `/ui/`, whose relative links then work.
            assert!(response.url().path().starts_with("/ui/"), "{path}");
            let header = |name: &str| {
                let value = response
                    .headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap_or(""));
                value.unwrap_or("").to_string()
            };
            assert!(header("content-type").starts_with(content_type), "{path}");
            assert!(header("content-security-policy").contains("connect-src 'self'"));
            let body = response.text().await.expect("body");
            assert!(body.contains(contains), "{path}");
        }
    }
    let missing = c.get(0, "/ui/nothing.js").await;
    missing.expect_error(404, "not_found", "an unknown file under /ui");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reachability_tells_a_stopped_member_from_live_ones() {
    let mut c = TestCluster::start().await;
    c.leader().await;
    // A follower that has not yet applied the leader's first entry is
    // (rightly) not healthy; on a loaded machine that can take a moment.
    for i in 0..3 {
        let c = &c;
        eventually("every member caught up", move || async move {
            c.get(i, "/v1/health").await.status == StatusCode::OK
        })
        .await;
    }
    for i in 0..3 {
        let reply = c.get(i, "/v1/cluster/reachability").await;
        let body = reply.expect(200, "reachability");
        assert_eq!(body["node_id"], (i + 1) as u64);
        let members = body["members"].as_array().expect("members");
        assert_eq!(members.len(), 3, "{body}");
        for m in members {
            assert_eq!(m["reachable"], true, "{body}");
            assert_eq!(m["healthy"], true, "{body}");
            assert!(m["applied_index"].as_u64().is_some(), "{body}");
            assert!(m["error"].is_null(), "{body}");
        }
    }
    // Member 3's API stops: the others see it refuse connections.
    c.stop_api(2).await;
    let reply = c.get(0, "/v1/cluster/reachability").await;
    let body = reply.expect(200, "reachability");
    let of = |id: u64| {
        body["members"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["id"] == id))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(of(1)["reachable"], true, "{body}");
    assert_eq!(of(2)["reachable"], true, "{body}");
    assert_eq!(of(3)["reachable"], false, "{body}");
    assert!(of(3)["error"].is_string(), "{body}");
    assert!(of(3)["rtt_ms"].is_null(), "{body}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_list_shows_every_session_up_to_its_limit() {
    let c = TestCluster::start().await;
    let a = c.open_session(1, "worker-a").await;
    let b = c.open_session(2, "worker-b").await;
    c.acquire(0, "orders/1", &a, 0).await.expect(200, "a holds");
    let list = c.get(0, "/v1/sessions").await;
    let body = list.expect(200, "list");
    assert_eq!(body["truncated"], false, "{body}");
    let sessions = body["sessions"].as_array().expect("sessions");
    let of = |id: &str| sessions.iter().find(|s| s["session_id"] == id).cloned();
    let a_line = of(&a).expect("a listed");
    assert_eq!(a_line["owner"], "worker-a");
    assert!(a_line["ttl_ms"].as_u64().is_some());
    let nodes = a_line["nodes"].as_array().expect("nodes");
    assert!(nodes[0]
        .as_str()
        .is_some_and(|n| n.starts_with("/locks/orders/1/")));
    assert_eq!(of(&b).expect("b listed")["owner"], "worker-b");

    let one = c.get(0, "/v1/sessions?limit=1").await;
    let body = one.expect(200, "limit 1");
    assert_eq!(body["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["truncated"], true);
    c.get(0, "/v1/sessions?limit=10001").await.expect_error(
        400,
        "bad_request",
        "limit above the maximum",
    );
    c.shutdown().await;
}
