//! Bearer tokens against real servers (docs/security.md): `401
//! unauthorized` without a valid token and `403 forbidden` outside a
//! token's grants, on every route family; sessions isolated between
//! principals; health and metrics open to all.

use raftlock_server::{hash_token, ApiConfig, AuthConfig, Grant, Permission, Token};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{raw_http, Reply, TestCluster};
use crate::observe::Events;

const OPS: &str = "ops-secret";
const BILLING: &str = "billing-secret";
const SHOP: &str = "shop-secret";
const VIEWER: &str = "viewer-secret";

fn token(name: &str, secret: &str, grants: &[(&str, &[Permission])]) -> Token {
    Token {
        name: name.into(),
        sha256: hash_token(secret),
        grants: grants
            .iter()
            .map(|(prefix, allow)| Grant {
                prefix: prefix.to_string(),
                allow: allow.to_vec(),
            })
            .collect(),
    }
}

/// ops: cluster admin. billing and shop: their own prefix, and `shared/`
/// where both lock (so session ownership is what stops one from using the
/// other's session); billing also reads everything. viewer: reads only.
fn config() -> ApiConfig {
    use Permission::{Admin, Lock, Read, Write};
    let mine: &[Permission] = &[Read, Lock, Write];
    ApiConfig {
        max_sessions_per_owner: Some(3),
        auth: AuthConfig {
            tokens: vec![
                token("ops", OPS, &[("", &[Admin])]),
                token(
                    "billing",
                    BILLING,
                    &[("billing/", mine), ("shared/", mine), ("", &[Read])],
                ),
                token("shop", SHOP, &[("shop/", mine), ("shared/", mine)]),
                token("viewer", VIEWER, &[("", &[Read])]),
            ],
        },
        ..ApiConfig::default()
    }
}

/// A request to node 0 with `Authorization: Bearer {token}` (none when
/// `None`); a body that is not JSON reads as `Null`.
async fn call(
    c: &TestCluster,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let mut request = c.http.request(method, format!("{}{path}", c.urls[0]));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status();
    let headers: HeaderMap = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
    }
}

async fn open(c: &TestCluster, token: &str) -> String {
    let reply = call(
        c,
        Some(token),
        Method::POST,
        "/v1/sessions",
        Some(json!({"ttl_ms": 60_000, "owner": "w"})),
    )
    .await;
    reply.expect(201, "open")["session_id"]
        .as_str()
        .expect("id")
        .to_string()
}

