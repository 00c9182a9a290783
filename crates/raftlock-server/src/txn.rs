//! `POST /v1/txn`: compares on nodes and lock holders, then one branch of
//! node writes, applied atomically in one log entry (core `txn.rs`;
//! docs/api.md, Transactions).
//!
//! Everything the state machine would refuse whichever branch runs (bad
//! paths, reserved prefixes, bad base64, data over the limit, another
//! principal's session) is refused here first, so bad input never costs a
//! Raft entry.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use raftlock_core::path::{sequential_request_path, validate_node_path};
use raftlock_core::{Compare, TxnOp};
use raftlock_node::TxnAnswer as NodeTxnAnswer;
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::{Caller, Permission};
use crate::error::ApiError;
use crate::extract::{parse_session, JsonBody};
use crate::nodes::{check_writable, IfHolder};
use crate::state::AppState;

/// At most this many compares, and as many operations per branch: a
/// transaction is one log entry that every member applies in one go.
pub(crate) const MAX_TXN_ITEMS: usize = 128;

/// The transaction operation in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(txn))]
pub(crate) struct Api;

/// The transaction route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/txn", post(txn))
}

/// The request body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TxnBody {
    #[serde(default)]
    compare: Vec<CompareBody>,
    #[serde(default)]
    success: Vec<OpBody>,
    #[serde(default)]
    failure: Vec<OpBody>,
}

/// One compare: which fields are present says which kind it is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
enum CompareBody {
    Version(VersionCompare),
    Value(ValueCompare),
    Holder(IfHolder),
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct VersionCompare {
    path: String,
    version: u64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ValueCompare {
    path: String,
    /// Base64, as node data.
    value: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum OpBody {
    Put(PutOp),
    Delete(DeleteOp),
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PutOp {
    path: String,
    data: String,
    session_id: Option<String>,
    #[serde(default)]
    sequential: bool,
    expected_version: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct DeleteOp {
    path: String,
    expected_version: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
struct TxnAnswer {
    succeeded: bool,
    responses: Vec<OpAnswer>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum OpAnswer {
    Put {
        path: String,
        created: bool,
        version: u64,
        create_revision: u64,
        mod_revision: u64,
    },
    Delete {
        path: String,
    },
}

/// A body path (`config/db` as in the URL, or the tree path `/config/db`)
/// as a tree path.
fn tree_path(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

/// The name auth grants cover: the tree path without its leading `/`, as
/// in `/v1/nodes/{name}`.
fn grant_name(path: &str) -> &str {
    path.strip_prefix('/').unwrap_or(path)
}

fn too_many(what: &str, n: usize) -> Result<(), ApiError> {
    if n > MAX_TXN_ITEMS {
        return Err(ApiError::bad_request(format!(
            "{n} {what}; a transaction takes at most {MAX_TXN_ITEMS}"
        )));
    }
    Ok(())
}

fn compare(body: CompareBody, caller: &Caller) -> Result<Compare, ApiError> {
    Ok(match body {
        CompareBody::Version(VersionCompare { path, version }) => {
            let path = tree_path(&path);
            validate_node_path(&path)?;
            caller.require(Permission::Read, grant_name(&path))?;
            Compare::Version { path, version }
        }
        CompareBody::Value(ValueCompare { path, value }) => {
            let path = tree_path(&path);
            validate_node_path(&path)?;
            caller.require(Permission::Read, grant_name(&path))?;
            let value = BASE64
                .decode(value)
                .map_err(|e| ApiError::bad_request(format!("value is not valid base64: {e}")))?;
            Compare::Value { path, value }
        }
        CompareBody::Holder(holder) => Compare::Holder(holder.guard(caller)?),
    })
}

async fn op(app: &AppState, body: OpBody, caller: &Caller) -> Result<TxnOp, ApiError> {
    Ok(match body {
        OpBody::Put(put) => {
            let path = tree_path(&put.path);
            check_writable(&path)?;
            caller.require(Permission::Write, grant_name(&path))?;
            if put.sequential && put.expected_version.is_some() {
                return Err(ApiError::bad_request(
                    "expected_version cannot be combined with a sequential create",
                ));
            }
            let data = BASE64
                .decode(&put.data)
                .map_err(|e| ApiError::bad_request(format!("data is not valid base64: {e}")))?;
            app.check_data(data.len())?;
            let session = put.session_id.as_deref().map(parse_session).transpose()?;
            if let Some(session) = session {
                caller.require_session(app, session).await?;
            }
            let path = if put.sequential {
                sequential_request_path(&path).to_string()
            } else {
                path
            };
            TxnOp::Put {
                path,
                data,
                session,
                sequential: put.sequential,
                expected_version: put.expected_version,
            }
        }
        OpBody::Delete(delete) => {
            let path = tree_path(&delete.path);
            check_writable(&path)?;
            caller.require(Permission::Write, grant_name(&path))?;
            TxnOp::Delete {
                path,
                expected_version: delete.expected_version,
            }
        }
    })
}

async fn ops(app: &AppState, bodies: Vec<OpBody>, caller: &Caller) -> Result<Vec<TxnOp>, ApiError> {
    let mut ops = Vec::with_capacity(bodies.len());
    for body in bodies {
        ops.push(op(app, body, caller).await?);
    }
    Ok(ops)
}

/// Compares, then the `success` or the `failure` writes, in one log entry.
#[utoipa::path(post, path = "/v1/txn", tag = "nodes",
    request_body = TxnBody,
    responses((status = 200, description = "The branch that ran and its results", body = TxnAnswer)))]
async fn txn(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<TxnBody>,
) -> Result<Json<TxnAnswer>, ApiError> {
    too_many("compares", body.compare.len())?;
    too_many("success operations", body.success.len())?;
    too_many("failure operations", body.failure.len())?;
    let compare = body
        .compare
        .into_iter()
        .map(|c| compare(c, &caller))
        .collect::<Result<Vec<_>, _>>()?;
    let success = ops(&app, body.success, &caller).await?;
    let failure = ops(&app, body.failure, &caller).await?;
    let outcome = app.node.txn(compare, success, failure).await?;
    let responses = outcome
        .answers
        .into_iter()
        .map(|a| match a {
            NodeTxnAnswer::Put(w) => OpAnswer::Put {
                path: w.path,
                created: w.created,
                version: w.version,
                create_revision: w.create_revision,
                mod_revision: w.mod_revision,
            },
            NodeTxnAnswer::Deleted(path) => OpAnswer::Delete { path },
        })
        .collect();
    Ok(Json(TxnAnswer {
        succeeded: outcome.succeeded,
        responses,
    }))
}
