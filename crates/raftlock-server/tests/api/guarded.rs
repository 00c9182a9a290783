//! Guarded writes and transactions (docs/api.md, Nodes and Transactions)
//! through followers and the leader: a stale fencing token never writes,
//! and a transaction applies all of its branch or nothing.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::TestCluster;

fn b64(text: &str) -> String {
    BASE64.encode(text)
}

fn guarded(data: &str, token: &Value) -> Value {
    json!({"data": b64(data), "if_holder": {"lock": "orders/42", "fencing_token": token}})
}

#[tokio::test]
async fn a_guarded_write_commits_only_for_the_current_holder() {
    let c = TestCluster::start().await;
    let l = c.leader().await;
    let (f1, f2) = ((l + 1) % 3, (l + 2) % 3);
    let (a, b) = (c.open_session(f1, "a").await, c.open_session(f2, "b").await);
    let first = c.acquire(f1, "orders/42", &a, 1_000).await;
    let first_token = first.expect(200, "a holds")["fencing_token"].clone();

    let written = c
        .call(
            f1,
            Method::PUT,
            "/v1/nodes/ledger",
            Some(guarded("a1", &first_token)),
        )
        .await;
    assert_eq!(written.expect(201, "holder's write")["version"], 1);

    // A's session ends (closed by someone else, as an expiry would) and B
    // is granted: A's token is stale from that log entry on.
    c.call(f2, Method::DELETE, &format!("/v1/sessions/{a}"), None)
        .await
        .expect(204, "close a");
    let second = c.acquire(f2, "orders/42", &b, 1_000).await;
    let second_token = second.expect(200, "b holds")["fencing_token"].clone();
    for node in [l, f1, f2] {
        let stale = c
            .call(
                node,
                Method::PUT,
                "/v1/nodes/ledger",
                Some(guarded("a2", &first_token)),
            )
            .await;
        stale.expect_error(409, "not_holder", "a stale token");
        assert!(
            stale.body["message"]
                .as_str()
                .unwrap_or_default()
                .contains(&second_token.to_string()),
            "the message names the current token: {}",
            stale.body
        );
    }
    let ledger = c.get(l, "/v1/nodes/ledger").await;
    let ledger = ledger.expect(200, "read");
    assert_eq!(
        (&ledger["data"], &ledger["version"]),
        (&json!(b64("a1")), &json!(1))
    );

    c.call(
        f2,
        Method::PUT,
        "/v1/nodes/ledger",
        Some(guarded("b1", &second_token)),
    )
    .await
    .expect(200, "the new holder's write");
    // A free lock has no holder: every token is stale.
    c.post(f1, "/v1/locks/orders/42/release", json!({"session_id": b}))
        .await
        .expect(204, "release");
    c.call(
        l,
        Method::PUT,
        "/v1/nodes/ledger",
        Some(guarded("b2", &second_token)),
    )
    .await
    .expect_error(409, "not_holder", "a released lock");
    // Bad guards never reach the log.
    let bad = json!({"data": "", "if_holder": {"lock": "../x", "fencing_token": 1}});
    c.call(f1, Method::PUT, "/v1/nodes/ledger", Some(bad))
        .await
        .expect_error(400, "bad_request", "a bad lock name");
    let state = c.state().await;
    assert_eq!(state.node("/ledger").map(|n| n.version), Some(2));
    c.shutdown().await;
}

#[tokio::test]
async fn a_transaction_applies_its_branch_atomically() {
    let c = TestCluster::start().await;
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let a = c.open_session(f, "a").await;
    let token = c.acquire(f, "orders/42", &a, 1_000).await;
    let token = token.expect(200, "a holds")["fencing_token"].clone();

    let create_once = json!({
        "compare": [
            {"path": "config/db", "version": 0},
            {"lock": "orders/42", "fencing_token": token},
        ],
        "success": [
            {"put": {"path": "config/db", "data": b64("v1")}},
            {"put": {"path": "/config/owner", "data": b64("a")}},
        ],
        "failure": [
            {"put": {"path": "config/conflicts", "data": b64("1")}},
        ],
    });
    let first = c.post(f, "/v1/txn", create_once.clone()).await;
    let first = first.expect(200, "first txn").clone();
    assert_eq!(first["succeeded"], true, "{first}");
    assert_eq!(first["responses"][0]["put"]["path"], "/config/db");
    assert_eq!(first["responses"][0]["put"]["created"], true);
    assert_eq!(
        first["responses"][0]["put"]["mod_revision"], first["responses"][1]["put"]["mod_revision"],
        "one log entry, one revision"
    );
    let second = c.post(l, "/v1/txn", create_once).await;
    let second = second.expect(200, "second txn").clone();
    assert_eq!(second["succeeded"], false, "{second}");
    assert!(second["responses"][0]["put"]["path"] == "/config/conflicts");

    // The second operation fails, so the first is not applied either.
    let revision_before = c.state().await.revision();
    let failing = json!({
        "compare": [{"path": "config/db", "value": b64("v1")}],
        "success": [
            {"delete": {"path": "config/owner"}},
            {"put": {"path": "config/db", "data": b64("v2"), "expected_version": 7}},
        ],
    });
    c.post(f, "/v1/txn", failing).await.expect_error(
        409,
        "version_mismatch",
        "a failing operation",
    );
    let state = c.state().await;
    assert_eq!(state.revision(), revision_before);
    assert!(
        state.node("/config/owner").is_some(),
        "the delete was rolled back"
    );

    for (body, what) in [
        (
            json!({"compare": [{"path": "x", "bogus": 1}]}),
            "an unknown compare",
        ),
        (
            json!({"success": [{"put": {"path": "locks/a", "data": ""}}]}),
            "a reserved path",
        ),
        (
            json!({"success": [{"delete": {"path": "a/../b"}}]}),
            "a bad path",
        ),
        (
            json!({"success": [{"put": {"path": "a", "data": "%%"}}]}),
            "bad base64",
        ),
        (
            json!({"compare": vec![json!({"path": "a", "version": 0}); 129]}),
            "too many compares",
        ),
    ] {
        c.post(l, "/v1/txn", body)
            .await
            .expect_error(400, "bad_request", what);
    }
    assert_eq!(c.state().await.revision(), revision_before);
    c.shutdown().await;
}