/// One request of every route family: (method, path, body).
fn every_route(session: &str, name: &str) -> Vec<(Method, String, Option<Value>)> {
    let s = || Some(json!({"session_id": session}));
    vec![
        (
            Method::POST,
            "/v1/sessions".into(),
            Some(json!({"ttl_ms": 5000})),
        ),
        (Method::GET, "/v1/sessions".into(), None),
        (Method::GET, format!("/v1/sessions/{session}"), None),
        (
            Method::POST,
            format!("/v1/sessions/{session}/keepalive"),
            None,
        ),
        (Method::DELETE, format!("/v1/sessions/{session}"), None),
        (
            Method::POST,
            format!("/v1/locks/{name}/acquire"),
            Some(json!({"session_id": session, "wait_ms": 0})),
        ),
        (Method::POST, format!("/v1/locks/{name}/release"), s()),
        (Method::GET, format!("/v1/locks/{name}"), None),
        (Method::GET, "/v1/locks".into(), None),
        (
            Method::POST,
            "/v1/fencing/check".into(),
            Some(json!({"lock": name, "fencing_token": 1})),
        ),
        (
            Method::POST,
            format!("/v1/elections/{name}/campaign"),
            Some(json!({"session_id": session, "value": "v", "wait_ms": 0})),
        ),
        (
            Method::POST,
            format!("/v1/elections/{name}/proclaim"),
            Some(json!({"session_id": session, "value": "v"})),
        ),
        (Method::POST, format!("/v1/elections/{name}/resign"), s()),
        (Method::GET, format!("/v1/elections/{name}"), None),
        (Method::GET, format!("/v1/elections/{name}/observe"), None),
        (Method::GET, "/v1/elections".into(), None),
        (Method::GET, "/v1/nodes".into(), None),
        (Method::GET, format!("/v1/nodes/{name}"), None),
        (
            Method::PUT,
            format!("/v1/nodes/{name}"),
            Some(json!({"data": ""})),
        ),
        (Method::DELETE, format!("/v1/nodes/{name}"), None),
        (Method::GET, "/v1/cluster".into(), None),
        (Method::GET, "/v1/cluster/members".into(), None),
        (Method::GET, "/v1/cluster/reachability".into(), None),
        (
            Method::POST,
            "/v1/cluster/members".into(),
            Some(json!({"id": 9, "api_addr": "h:1", "raft_addr": "h:2"})),
        ),
        (Method::DELETE, "/v1/cluster/members/9".into(), None),
        (Method::GET, "/v1/snapshot".into(), None),
        (Method::GET, "/v1/no-such-route".into(), None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_family_answers_401_without_a_valid_token() {
    let c = TestCluster::start_with(config()).await;
    let session = open(&c, BILLING).await;
    for (method, path, body) in every_route(&session, "billing/x") {
        let what = format!("{method} {path}");
        let none = call(&c, None, method.clone(), &path, body.clone()).await;
        none.expect_error(401, "unauthorized", &format!("{what} without a token"));
        assert_eq!(
            none.headers.get("www-authenticate").map(|v| v.as_bytes()),
            Some(&b"Bearer"[..]),
            "{what}"
        );
        let wrong = call(&c, Some("not-a-token"), method.clone(), &path, body.clone()).await;
        wrong.expect_error(401, "unauthorized", &format!("{what} with a wrong token"));
        // A digest is not a token: the config's hash must not work as one.
        let digest = hash_token(BILLING);
        let hashed = call(&c, Some(&digest), method.clone(), &path, body.clone()).await;
        hashed.expect_error(401, "unauthorized", &format!("{what} with the digest"));
    }
    // Other schemes are refused the same way.
    let basic = c
        .http
        .get(format!("{}/v1/cluster", c.urls[0]))
        .header("authorization", format!("Basic {BILLING}"))
        .send()
        .await
        .expect("send");
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
    // Health and metrics stay open.
    let health = call(&c, None, Method::GET, "/v1/health", None).await;
    health.expect(200, "health without a token");
    let metrics = call(&c, None, Method::GET, "/metrics", None).await;
    assert_eq!(metrics.status, StatusCode::OK, "metrics without a token");
    // So do the dashboard's static files, which hold no data (ui.rs).
    for asset in ["/ui/", "/ui/app.js", "/ui/plots.js", "/ui/app.css"] {
        let reply = call(&c, None, Method::GET, asset, None).await;
        assert_eq!(reply.status, StatusCode::OK, "{asset} without a token");
    }
    // The session was not touched by any of the refused requests.
    let mine = call(
        &c,
        Some(BILLING),
        Method::GET,
        &format!("/v1/sessions/{session}"),
        None,
    )
    .await;
    assert_eq!(mine.expect(200, "own session")["principal"], "billing");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_family_answers_403_outside_the_grants() {
    let c = TestCluster::start_with(config()).await;
    let billing = open(&c, BILLING).await;
    // shop may do nothing on billing/ (not even read); its session is its
    // own, so only the name decides. Sessions, cluster reads and listings
    // are not about a name: they are checked below and elsewhere.
    let shop = open(&c, SHOP).await;
    let named = |(_, path, _): &(Method, String, Option<Value>)| {
        path.contains("billing/x") || path == "/v1/fencing/check"
    };
    for (method, path, body) in every_route(&shop, "billing/x")
        .into_iter()
        .filter(|r| named(r))
    {
        let what = format!("{method} {path} by shop");
        call(&c, Some(SHOP), method, &path, body)
            .await
            .expect_error(403, "forbidden", &what);
    }
    // Cluster admin routes: billing is no admin.
    for (method, path, body) in every_route(&billing, "billing/x") {
        let admin = path.starts_with("/v1/cluster/members") && method != Method::GET
            || path == "/v1/snapshot";
        if admin {
            let what = format!("{method} {path} by billing");
            call(&c, Some(BILLING), method, &path, body)
                .await
                .expect_error(403, "forbidden", &what);
        }
    }
    // A read-only token cannot open a session, write a node or lock.
    let viewer_open = call(
        &c,
        Some(VIEWER),
        Method::POST,
        "/v1/sessions",
        Some(json!({"ttl_ms": 5000})),
    )
    .await;
    viewer_open.expect_error(403, "forbidden", "open by viewer");
    let viewer_put = call(
        &c,
        Some(VIEWER),
        Method::PUT,
        "/v1/nodes/billing/n",
        Some(json!({"data": ""})),
    )
    .await;
    viewer_put.expect_error(403, "forbidden", "put by viewer");
    // What the grants allow passes.
    let acquired = call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/locks/billing/x/acquire",
        Some(json!({"session_id": billing, "wait_ms": 0})),
    )
    .await;
    acquired.expect(200, "billing acquires billing/x");
    let read = call(&c, Some(VIEWER), Method::GET, "/v1/locks/billing/x", None).await;
    assert_eq!(
        read.expect(200, "viewer reads")["holder"]["principal"],
        "billing"
    );
    call(&c, Some(VIEWER), Method::GET, "/v1/cluster", None)
        .await
        .expect(200, "viewer reads the cluster");
    let backup = call(&c, Some(OPS), Method::GET, "/v1/snapshot", None).await;
    assert_eq!(backup.status, StatusCode::OK, "ops takes a backup");
    // Percent-encoding cannot smuggle a name past its grant.
    let encoded = call(&c, Some(SHOP), Method::GET, "/v1/locks/%62illing/x", None).await;
    encoded.expect_error(403, "forbidden", "encoded name");
    // Nor can dot segments climb out of a granted prefix (sent verbatim:
    // reqwest would resolve them).
    for path in [
        "/v1/nodes/shop/../billing/x",
        "/v1/nodes/shop/%2e%2e/billing/x",
    ] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SHOP}\r\nConnection: close\r\n\r\n"
        );
        let (status, body) = raw_http(&c.urls[0], &request).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("bad_request")),
            "{path}: {body}"
        );
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_isolated_between_principals() {
    let c = TestCluster::start_with(config()).await;
    let b = open(&c, BILLING).await;
    let s = open(&c, SHOP).await;
    // The session listing shows a principal its own sessions, a cluster
    // admin every one.
    let listed = |token: &'static str| {
        let c = &c;
        async move {
            let reply = call(c, Some(token), Method::GET, "/v1/sessions", None).await;
            let body = reply.expect(200, "session list").clone();
            let mut ids: Vec<String> = body["sessions"]
                .as_array()
                .expect("sessions")
                .iter()
                .map(|s| s["session_id"].as_str().expect("id").to_string())
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(listed(BILLING).await, [b.as_str()]);
    assert_eq!(listed(SHOP).await, [s.as_str()]);
    assert_eq!(listed(VIEWER).await, Vec::<String>::new());
    let mut both = vec![b.clone(), s.clone()];
    both.sort();
    assert_eq!(listed(OPS).await, both);
    let acquire = |session: &str| Some(json!({"session_id": session, "wait_ms": 0}));
    call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/locks/shared/x/acquire",
        acquire(&b),
    )
    .await
    .expect(200, "billing holds shared/x");
    call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/elections/shared/e/campaign",
        Some(json!({"session_id": b, "value": "b", "wait_ms": 0})),
    )
    .await
    .expect(200, "billing leads shared/e");
    call(
        &c,
        Some(BILLING),
        Method::PUT,
        "/v1/nodes/shared/n",
        Some(json!({"data": "", "session_id": b})),
    )
    .await
    .expect(201, "billing's ephemeral node");
    call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/locks/billing/y/acquire",
        acquire(&b),
    )
    .await
    .expect(200, "billing holds billing/y, which shop may not read");
    // shop queues behind it (the wait ends, the node stays queued).
    let queued = call(
        &c,
        Some(SHOP),
        Method::POST,
        "/v1/locks/shared/x/acquire",
        Some(json!({"session_id": s, "wait_ms": 50, "keep_queued": true})),
    )
    .await;
    queued.expect_error(408, "timeout", "shop queued behind billing");

    // shop cannot use billing's session, though both may lock shared/.
    let refused = [
        (Method::POST, format!("/v1/sessions/{b}/keepalive"), None),
        (Method::DELETE, format!("/v1/sessions/{b}"), None),
        (Method::GET, format!("/v1/sessions/{b}"), None),
        (
            Method::POST,
            "/v1/locks/shared/x/release".into(),
            Some(json!({"session_id": b})),
        ),
        (
            Method::POST,
            "/v1/locks/shared/y/acquire".into(),
            acquire(&b),
        ),
        (
            Method::POST,
            "/v1/elections/shared/e/proclaim".into(),
            Some(json!({"session_id": b, "value": "s"})),
        ),
        (
            Method::POST,
            "/v1/elections/shared/e/resign".into(),
            Some(json!({"session_id": b})),
        ),
        (
            Method::PUT,
            "/v1/nodes/shared/m".into(),
            Some(json!({"data": "", "session_id": b})),
        ),
    ];
    for (method, path, body) in refused {
        let what = format!("shop: {method} {path}");
        call(&c, Some(SHOP), method, &path, body)
            .await
            .expect_error(403, "forbidden", &what);
    }
    let state = c.state().await;
    let b_id = b.parse().expect("id");
    assert!(state.session(b_id).is_some(), "billing's session lives");
    let holder = state
        .queue(raftlock_core::QueueKind::Lock, "shared/x")
        .holder
        .expect("held");
    assert_eq!(holder.session, b_id, "billing still holds shared/x");

    // shop sees that billing holds it, and which node, but not the id.
    let seen = call(&c, Some(SHOP), Method::GET, "/v1/locks/shared/x", None).await;
    let seen = seen.expect(200, "shop reads shared/x");
    assert_eq!(seen["holder"]["session_id"], Value::Null, "{seen}");
    assert_eq!(seen["holder"]["principal"], "billing");
    assert!(seen["holder"]["node"]
        .as_str()
        .is_some_and(|n| n.starts_with("/locks/shared/x/")));
    assert_eq!(
        seen["waiters"][0]["session_id"],
        s.as_str(),
        "its own waiter"
    );
    let listed = call(&c, Some(SHOP), Method::GET, "/v1/locks", None).await;
    let listed = listed.expect(200, "shop lists");
    assert_eq!(
        listed["locks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["locks"][0]["lock"], "shared/x");
    assert_eq!(listed["locks"][0]["holder"]["session_id"], Value::Null);
    let everything = call(&c, Some(OPS), Method::GET, "/v1/locks", None).await;
    let everything = everything.expect(200, "ops lists");
    assert_eq!(
        everything["locks"].as_array().map(Vec::len),
        Some(2),
        "{everything}"
    );
    // observe: the first event and the ones after a change are redacted.
    let stream = c
        .http
        .get(format!("{}/v1/elections/shared/e/observe", c.urls[0]))
        .bearer_auth(SHOP)
        .send()
        .await
        .expect("observe");
    assert_eq!(stream.status(), StatusCode::OK);
    let mut events = Events {
        response: stream,
        buffer: String::new(),
    };
    let first = events.next().await;
    assert_eq!(first["leader"]["session_id"], Value::Null, "{first}");
    assert_eq!(first["leader"]["principal"], "billing", "{first}");
    let proclaim = json!({"session_id": b, "value": "b2"});
    call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/elections/shared/e/proclaim",
        Some(proclaim),
    )
    .await;
    let changed = events.next().await;
    assert_eq!(changed["leader"]["value"], "b2", "{changed}");
    assert_eq!(changed["leader"]["session_id"], Value::Null, "{changed}");
    drop(events);
    let election = call(&c, Some(SHOP), Method::GET, "/v1/elections/shared/e", None).await;
    assert_eq!(
        election.expect(200, "election")["leader"]["session_id"],
        Value::Null
    );
    let node = call(&c, Some(SHOP), Method::GET, "/v1/nodes/shared/n", None).await;
    assert_eq!(node.expect(200, "node")["ephemeral_owner"], Value::Null);
    // shop may write shared/n, but its answer hides billing's session too.
    let update = json!({"data": ""});
    let node = call(
        &c,
        Some(SHOP),
        Method::PUT,
        "/v1/nodes/shared/n",
        Some(update.clone()),
    )
    .await;
    assert_eq!(
        node.expect(200, "shop's update")["ephemeral_owner"],
        Value::Null
    );
    let node = call(
        &c,
        Some(BILLING),
        Method::PUT,
        "/v1/nodes/shared/n",
        Some(update),
    )
    .await;
    assert_eq!(
        node.expect(200, "billing's update")["ephemeral_owner"],
        b.as_str()
    );
    // billing sees its own ids; so does ops, for every session.
    for token in [BILLING, OPS] {
        let full = call(&c, Some(token), Method::GET, "/v1/locks/shared/x", None).await;
        assert_eq!(
            full.expect(200, "full view")["holder"]["session_id"],
            b.as_str()
        );
        let node = call(&c, Some(token), Method::GET, "/v1/nodes/shared/n", None).await;
        assert_eq!(node.expect(200, "node")["ephemeral_owner"], b.as_str());
    }
    // Sessions per owner count per principal, whatever label they carry.
    for label in ["a", "b"] {
        call(
            &c,
            Some(SHOP),
            Method::POST,
            "/v1/sessions",
            Some(json!({"ttl_ms": 60_000, "owner": label})),
        )
        .await
        .expect(201, "shop's second and third");
    }
    let fourth = call(
        &c,
        Some(SHOP),
        Method::POST,
        "/v1/sessions",
        Some(json!({"ttl_ms": 60_000, "owner": "c"})),
    )
    .await;
    fourth.expect_error(429, "too_many_requests", "shop's fourth session");
    assert!(fourth.body["message"]
        .as_str()
        .is_some_and(|m| m.contains("shop")));

    // ops may keep billing's session alive, and close it: shop gets the lock.
    call(
        &c,
        Some(OPS),
        Method::POST,
        &format!("/v1/sessions/{b}/keepalive"),
        None,
    )
    .await
    .expect(200, "ops keepalive");
    let closed = call(
        &c,
        Some(OPS),
        Method::DELETE,
        &format!("/v1/sessions/{b}"),
        None,
    )
    .await;
    assert_eq!(closed.status, StatusCode::NO_CONTENT);
    let state = c.state().await;
    let holder = state
        .queue(raftlock_core::QueueKind::Lock, "shared/x")
        .holder
        .expect("held");
    assert_eq!(
        holder.session,
        s.parse().expect("id"),
        "shop holds shared/x now"
    );
    assert_eq!(holder.principal.as_deref(), Some("shop"));
    c.shutdown().await;
}

