//! Every endpoint of docs/api.md, through different nodes (writes on followers
//! are forwarded to the leader), ending with `no_leader` when a majority
//! is gone.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{eventually, TestCluster};

fn b64(text: &str) -> String {
    BASE64.encode(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_through_every_node() {
    let mut c = TestCluster::start().await;
    let l = c.leader().await;
    let (f1, f2) = ((l + 1) % 3, (l + 2) % 3);

    // --- Sessions -------------------------------------------------------
    let reply = c
        .post(
            f1,
            "/v1/sessions",
            json!({"ttl_ms": 60_000, "owner": "alice"}),
        )
        .await;
    let body = reply.expect(201, "open");
    assert_eq!(body["ttl_ms"], 60_000);
    let a = body["session_id"].as_str().expect("id").to_string();
    assert_eq!(a.len(), 32);
    let b = c.open_session(f2, "bob").await;
    let reply = c
        .post(f2, &format!("/v1/sessions/{a}/keepalive"), json!({}))
        .await;
    assert_eq!(reply.expect(200, "keepalive")["ttl_ms"], 60_000);
    let reply = c
        .call(
            l,
            Method::POST,
            &format!("/v1/sessions/{a}/keepalive"),
            None,
        )
        .await;
    reply.expect(200, "keepalive without a body");
    let session = c.get(l, &format!("/v1/sessions/{a}")).await;
    assert_eq!(
        *session.expect(200, "get session"),
        json!({"session_id": a, "owner": "alice", "principal": null, "ttl_ms": 60_000, "nodes": []})
    );

    // --- Locks ----------------------------------------------------------
    let granted = c.acquire(f1, "orders/42", &a, 5_000).await;
    let granted = granted.expect(200, "acquire").clone();
    let node = granted["node"].as_str().expect("node").to_string();
    let token = granted["fencing_token"].as_u64().expect("token");
    assert_eq!(granted["lock"], "orders/42");
    assert_eq!(granted["session_id"], a.as_str());
    assert_eq!(node, format!("/locks/orders/42/lock-{token:010}"));
    let again = c.acquire(f2, "orders/42", &a, 5_000).await;
    assert_eq!(
        again.expect(200, "idempotent acquire")["node"],
        node.as_str()
    );
    let session = c.get(f1, &format!("/v1/sessions/{a}")).await;
    assert_eq!(session.expect(200, "session")["nodes"], json!([node]));

    c.acquire(f2, "orders/42", &b, 0)
        .await
        .expect_error(409, "lock_held", "try-lock");
    let waiter = {
        let (http, url, b) = (c.http.clone(), c.urls[f2].clone(), b.clone());
        tokio::spawn(async move {
            let reply = http
                .post(format!("{url}/v1/locks/orders/42/acquire"))
                .json(&json!({"session_id": b, "wait_ms": 20_000}))
                .send()
                .await
                .expect("send");
            (
                reply.status().as_u16(),
                reply.json::<Value>().await.expect("json"),
            )
        })
    };
    eventually("bob queued", || async {
        c.get(l, "/v1/locks/orders/42").await.body["waiters"]
            .as_array()
            .is_some_and(|w| w.len() == 1)
    })
    .await;
    let lock = c.get(l, "/v1/locks/orders/42").await.body;
    assert_eq!(lock["lock"], "orders/42");
    let holder = &lock["holder"];
    assert_eq!(
        (
            &holder["session_id"],
            &holder["owner"],
            &holder["node"],
            &holder["fencing_token"]
        ),
        (&json!(a), &json!("alice"), &json!(node), &json!(token))
    );
    assert!(holder["since_revision"].as_u64().expect("since") >= token);
    assert_eq!(lock["waiters"][0]["session_id"], b.as_str());
    assert_eq!(lock["waiters"][0]["owner"], "bob");
    assert!(lock["waiters"][0]["node"].is_string());
    let stale = c.get(f1, "/v1/locks/orders/42?consistency=stale").await;
    stale.expect(200, "stale lock read");

    let list = c.get(f2, "/v1/locks?prefix=orders/").await;
    let list = list.expect(200, "list");
    assert_eq!(list["locks"][0]["lock"], "orders/42");
    assert_eq!(list["locks"][0]["holder"]["session_id"], a.as_str());
    assert_eq!(list["locks"][0]["waiters"], 1);
    let empty = c.get(f1, "/v1/locks?prefix=zzz").await;
    assert_eq!(*empty.expect(200, "empty list"), json!({"locks": []}));
    let nobody = c.get(f1, "/v1/locks/free").await;
    assert_eq!(
        *nobody.expect(200, "lock without nodes"),
        json!({"lock": "free", "holder": null, "waiters": [], "lock_delay_ms": null, "held_off": false})
    );

    let check = |lock: &str, token: u64| json!({"lock": lock, "fencing_token": token});
    let valid = c
        .post(f1, "/v1/fencing/check", check("orders/42", token))
        .await;
    assert_eq!(
        *valid.expect(200, "fencing"),
        json!({"valid": true, "current_token": token})
    );
    let stale_token = c
        .post(f2, "/v1/fencing/check", check("orders/42", token - 1))
        .await;
    assert_eq!(stale_token.body["valid"], false);
    let unheld = c.post(f2, "/v1/fencing/check", check("free", 1)).await;
    assert_eq!(
        *unheld.expect(200, "unheld"),
        json!({"valid": false, "current_token": null})
    );

    c.post(l, "/v1/locks/orders/42/release", json!({"session_id": a}))
        .await
        .expect(204, "release");
    let (status, won) = waiter.await.expect("waiter");
    assert_eq!(status, 200, "{won}");
    let token_b = won["fencing_token"].as_u64().expect("token");
    assert!(token_b > token, "fencing tokens increase");
    let old = c
        .post(f1, "/v1/fencing/check", check("orders/42", token))
        .await;
    assert_eq!(
        *old.expect(200, "old token"),
        json!({"valid": false, "current_token": token_b})
    );

    // --- Elections ------------------------------------------------------
    let campaign = |session: &str, value: &str, wait: u64| json!({"session_id": session, "value": value, "wait_ms": wait});
    let elected = c
        .post(
            f1,
            "/v1/elections/svc/campaign",
            campaign(&a, "host-a", 5_000),
        )
        .await;
    let elected = elected.expect(200, "campaign").clone();
    assert_eq!(elected["leader"], true);
    assert!(elected["node"]
        .as_str()
        .expect("node")
        .starts_with("/elections/svc/lock-"));
    let got = c.get(f2, "/v1/elections/svc").await;
    let got = got.expect(200, "get election");
    assert_eq!(got["election"], "svc");
    assert_eq!(got["leader"]["session_id"], a.as_str());
    assert_eq!(got["leader"]["value"], "host-a");
    assert_eq!(got["leader"]["node"], elected["node"]);
    assert_eq!(got["leader"]["fencing_token"], elected["fencing_token"]);
    c.post(f2, "/v1/elections/svc/campaign", campaign(&b, "host-b", 0))
        .await
        .expect_error(409, "lock_held", "campaign try");
    c.post(
        l,
        "/v1/elections/svc/proclaim",
        json!({"session_id": a, "value": "host-a2"}),
    )
    .await
    .expect(204, "proclaim");
    let got = c.get(f1, "/v1/elections/svc").await;
    assert_eq!(got.body["leader"]["value"], "host-a2");
    c.post(
        l,
        "/v1/elections/svc/proclaim",
        json!({"session_id": b, "value": "x"}),
    )
    .await
    .expect_error(409, "not_leader", "proclaim by a non-leader");
    let candidate = {
        let (http, url, b) = (c.http.clone(), c.urls[f2].clone(), b.clone());
        tokio::spawn(async move {
            let reply = http
                .post(format!("{url}/v1/elections/svc/campaign"))
                .json(&json!({"session_id": b, "value": "host-b", "wait_ms": 20_000}))
                .send()
                .await
                .expect("send");
            (
                reply.status().as_u16(),
                reply.json::<Value>().await.expect("json"),
            )
        })
    };
    eventually("bob campaigning", || async {
        c.get(l, "/v1/elections?prefix=sv").await.body["elections"][0]["candidates"] == 1
    })
    .await;
    c.post(f1, "/v1/elections/svc/resign", json!({"session_id": a}))
        .await
        .expect(204, "resign");
    let (status, won) = candidate.await.expect("candidate");
    assert_eq!((status, &won["leader"]), (200, &json!(true)), "{won}");
    let got = c.get(l, "/v1/elections/svc").await;
    assert_eq!(got.body["leader"]["session_id"], b.as_str());
    assert_eq!(got.body["leader"]["value"], "host-b");

    // --- Nodes ----------------------------------------------------------
    let put = |data: &str| json!({"data": b64(data)});
    let created = c
        .call(f1, Method::PUT, "/v1/nodes/config/db", Some(put("v1")))
        .await;
    let created = created.expect(201, "create").clone();
    assert_eq!(created["path"], "/config/db");
    assert_eq!(created["data"], b64("v1"));
    assert_eq!(created["version"], 1);
    assert_eq!(created["create_revision"], created["mod_revision"]);
    assert_eq!(created["ephemeral_owner"], Value::Null);
    let cas = json!({"data": b64("v2"), "expected_version": 1});
    let updated = c
        .call(f2, Method::PUT, "/v1/nodes/config/db", Some(cas.clone()))
        .await;
    let updated = updated.expect(200, "update").clone();
    assert_eq!(
        (&updated["version"], &updated["data"]),
        (&json!(2), &json!(b64("v2")))
    );
    assert_eq!(updated["create_revision"], created["create_revision"]);
    c.call(l, Method::PUT, "/v1/nodes/config/db", Some(cas))
        .await
        .expect_error(409, "version_mismatch", "stale CAS");
    let must_not_exist = json!({"data": "", "expected_version": 0});
    c.call(l, Method::PUT, "/v1/nodes/config/db", Some(must_not_exist))
        .await
        .expect_error(
            409,
            "version_mismatch",
            "create-only CAS on an existing node",
        );
    let seq = json!({"data": "", "sequential": true});
    // ZooKeeper's spelling, with the separator written by the client,
    // and the short one name the same series.
    let first = c
        .call(l, Method::PUT, "/v1/nodes/queue/item-", Some(seq.clone()))
        .await;
    assert_eq!(
        first.expect(201, "sequential")["path"],
        "/queue/item-0000000000"
    );
    let second = c
        .call(f1, Method::PUT, "/v1/nodes/queue/item", Some(seq))
        .await;
    assert_eq!(
        second.expect(201, "sequential")["path"],
        "/queue/item-0000000001"
    );
    let eph = json!({"data": "", "session_id": b});
    let member = c
        .call(f2, Method::PUT, "/v1/nodes/members/b", Some(eph.clone()))
        .await;
    assert_eq!(
        member.expect(201, "ephemeral")["ephemeral_owner"],
        b.as_str()
    );
    let member = c
        .call(f1, Method::PUT, "/v1/nodes/members/b", Some(eph))
        .await;
    assert_eq!(
        member.expect(200, "ephemeral update")["ephemeral_owner"],
        b.as_str()
    );
    // An update without a session keeps, and reports, the creator's.
    let member = c
        .call(
            f2,
            Method::PUT,
            "/v1/nodes/members/b",
            Some(json!({"data": ""})),
        )
        .await;
    assert_eq!(
        member.expect(200, "ephemeral update, no session")["ephemeral_owner"],
        b.as_str()
    );

    let read = c.get(l, "/v1/nodes/config/db").await;
    assert_eq!(*read.expect(200, "get node"), updated);
    c.get(f1, "/v1/nodes/config/db?consistency=stale")
        .await
        .expect(200, "stale");
    let children = c.get(f2, "/v1/nodes/queue?children=true").await;
    assert_eq!(
        *children.expect(200, "children"),
        json!({"children": ["item-0000000000", "item-0000000001"]})
    );
    // Tree paths take ZooKeeper's characters (docs/api.md, Nodes).
    let odd = "/v1/nodes/app/_c_1%20lock-%C3%A9";
    let made = c.call(f2, Method::PUT, odd, Some(put("z"))).await;
    assert_eq!(
        made.expect(201, "a ZooKeeper-style name")["path"],
        "/app/_c_1 lock-é"
    );
    let read = c.get(l, odd).await;
    assert_eq!(read.expect(200, "read it back")["data"], b64("z"));
    let top = c.get(f1, "/v1/nodes?children=true").await;
    for name in ["config", "elections", "locks", "members", "queue"] {
        assert!(
            top.body["children"]
                .as_array()
                .expect("list")
                .contains(&json!(name)),
            "{name}"
        );
    }
    c.get(f1, "/v1/nodes").await.expect(200, "the root");
    c.call(
        f1,
        Method::DELETE,
        "/v1/nodes/config/db?expected_version=1",
        None,
    )
    .await
    .expect_error(409, "version_mismatch", "delete CAS");
    c.call(
        f2,
        Method::DELETE,
        "/v1/nodes/config/db?expected_version=2",
        None,
    )
    .await
    .expect(204, "delete");
    c.call(l, Method::DELETE, "/v1/nodes/queue/item-0000000000", None)
        .await
        .expect(204, "delete without CAS");
    c.get(l, "/v1/nodes/config/db")
        .await
        .expect_error(404, "not_found", "deleted");

    // --- Closing sessions releases everything ---------------------------
    c.call(f2, Method::DELETE, &format!("/v1/sessions/{b}"), None)
        .await
        .expect(204, "close");
    c.get(l, "/v1/nodes/members/b")
        .await
        .expect_error(404, "not_found", "ephemeral gone");
    let lock = c.get(f1, "/v1/locks/orders/42").await;
    assert_eq!(lock.body["holder"], Value::Null);
    let election = c.get(f1, "/v1/elections/svc").await;
    assert_eq!(
        *election.expect(200, "election"),
        json!({"election": "svc", "leader": null})
    );
    c.post(l, &format!("/v1/sessions/{b}/keepalive"), json!({}))
        .await
        .expect_error(404, "session_not_found", "keepalive after close");

    // --- Cluster, health, metrics ---------------------------------------
    for i in 0..3 {
        let cluster = c.get(i, "/v1/cluster").await;
        let cluster = cluster.expect(200, "cluster");
        // Robust to a spurious election on a loaded machine: whoever leads,
        // the member list says so.
        let leader_id = cluster["leader_id"].as_u64().expect("a leader");
        assert!(cluster["term"].as_u64().expect("term") >= 1);
        let members = cluster["members"].as_array().expect("members");
        assert_eq!(members.len(), 3);
        for m in members {
            let id = m["id"].as_u64().expect("id") as usize;
            assert_eq!(
                m["api_addr"].as_str(),
                c.urls[id - 1].strip_prefix("http://")
            );
            assert!(m["raft_addr"].is_string());
            let role = if id as u64 == leader_id {
                "leader"
            } else {
                "follower"
            };
            assert_eq!(m["role"], role);
        }
        assert!(cluster["members"][i]["applied_index"].as_u64().is_some());
        c.get(i, "/v1/health").await.expect(200, "health");
    }
    let metrics_of = |i: usize| {
        let (http, url) = (c.http.clone(), c.urls[i].clone());
        async move {
            let reply = http
                .get(format!("{url}/metrics"))
                .send()
                .await
                .expect("metrics");
            assert!(reply.headers()["content-type"]
                .to_str()
                .is_ok_and(|t| t.starts_with("application/openmetrics-text; version=1.0.0")));
            reply.text().await.expect("text")
        }
    };
    // Both holds of orders/42 ended: a released, b's session closed.
    eventually("lock holds timed", || async {
        metrics_of(f2)
            .await
            .lines()
            .any(|l| l == "raftlock_lock_hold_seconds_count 2")
    })
    .await;
    let text = metrics_of(f2).await;
    for expected in [
        "raftlock_is_leader ",
        "raftlock_term ",
        "raftlock_applied_index ",
        "raftlock_sessions 1",
        "raftlock_nodes ",
        "raftlock_locks_held 0",
        "raftlock_lock_waiters 0",
        "raftlock_wakeups_total ",
        "raftlock_acquire_wait_seconds_bucket{le=\"+Inf\"} ",
        "raftlock_acquire_failures_total{reason=\"lock_held\"} 2",
        "# TYPE raftlock_lock_hold_seconds histogram",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(expected)),
            "metrics lack {expected:?}:\n{text}"
        );
    }
    // openraft 0.9 does not publish the commit index (RaftMetrics has the
    // applied index only), so no gauge may claim to be it.
    assert!(
        !text.contains("raftlock_commit_index"),
        "a commit-index gauge is back:\n{text}"
    );
    let mut leaders = 0;
    for i in 0..3 {
        let text = metrics_of(i).await;
        leaders += usize::from(text.lines().any(|l| l == "raftlock_is_leader 1"));
    }
    assert_eq!(leaders, 1, "exactly one node reports itself leader");

    // --- No leader --------------------------------------------------------
    let survivor = f2;
    c.stop_node(l).await;
    c.stop_node(f1).await;
    eventually("the survivor knows it has no leader", || async {
        c.node(survivor).status().leader_id.is_none()
    })
    .await;
    let reply = c
        .post(survivor, "/v1/sessions", json!({"ttl_ms": 10_000}))
        .await;
    reply.expect_error(503, "no_leader", "write without a majority");
    assert_eq!(
        reply.headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    c.get(survivor, "/v1/locks/orders/42").await.expect_error(
        503,
        "no_leader",
        "linearizable read without a majority",
    );
    c.get(survivor, "/v1/locks/orders/42?consistency=stale")
        .await
        .expect(200, "stale read without a majority");
    c.get(survivor, "/v1/health")
        .await
        .expect_error(503, "no_leader", "health");
    c.shutdown().await;
}
