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
use raftlock_core::path::{is_reserved, sequential_request_path, validate_node_path};
use raftlock_core::{Command, Response as CoreResponse, SessionId};
use raftlock_node::Consistency;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{parse_session, ApiPath, ApiQuery, JsonBody, ReadConsistency};
use crate::state::AppState;

/// The node operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(get_root, get_node, put_node, delete_node))]
pub(crate) struct Api;

/// The node routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/nodes", get(get_root)).route(
        "/v1/nodes/{*path}",
        get(get_node).put(put_node).delete(delete_node),
    )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutBody {
    /// Base64 (standard alphabet, padded).
    data: String,
    session_id: Option<String>,
    #[serde(default)]
    sequential: bool,
    expected_version: Option<u64>,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct GetQuery {
    /// List the node's children instead of reading it.
    #[serde(default)]
    children: bool,
    #[serde(default)]
    consistency: ReadConsistency,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct DeleteQuery {
    /// Delete only at this version.
    expected_version: Option<u64>,
}

/// `ephemeral_owner` is `null` for another principal's session
/// (docs/security.md), as in lock listings.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Node)]
struct NodeBody {
    path: String,
    data: String,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
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
            "{path} is inside a reserved prefix (/locks, /elections, /rwlocks, /semaphores): \
             use the lock, election, read-write lock and semaphore API"
        )));
    }
    Ok(())
}

/// The ephemeral owner of the node at `path`, if `caller` may see its id.
fn owner_as_seen(
    s: &raftlock_core::StateMachine,
    path: &str,
    caller: &Caller,
) -> Option<SessionId> {
    let owner = s.node(path).and_then(|n| n.ephemeral_owner)?;
    let principal = s.session_principal(owner).flatten();
    caller
        .visibility(principal)
        .session_id(owner)
        .map(|_| owner)
}

/// `owner` if `caller` may see that session's id. A session's principal
/// never changes, so the local state answers unless this member has not
/// applied the session yet; only then does it take a linearizable read.
async fn visible_owner(app: &AppState, caller: &Caller, owner: SessionId) -> Option<SessionId> {
    let seen = |s: &raftlock_core::StateMachine| {
        s.session_principal(owner)
            .map(|principal| caller.visibility(principal).session_id(owner).is_some())
    };
    let known = match app.node.read(Consistency::Stale, seen).await {
        Ok(Some(visible)) => Some(visible),
        _ => app
            .node
            .read(Consistency::Linearizable, seen)
            .await
            .ok()
            .flatten(),
    };
    known.unwrap_or(false).then_some(owner)
}

/// Creates or updates a node (`201` created, `200` updated).
#[utoipa::path(put, path = "/v1/nodes/{path}", tag = "nodes",
    params(("path" = String, Path, description = "Node path without the leading `/`; may contain `/`")),
    request_body = PutBody,
    responses((status = 201, description = "Created", body = NodeBody),
        (status = 200, description = "Updated", body = NodeBody)))]
async fn put_node(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    JsonBody(body): JsonBody<PutBody>,
) -> Result<Response, ApiError> {
    let path = tree_path(&rest);
    let session = body.session_id.as_deref().map(parse_session).transpose()?;
    if let Some(session) = session {
        caller.require_session(&app, session).await?;
    }
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
    let path = if body.sequential {
        sequential_request_path(&path).to_string()
    } else {
        path
    };
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
    let ephemeral_owner = match ephemeral_owner {
        // An update of another session's node: show its id only to a caller allowed to see it.
        Some(owner) if !created && !caller.sees_every_session() => {
            visible_owner(&app, &caller, owner).await
        }
        owner => owner,
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

/// The root node, or (`?children=true`) the top level.
#[utoipa::path(get, path = "/v1/nodes", tag = "nodes",
    params(GetQuery),
    responses((status = 200, description = "The node, or its children", body = NodeBody),
        (status = 200, description = "With `children=true`", body = Children)))]
async fn get_root(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<GetQuery>,
) -> Result<Response, ApiError> {
    read_node(&app, &caller, "/".to_string(), query).await
}

/// A node, or (`?children=true`) its children's names.
#[utoipa::path(get, path = "/v1/nodes/{path}", tag = "nodes",
    params(("path" = String, Path, description = "Node path without the leading `/`; may contain `/`"), GetQuery),
    responses((status = 200, description = "The node, or its children", body = NodeBody),
        (status = 200, description = "With `children=true`", body = Children)))]
async fn get_node(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    ApiQuery(query): ApiQuery<GetQuery>,
) -> Result<Response, ApiError> {
    read_node(&app, &caller, tree_path(&rest), query).await
}

async fn read_node(
    app: &AppState,
    caller: &Caller,
    path: String,
    query: GetQuery,
) -> Result<Response, ApiError> {
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
    let (node, owner) = app
        .node
        .read(consistency, |s| {
            let owner = owner_as_seen(s, &path, caller);
            s.node(&path).cloned().map(|n| (n, owner))
        })
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(NodeBody {
        data: BASE64.encode(&node.data),
        version: node.version,
        create_revision: node.create_revision,
        mod_revision: node.mod_revision,
        ephemeral_owner: owner.map(|s| s.to_string()),
        path,
    })
    .into_response())
}

/// Deletes a node without children.
#[utoipa::path(delete, path = "/v1/nodes/{path}", tag = "nodes",
    params(("path" = String, Path, description = "Node path without the leading `/`; may contain `/`"), DeleteQuery),
    responses((status = 204, description = "Deleted")))]
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