/// The read-write lock and semaphore listings show a token only the names
/// it may read, and another principal's session ids as `null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_listings_show_only_readable_names() {
    let c = TestCluster::start_with(config()).await;
    let (b, s) = (open(&c, BILLING).await, open(&c, SHOP).await);
    for (token, session, name) in [(BILLING, &b, "billing/r"), (SHOP, &s, "shop/r")] {
        let body = json!({"session_id": session, "mode": "read", "wait_ms": 0});
        let path = format!("/v1/rwlocks/{name}/acquire");
        call(&c, Some(token), Method::POST, &path, Some(body))
            .await
            .expect(200, "read");
    }
    let body = json!({"session_id": b, "permits": 2, "wait_ms": 0});
    call(
        &c,
        Some(BILLING),
        Method::POST,
        "/v1/semaphores/billing/s/acquire",
        Some(body),
    )
    .await
    .expect(200, "a permit");
    let names = |reply: &Value, list: &str, field: &str| -> Vec<String> {
        reply[list]
            .as_array()
            .map(|lines| {
                lines
                    .iter()
                    .filter_map(|l| l[field].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let shop = call(&c, Some(SHOP), Method::GET, "/v1/rwlocks", None).await;
    let shop = shop.expect(200, "shop lists").clone();
    assert_eq!(names(&shop, "rwlocks", "rwlock"), ["shop/r"], "{shop}");
    let billing = call(&c, Some(BILLING), Method::GET, "/v1/rwlocks", None).await;
    let billing = billing.expect(200, "billing lists").clone();
    assert_eq!(
        names(&billing, "rwlocks", "rwlock"),
        ["billing/r", "shop/r"],
        "{billing}"
    );
    assert_eq!(
        billing["rwlocks"][0]["holders"][0]["session_id"],
        b.as_str()
    );
    assert_eq!(
        billing["rwlocks"][1]["holders"][0]["session_id"],
        Value::Null
    );
    assert_eq!(billing["rwlocks"][1]["holders"][0]["principal"], "shop");
    let sems = call(&c, Some(SHOP), Method::GET, "/v1/semaphores", None).await;
    let sems = sems.expect(200, "shop lists semaphores").clone();
    assert_eq!(sems["semaphores"], json!([]), "{sems}");
    let sems = call(&c, Some(VIEWER), Method::GET, "/v1/semaphores", None).await;
    let sems = sems.expect(200, "viewer lists semaphores").clone();
    assert_eq!(names(&sems, "semaphores", "semaphore"), ["billing/s"]);
    call(&c, None, Method::GET, "/v1/rwlocks", None)
        .await
        .expect_error(401, "unauthorized", "no token");
    c.shutdown().await;
}
