//! `/v1/sessions`: open, keep alive, inspect, close.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use raftlock_api::session::SessionView;
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadQuery};
use crate::state::AppState;

/// The session operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(open, keepalive, inspect, close))]
pub(crate) struct Api;

/// The session routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", post(open))
        .route("/v1/sessions/{id}", get(inspect).delete(close))
        .route("/v1/sessions/{id}/keepalive", post(keepalive))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenRequest {
    /// Time to live without a keepalive, within the cluster's bounds.
    ttl_ms: u64,
    /// Free label shown in listings; empty when absent.
    #[serde(default)]
    owner: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Opened {
    session_id: String,
    ttl_ms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
struct Ttl {
    ttl_ms: u64,
}

/// Opens a session.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions",
    request_body = OpenRequest,
    responses((status = 201, description = "Opened", body = Opened)))]
async fn open(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<OpenRequest>,
) -> Result<(StatusCode, Json<Opened>), ApiError> {
    let max_owner = app.config.max_owner_bytes;
    if req.owner.len() > max_owner {
        return Err(ApiError::bad_request(format!(
            "owner must be at most {max_owner} bytes"
        )));
    }
    crate::overload::limits::check_open(&app, &req.owner, caller.principal()).await?;
    // The node checks the TTL against the cluster's bounds (bad_request).
    let ttl = Duration::from_millis(req.ttl_ms);
    let opened = app
        .node
        .open_session_as(caller.principal(), &req.owner, ttl)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Opened {
            session_id: opened.id.to_string(),
            ttl_ms: opened.ttl_ms,
        }),
    ))
}

/// Renews a session's TTL.
#[utoipa::path(post, path = "/v1/sessions/{id}/keepalive", tag = "sessions",
    params(("id" = String, Path, description = "Session id (32 hex digits)")),
    responses((status = 200, description = "Renewed", body = Ttl)))]
async fn keepalive(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Ttl>, ApiError> {
    let id = caller.own_session(&app, &id).await?;
    let ttl = app.node.keepalive(id).await?;
    Ok(Json(Ttl {
        ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
    }))
}

/// A session and its nodes.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id (32 hex digits)"), ReadQuery),
    responses((status = 200, description = "The session", body = SessionView)))]
async fn inspect(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<SessionView>, ApiError> {
    let id = caller.own_session(&app, &id).await?;
    let session = app
        .node
        .session(id, query.consistency.into())
        .await?
        .ok_or(ApiError::session_not_found(id))?;
    Ok(Json(session))
}

/// Closes a session, releasing every lock and node it holds.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id (32 hex digits)")),
    responses((status = 204, description = "Closed")))]
async fn close(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = caller.own_session(&app, &id).await?;
    app.node.close_session(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
