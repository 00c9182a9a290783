//! Table-driven: every kind of bad input gets docs/api.md's JSON error with the
//! right status and code, changes nothing, and crashes nothing.

use reqwest::Method;
use serde_json::json;

use crate::common::{eventually, raw_http, TestCluster};

/// One row per line: `what | METHOD[content-type] path | status code | body`.
/// The content type defaults to `application/json` when there is a body;
/// `[none]` sends none. Body `-` is no body, `<empty>` an empty one.
/// `{S}` is a live session holding nothing, `{H}` a live session holding
/// lock `held` and leading election `e`, `{U}` a well-formed unknown
/// session; the other `{…}` are generated (see `expand`).
const TABLE: &str = r#"
malformed JSON | POST /v1/sessions | 400 bad_request | {"ttl_ms":
wrong type | POST /v1/sessions | 400 bad_request | {"ttl_ms":"10000"}
unknown field (typo) | POST /v1/sessions | 400 bad_request | {"ttl":10000}
extra field | POST /v1/sessions | 400 bad_request | {"ttl_ms":10000,"x":1}
missing field | POST /v1/sessions | 400 bad_request | {"owner":"w"}
TTL 0 | POST /v1/sessions | 400 bad_request | {"ttl_ms":0}
TTL below the minimum | POST /v1/sessions | 400 bad_request | {"ttl_ms":1}
TTL huge | POST /v1/sessions | 400 bad_request | {"ttl_ms":1000000000000}
TTL beyond u64 | POST /v1/sessions | 400 bad_request | {"ttl_ms":1e30}
TTL negative | POST /v1/sessions | 400 bad_request | {"ttl_ms":-5}
owner too long | POST /v1/sessions | 400 bad_request | {"ttl_ms":10000,"owner":"{OWNER300}"}
array body | POST /v1/sessions | 400 bad_request | [1,2]
null body | POST /v1/sessions | 400 bad_request | null
empty body | POST /v1/sessions | 400 bad_request | <empty>
body over the limit | POST /v1/sessions | 413 too_large | {"ttl_ms":10000,"owner":"{X1100K}"}
text/plain body | POST[text/plain] /v1/sessions | 415 unsupported_media_type | {"ttl_ms":10000}
no content type | POST[none] /v1/sessions | 415 unsupported_media_type | {"ttl_ms":10000}
keepalive unknown session | POST /v1/sessions/{U}/keepalive | 404 session_not_found | -
keepalive malformed id | POST /v1/sessions/xyz/keepalive | 404 session_not_found | -
get unknown session | GET /v1/sessions/{U} | 404 session_not_found | -
close unknown session | DELETE /v1/sessions/{U} | 404 session_not_found | -
sessions, wrong method | PUT /v1/sessions | 405 method_not_allowed | -
empty lock name | POST /v1/locks//acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
bare action, no name | POST /v1/locks/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
overlong lock name | POST /v1/locks/{NAME257}/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
space in name | POST /v1/locks/a%20b/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
star in name | POST /v1/locks/a*b/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
encoded .. component | POST /v1/locks/a%2F..%2Fb/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
encoded leading slash | POST /v1/locks/%2Fa/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
encoded empty component | POST /v1/locks/a%2F%2Fb/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
non-ASCII name | POST /v1/locks/%C3%A9/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
invalid UTF-8 escape | POST /v1/locks/%FF/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":0}
inspect bad name | GET /v1/locks/a%20b | 400 bad_request | -
wait_ms negative | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":-1}
wait_ms over the maximum | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":300001}
wait_ms float | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":1.5}
wait_ms beyond u64 | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":"{S}","wait_ms":1e30}
wait typo | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":"{S}","wait":5}
session_id missing | POST /v1/locks/free/acquire | 400 bad_request | {"wait_ms":0}
session_id a number | POST /v1/locks/free/acquire | 400 bad_request | {"session_id":5}
unknown session | POST /v1/locks/free/acquire | 404 session_not_found | {"session_id":"{U}","wait_ms":0}
malformed session id | POST /v1/locks/free/acquire | 404 session_not_found | {"session_id":"xyz","wait_ms":0}
unknown session beats bad name | POST /v1/locks/a%20b/acquire | 404 session_not_found | {"session_id":"{U}","wait_ms":0}
unknown session beats bad wait | POST /v1/locks/free/acquire | 404 session_not_found | {"session_id":"{U}","wait_ms":999999999}
try-lock on a held lock | POST /v1/locks/held/acquire | 409 lock_held | {"session_id":"{S}","wait_ms":0}
release someone else's lock | POST /v1/locks/held/release | 403 not_owner | {"session_id":"{S}"}
release a lock nobody holds | POST /v1/locks/free/release | 404 not_found | {"session_id":"{S}"}
release, unknown session | POST /v1/locks/held/release | 404 session_not_found | {"session_id":"{U}"}
release, unknown session, bad name | POST /v1/locks/a%20b/release | 404 session_not_found | {"session_id":"{U}"}
release, bad name | POST /v1/locks/a%20b/release | 400 bad_request | {"session_id":"{S}"}
release, extra field | POST /v1/locks/held/release | 400 bad_request | {"session_id":"{S}","force":true}
unknown lock action | POST /v1/locks/held/frobnicate | 405 method_not_allowed | {"session_id":"{S}"}
lock list, wrong method | DELETE /v1/locks | 405 method_not_allowed | -
lock, wrong method | PUT /v1/locks/held | 405 method_not_allowed | {"session_id":"{S}"}
unknown query parameter | GET /v1/locks?prefx=a | 400 bad_request | -
bad consistency | GET /v1/locks?consistency=maybe | 400 bad_request | -
fencing, bad name | POST /v1/fencing/check | 400 bad_request | {"lock":"a b","fencing_token":1}
fencing, token a string | POST /v1/fencing/check | 400 bad_request | {"lock":"held","fencing_token":"1"}
fencing, negative token | POST /v1/fencing/check | 400 bad_request | {"lock":"held","fencing_token":-1}
fencing, missing lock | POST /v1/fencing/check | 400 bad_request | {"fencing_token":1}
fencing, wrong method | GET /v1/fencing/check | 405 method_not_allowed | -
proclaim by a non-leader | POST /v1/elections/e/proclaim | 409 not_leader | {"session_id":"{S}","value":"x"}
proclaim, unknown session | POST /v1/elections/e/proclaim | 404 session_not_found | {"session_id":"{U}","value":"x"}
proclaim value too large | POST /v1/elections/e/proclaim | 413 too_large | {"session_id":"{H}","value":"{X600K}"}
too large, unknown session | POST /v1/elections/e/proclaim | 404 session_not_found | {"session_id":"{U}","value":"{X600K}"}
campaign without value | POST /v1/elections/e/campaign | 400 bad_request | {"session_id":"{S}","wait_ms":0}
campaign try, led election | POST /v1/elections/e/campaign | 409 lock_held | {"session_id":"{S}","value":"s","wait_ms":0}
resign without a candidacy | POST /v1/elections/e/resign | 403 not_owner | {"session_id":"{S}"}
unknown election action | POST /v1/elections/e/abdicate | 405 method_not_allowed | {"session_id":"{S}"}
inspect bad election name | GET /v1/elections/e%20x | 400 bad_request | -
observe bad election name | GET /v1/elections/e%20x/observe | 400 bad_request | -
invalid base64 | PUT /v1/nodes/app/x | 400 bad_request | {"data":"!!!"}
data missing | PUT /v1/nodes/app/x | 400 bad_request | {}
reserved /locks | PUT /v1/nodes/locks/x | 400 bad_request | {"data":""}
reserved /elections | PUT /v1/nodes/elections | 400 bad_request | {"data":""}
data over the limit | PUT /v1/nodes/app/big | 413 too_large | {"data":"{B64_600K}"}
version mismatch | PUT /v1/nodes/cfg | 409 version_mismatch | {"data":"","expected_version":5}
expected version, missing node | PUT /v1/nodes/app/none | 404 not_found | {"data":"","expected_version":5}
ephemeral, unknown session | PUT /v1/nodes/app/e | 404 session_not_found | {"data":"","session_id":"{U}"}
unknown session beats reserved | PUT /v1/nodes/locks/x | 404 session_not_found | {"data":"","session_id":"{U}"}
sequential with expected_version | PUT /v1/nodes/app/q | 400 bad_request | {"data":"","sequential":true,"expected_version":0}
bad node path (a control character) | PUT /v1/nodes/a%01b | 400 bad_request | {"data":""}
trailing slash | PUT /v1/nodes/app/ | 400 bad_request | {"data":""}
child of an ephemeral node | PUT /v1/nodes/eph/child | 409 ephemeral_parent | {"data":""}
get missing node | GET /v1/nodes/app/none | 404 not_found | -
children of a missing node | GET /v1/nodes/app/none?children=true | 404 not_found | -
children=maybe | GET /v1/nodes/cfg?children=maybe | 400 bad_request | -
consistency=weird | GET /v1/nodes/cfg?consistency=weird | 400 bad_request | -
delete, version not a number | DELETE /v1/nodes/cfg?expected_version=abc | 400 bad_request | -
delete, version mismatch | DELETE /v1/nodes/cfg?expected_version=7 | 409 version_mismatch | -
delete a missing node | DELETE /v1/nodes/app/none | 404 not_found | -
delete a node with children | DELETE /v1/nodes/app | 409 not_empty | -
delete under /locks | DELETE /v1/nodes/locks/held | 400 bad_request | -
delete the root | DELETE /v1/nodes | 405 method_not_allowed | -
put the root | PUT /v1/nodes | 405 method_not_allowed | {"data":""}
unknown route | GET /v2/anything | 404 not_found | -
root | GET / | 404 not_found | -
cluster, wrong method | POST /v1/cluster | 405 method_not_allowed | -
metrics, wrong method | POST /metrics | 405 method_not_allowed | -
"#;

struct Row {
    what: String,
    method: Method,
    path: String,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
    status: u16,
    code: String,
}

/// Replaces the table's placeholders.
fn expand(text: &str, s: &str, h: &str) -> String {
    const UNKNOWN: &str = "00000000000000000000000000000001";
    text.replace("{S}", s)
        .replace("{H}", h)
        .replace("{U}", UNKNOWN)
        .replace("{NAME257}", &"x".repeat(257))
        .replace("{OWNER300}", &"o".repeat(300))
        // Over the 1 MiB body limit.
        .replace("{X1100K}", &"x".repeat(1_100_000))
        // Under the body limit, over the 512 KiB data limit.
        .replace("{X600K}", &"v".repeat(600 * 1024))
        .replace("{B64_600K}", &"A".repeat(600 * 1024 / 3 * 4))
}

fn rows(s: &str, h: &str) -> Vec<Row> {
    let field = |line: &str, f: Option<&str>| -> String {
        f.unwrap_or_else(|| panic!("table line {line:?} lacks a field"))
            .trim()
            .to_string()
    };
    TABLE
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.splitn(4, " | ");
            let what = field(line, fields.next());
            let request = field(line, fields.next());
            let expected = field(line, fields.next());
            let body = field(line, fields.next());
            let (method, path) = request.split_once(' ').expect("METHOD path");
            let (method, content_type) = match method.split_once('[') {
                Some((m, ct)) => (m, Some(ct.trim_end_matches(']').to_string())),
                None => (method, None),
            };
            let body = match body.as_str() {
                "-" => None,
                "<empty>" => Some(Vec::new()),
                b => Some(expand(b, s, h).into_bytes()),
            };
            let content_type = match content_type.as_deref() {
                Some("none") => None,
                Some(ct) => Some(ct.to_string()),
                None => body.as_ref().map(|_| "application/json".to_string()),
            };
            let (status, code) = expected.split_once(' ').expect("status code");
            Row {
                what,
                method: method.parse().expect("method"),
                path: expand(path, s, h),
                content_type,
                body,
                status: status.parse().expect("status"),
                code: code.to_string(),
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_json_and_changes_nothing() {
    let cluster = TestCluster::start().await;
    // Some state for the rows to bump into.
    let s = cluster.open_session(0, "s").await;
    let h = cluster.open_session(1, "h").await;
    cluster.acquire(1, "held", &h, 0).await.expect(200, "hold");
    cluster
        .post(
            2,
            "/v1/elections/e/campaign",
            json!({"session_id": h, "value": "h"}),
        )
        .await
        .expect(200, "lead");
    for (path, body) in [
        ("/v1/nodes/cfg", json!({"data": "YQ=="})),
        ("/v1/nodes/app/child", json!({"data": ""})),
        ("/v1/nodes/eph", json!({"data": "", "session_id": h})),
    ] {
        cluster
            .call(0, Method::PUT, path, Some(body))
            .await
            .expect(201, path);
    }
    let before = cluster.state().await;

    let rows = rows(&s, &h);
    assert!(rows.len() > 90, "the whole table parsed");
    for (i, row) in rows.into_iter().enumerate() {
        let reply = cluster
            .raw_call(
                i % 3,
                row.method.clone(),
                &row.path,
                row.content_type.as_deref(),
                row.body,
            )
            .await;
        reply.expect_error(row.status, &row.code, &row.what);
        if row.status == 405 {
            assert!(
                reply.headers.contains_key("allow"),
                "{}: Allow header",
                row.what
            );
        }
        assert!(
            cluster.state().await == before,
            "{} changed the state",
            row.what
        );
    }

    // Paths reqwest would normalize, sent verbatim.
    for (what, path) in [
        ("raw .. component", "/v1/locks/../acquire"),
        ("raw %2e%2e component", "/v1/locks/%2e%2e/acquire"),
        ("raw . component", "/v1/locks/a/./acquire"),
    ] {
        let body = format!(r#"{{"session_id":"{s}","wait_ms":0}}"#);
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (status, reply) = raw_http(&cluster.urls[0], &request).await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (400, Some("bad_request")),
            "{what}: {reply}"
        );
        assert!(cluster.state().await == before, "{what} changed the state");
    }

    // Nothing crashed: every node still answers and is healthy (a
    // follower may briefly answer `not_caught_up` on a loaded machine; a
    // crashed one never turns healthy).
    for i in 0..3 {
        let cluster = &cluster;
        eventually("healthy after bad input", move || async move {
            cluster.get(i, "/v1/health").await.status == reqwest::StatusCode::OK
        })
        .await;
    }
    cluster.shutdown().await;
}
