//! `/v1/nodes/{path}`: the generic tree, for recipes beyond locks.
//!
//! API path `/v1/nodes/a/b` is tree path `/a/b`; `GET /v1/nodes` is the
//! root. Writes are checked at the edge (valid path, not the root, not
//! under the lock recipe's `/locks` and `/elections`) so bad input never
//! costs a Raft entry; the state machine checks again.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use raftlock_core::path::{is_reserved, validate_node_path};
use raftlock_core::{Command, Response as CoreResponse};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::extract::{parse_session, ApiPath, ApiQuery, JsonBody, ReadConsistency};
use crate::state::AppState;

/// The node routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/nodes", get(get_root)).route(
        "/v1/nodes/{*path}",
        get(get_node).put(put_node).delete(delete_node),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutBody {
    /// Base64 (standard alphabet, padded).
    data: String,
    session_id: Option<String>,
    #[serde(default)]
    sequential: bool,
    expected_version: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetQuery {
    #[serde(default)]
    children: bool,
    #[serde(default)]
    consistency: ReadConsistency,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteQuery {
    expected_version: Option<u64>,
}

#[derive(Debug, Serialize)]
struct NodeBody {
    path: String,
    data: String,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<String>,
}

#[derive(Debug, Serialize)]
struct Children {
    children: Vec<String>,
}

fn tree_path(rest: &str) -> String {
    format!("/{rest}")
}

/// What the state machine would refuse for any write, checked up front.
fn check_writable(path: &str) -> Result<(), ApiError> {
    validate_node_path(path)?;
    if path == "/" {
        return Err(ApiError::bad_request("the root node cannot be written"));
    }
    if is_reserved(path) {
        return Err(ApiError::bad_request(format!(
            "{path} is inside a reserved prefix (/locks, /elections): use the lock and election API"
        )));
    }
    Ok(())
}

async fn put_node(
    State(app): State<AppState>,
    ApiPath(rest): ApiPath<String>,
    JsonBody(body): JsonBody<PutBody>,
) -> Result<Response, ApiError> {
    let path = tree_path(&rest);
    let session = body.session_id.as_deref().map(parse_session).transpose()?;
    let checked = check_writable(&path)
        .and_then(|()| {
            if body.sequential && body.expected_version.is_some() {
                return Err(ApiError::bad_request(
                    "expected_version cannot be combined with a sequential create",
                ));
            }
            BASE64
                .decode(&body.data)
                .map_err(|e| ApiError::bad_request(format!("data is not valid base64: {e}")))
        })
        .and_then(|data| app.check_data(data.len()).map(|()| data));
    let data = match session {
        Some(id) => app.session_wins(id, checked).await?,
        None => checked?,
    };
    let encoded = BASE64.encode(&data);
    let response = app
        .node
        .submit(Command::Put {
            path,
            data,
            session,
            sequential: body.sequential,
            expected_version: body.expected_version,
        })
        .await?;
    let CoreResponse::Put {
        path,
        created,
        version,
        create_revision,
        mod_revision,
        ephemeral_owner,
    } = response
    else {
        return Err(ApiError::from(raftlock_node::NodeError::Internal(format!(
            "unexpected response to a put: {response:?}"
        ))));
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let node = NodeBody {
        path,
        data: encoded,
        version,
        create_revision,
        mod_revision,
        ephemeral_owner: ephemeral_owner.map(|s| s.to_string()),
    };
    Ok((status, Json(node)).into_response())
}

async fn get_root(
    State(app): State<AppState>,
    ApiQuery(query): ApiQuery<GetQuery>,
) -> Result<Response, ApiError> {
    read_node(&app, "/".to_string(), query).await
}

async fn get_node(
    State(app): State<AppState>,
    ApiPath(rest): ApiPath<String>,
    ApiQuery(query): ApiQuery<GetQuery>,
) -> Result<Response, ApiError> {
    read_node(&app, tree_path(&rest), query).await
}

async fn read_node(app: &AppState, path: String, query: GetQuery) -> Result<Response, ApiError> {
    validate_node_path(&path)?;
    let consistency = query.consistency.into();
    let not_found = || ApiError::not_found(format!("node {path} does not exist"));
    if query.children {
        let children = app
            .node
            .read(consistency, |s| s.children(&path))
            .await?
            .ok_or_else(not_found)?;
        return Ok(Json(Children { children }).into_response());
    }
    let node = app
        .node
        .read(consistency, |s| s.node(&path).cloned())
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(NodeBody {
        data: BASE64.encode(&node.data),
        version: node.version,
        create_revision: node.create_revision,
        mod_revision: node.mod_revision,
        ephemeral_owner: node.ephemeral_owner.map(|s| s.to_string()),
        path,
    })
    .into_response())
}

async fn delete_node(
    State(app): State<AppState>,
    ApiPath(rest): ApiPath<String>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> Result<StatusCode, ApiError> {
    let path = tree_path(&rest);
    check_writable(&path)?;
    app.node
        .submit(Command::Delete {
            path,
            expected_version: query.expected_version,
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
