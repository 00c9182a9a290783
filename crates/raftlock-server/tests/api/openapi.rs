//! `GET /v1/openapi.json` from a real server: served without a token
//! (it describes the API, not the cluster), and its `ErrorBody` schema
//! describes the errors the server actually sends. The document's routes
//! and codes are checked against the code in `src/openapi/tests.rs`.

use raftlock_server::{hash_token, ApiConfig, AuthConfig, Grant, Permission, Token};
use serde_json::Value;

use crate::common::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_served_without_a_token_and_describes_real_errors() {
    let tokens = AuthConfig {
        tokens: vec![Token {
            name: "ops".into(),
            sha256: hash_token("ops-secret"),
            grants: vec![Grant {
                prefix: String::new(),
                allow: vec![Permission::Admin],
            }],
        }],
    };
    let c = TestCluster::start_with(ApiConfig {
        auth: tokens,
        ..ApiConfig::default()
    })
    .await;
    let reply = c.get(0, "/v1/openapi.json").await;
    let doc = reply.expect(200, "the document, without a token").clone();
    let content_type = reply.headers.get("content-type").map(|v| v.as_bytes());
    assert_eq!(content_type, Some(&b"application/json"[..]));
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/sessions",
        "/v1/locks/{name}/acquire",
        "/v1/openapi.json",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    // A real error (no token on a guarded route) has the documented shape.
    let refused = c.get(0, "/v1/sessions").await;
    refused.expect_error(401, "unauthorized", "no token");
    let schema = &doc["components"]["schemas"]["ErrorBody"];
    let fields: Vec<&String> = refused.body.as_object().expect("object").keys().collect();
    let documented: Vec<&String> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .collect();
    assert_eq!(fields, documented, "error body fields");
    let codes = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("codes");
    assert!(codes.contains(&Value::from("unauthorized")), "{codes:?}");
    c.shutdown().await;
}
