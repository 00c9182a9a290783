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
use raftlock_core::path::{
    is_reserved, sequential_request_path, validate_lock_name, validate_node_path,
};
use raftlock_core::{HolderGuard, SessionId};
use raftlock_node::{AtRevision, Consistency};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::auth::{Caller, Permission};
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
    /// Commit only while this fencing token holds this lock, checked in
    /// the same log entry as the write (core `txn.rs`).
    if_holder: Option<IfHolder>,
}

/// A lock and the fencing token that must still be its holder's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IfHolder {
    pub lock: String,
    pub fencing_token: u64,
}

impl IfHolder {
    /// The guard, once the caller may read the lock and its name is valid.
    pub fn guard(self, caller: &Caller) -> Result<HolderGuard, ApiError> {
        // Whether the token holds says as much as `/v1/fencing/check`.
        caller.require(Permission::Read, &self.lock)?;
        validate_lock_name(&self.lock)?;
        Ok(HolderGuard {
            lock: self.lock,
            fencing_token: self.fencing_token,
        })
    }
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
    /// Stream changes of the node and its children (Server-Sent Events).
    #[serde(default)]
    watch: bool,
    /// With `watch`: send the changes after this revision (default: now).
    since_revision: Option<u64>,
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

pub(crate) fn tree_path(rest: &str) -> String {
    format!("/{rest}")
}

/// What the state machine would refuse for any write, checked up front.
pub(crate) fn check_writable(path: &str) -> Result<(), ApiError> {
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

/// The node's ephemeral owner, if `caller` may see its id.
fn owner_as_seen(node: &raftlock_node::NodeView, caller: &Caller) -> Option<SessionId> {
    let owner = node.ephemeral_owner?;
    caller
        .visibility(node.owner_principal.as_deref())
        .session_id(owner)
        .map(|_| owner)
}

/// `owner` if `caller` may see that session's id. A session's principal
/// never changes, so the local state answers unless this member has not
/// applied the session yet; only then does it take a linearizable read.
async fn visible_owner(app: &AppState, caller: &Caller, owner: SessionId) -> Option<SessionId> {
    let known = match app.node.session_principal(owner, Consistency::Stale).await {
        Ok(Some(principal)) => Some(principal),
        _ => app
            .node
            .session_principal(owner, Consistency::Linearizable)
            .await
            .ok()
            .flatten(),
    };
    let principal = known?;
    caller
        .visibility(principal.as_deref())
        .session_id(owner)
        .map(|_| owner)
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
    let guard = body.if_holder.map(|g| g.guard(&caller)).transpose()?;
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
    let raftlock_node::Written {
        path,
        created,
        version,
        create_revision,
        mod_revision,
        ephemeral_owner,
    } = app
        .node
        .put_node(raftlock_node::PutNode {
            path,
            data,
            session,
            sequential: body.sequential,
            expected_version: body.expected_version,
            guard,
        })
        .await?;
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
    if query.watch {
        return crate::node_watch::watch(app.clone(), caller.clone(), path, query.since_revision)
            .await;
    }
    let consistency = query.consistency.into();
    let not_found = || ApiError::not_found(format!("node {path} does not exist"));
    if query.children {
        let AtRevision {
            value: children,
            revision,
        } = app.node.get_children(&path, consistency).await?;
        let children = children.ok_or_else(not_found)?;
        return Ok(with_revision(
            Json(Children { children }).into_response(),
            revision,
        ));
    }
    let AtRevision {
        value: node,
        revision,
    } = app.node.get_node(&path, consistency).await?;
    let node = node.ok_or_else(not_found)?;
    let body = Json(NodeBody {
        data: BASE64.encode(&node.data),
        version: node.version,
        create_revision: node.create_revision,
        mod_revision: node.mod_revision,
        ephemeral_owner: owner_as_seen(&node, caller).map(|s| s.to_string()),
        path,
    });
    Ok(with_revision(body.into_response(), revision))
}

/// The header that gives a read's revision: a watch started with
/// `since_revision` set to it misses no later change.
pub(crate) const REVISION_HEADER: &str = "raftlock-revision";

fn with_revision(mut response: Response, revision: u64) -> Response {
    response
        .headers_mut()
        .insert(REVISION_HEADER, axum::http::HeaderValue::from(revision));
    response
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
    app.node.delete_node(&path, query.expected_version).await?;
    Ok(StatusCode::NO_CONTENT)
}
