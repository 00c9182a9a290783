//! Nodes and transactions on the control endpoint, the subset of the
//! public API (docs/api.md, "Nodes", "Transactions") that the multilock
//! workload uses:
//!
//! - `GET /v1/nodes/{path}` → `200 {"path", "data", "version", …}` (data
//!   in base64; linearizable), `404 not_found`
//! - `PUT /v1/nodes/{path}` `{"data", "expected_version"?}` → `200`
//! - `POST /v1/txn` `{"compare": [{"lock", "fencing_token"}…], "success":
//!   [{"put": {"path", "data"}}…], "failure": [...]}` → `200 {"succeeded"}`

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use raftlock_client::{Compare, EmbeddedClient, HolderGuard, LockClient, Txn, TxnOp};
use serde::Deserialize;
use serde_json::json;

use super::{bad_request, error};

#[derive(Deserialize)]
pub(super) struct PutBody {
    data: String,
    #[serde(default)]
    expected_version: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct TxnBody {
    #[serde(default)]
    compare: Vec<HolderCompare>,
    #[serde(default)]
    success: Vec<OpBody>,
    #[serde(default)]
    failure: Vec<OpBody>,
}

/// The one kind of compare the workloads send: a lock's holder.
#[derive(Deserialize)]
struct HolderCompare {
    lock: String,
    fencing_token: u64,
}

/// The one kind of operation the workloads send: a put.
#[derive(Deserialize)]
struct OpBody {
    put: PutOp,
}

#[derive(Deserialize)]
struct PutOp {
    path: String,
    data: String,
}

pub(super) async fn read(
    State(client): State<EmbeddedClient>,
    Path(path): Path<String>,
) -> Response {
    let path = canonical(&path);
    match client.read_node(&path).await {
        Ok((node, _revision)) => Json(json!({
            "path": path,
            "data": base64::engine::general_purpose::STANDARD.encode(&node.data),
            "version": node.version,
            "create_revision": node.create_revision,
            "mod_revision": node.mod_revision,
        }))
        .into_response(),
        Err(e) => error(&e),
    }
}

pub(super) async fn put(
    State(client): State<EmbeddedClient>,
    Path(path): Path<String>,
    Json(body): Json<PutBody>,
) -> Response {
    let path = canonical(&path);
    let op = match put_op(path.clone(), &body.data, body.expected_version) {
        Ok(op) => op,
        Err(e) => return bad_request(e),
    };
    let txn = Txn {
        compare: Vec::new(),
        success: vec![op],
        failure: Vec::new(),
    };
    match client.txn(&txn).await {
        Ok(_) => Json(json!({ "path": path })).into_response(),
        Err(e) => error(&e),
    }
}

pub(super) async fn txn(
    State(client): State<EmbeddedClient>,
    Json(body): Json<TxnBody>,
) -> Response {
    let ops = |ops: Vec<OpBody>| -> Result<Vec<TxnOp>, String> {
        ops.into_iter()
            .map(|o| put_op(canonical(&o.put.path), &o.put.data, None))
            .collect()
    };
    let (success, failure) = match (ops(body.success), ops(body.failure)) {
        (Ok(s), Ok(f)) => (s, f),
        (Err(e), _) | (_, Err(e)) => return bad_request(e),
    };
    let txn = Txn {
        compare: body
            .compare
            .into_iter()
            .map(|c| {
                Compare::Holder(HolderGuard {
                    lock: c.lock,
                    fencing_token: c.fencing_token,
                })
            })
            .collect(),
        success,
        failure,
    };
    match client.txn(&txn).await {
        Ok(outcome) => Json(json!({ "succeeded": outcome.succeeded })).into_response(),
        Err(e) => error(&e),
    }
}

/// A put of base64 `data` at `path`, or why the data is not base64.
fn put_op(path: String, data: &str, expected_version: Option<u64>) -> Result<TxnOp, String> {
    let data = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("data is not base64: {e}"))?;
    Ok(TxnOp::Put {
        path,
        data,
        session: None,
        sequential: false,
        expected_version,
    })
}

/// The API takes node paths with or without the leading `/`.
fn canonical(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}
