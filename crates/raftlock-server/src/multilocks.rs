//! `/v1/multilocks`: several locks taken atomically (docs/api.md,
//! "Multi-locks").
//!
//! The locks are the mutexes of `/v1/locks`. The set is queued as one
//! entry (one node per lock, all at the same revision), so two sets that
//! overlap, named in any order, cannot deadlock; it holds every lock or
//! none, and is released together. The caller needs `lock` on every name.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use raftlock_core::validate_lock_set;
use raftlock_node::AcquireOptions;
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::acquire::long_poll;
use crate::auth::{Caller, Permission};
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::state::AppState;

/// The multi-lock operations, for the OpenAPI document.
#[derive(OpenApi)]
#[openapi(paths(acquire, release))]
pub(crate) struct Api;

/// The multi-lock routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/multilocks/acquire", post(acquire))
        .route("/v1/multilocks/release", post(release))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MultiLockAcquire)]
struct AcquireBody {
    session_id: String,
    locks: Vec<String>,
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MultiLockRelease)]
struct ReleaseBody {
    session_id: String,
    locks: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MultiLockGrant)]
struct LockGrant {
    lock: String,
    node: String,
    fencing_token: u64,
    since_revision: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MultiLockGranted)]
struct Granted {
    session_id: String,
    locks: Vec<LockGrant>,
}

/// The caller may take every lock of the set (the policy layer cannot
/// see names inside the body).
fn require_all(caller: &Caller, locks: &[String]) -> Result<(), ApiError> {
    locks
        .iter()
        .try_for_each(|name| caller.require(Permission::Lock, name))
}

/// Takes every named lock or none; the set waits in line as one entry.
#[utoipa::path(post, path = "/v1/multilocks/acquire", tag = "multilocks",
    request_body = AcquireBody,
    responses((status = 200, description = "Every lock granted", body = Granted)))]
async fn acquire(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<AcquireBody>,
) -> Result<Response, ApiError> {
    require_all(&caller, &body.locks)?;
    let session = caller.own_session(&app, &body.session_id).await?;
    let checked = validate_lock_set(&body.locks)
        .map_err(ApiError::from)
        .and_then(|()| app.wait(body.wait_ms));
    let wait = app.session_wins(session, checked).await?;
    let options = AcquireOptions {
        wait,
        keep_queued: body.keep_queued,
    };
    let grant = long_poll(
        &app,
        body.keep_queued,
        app.node.acquire_multi(&body.locks, session, options),
    )
    .await?;
    Ok(Json(Granted {
        session_id: session.to_string(),
        locks: grant
            .locks
            .into_iter()
            .map(|(lock, g)| LockGrant {
                lock,
                node: g.node,
                fencing_token: g.fencing_token,
                since_revision: g.since_revision,
            })
            .collect(),
    })
    .into_response())
}

/// Releases the session's nodes in every named lock, together.
#[utoipa::path(post, path = "/v1/multilocks/release", tag = "multilocks",
    request_body = ReleaseBody,
    responses((status = 204, description = "Released")))]
async fn release(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Result<Response, ApiError> {
    require_all(&caller, &body.locks)?;
    let session = caller.own_session(&app, &body.session_id).await?;
    app.session_wins(
        session,
        validate_lock_set(&body.locks).map_err(ApiError::from),
    )
    .await?;
    app.node.release_multi(&body.locks, session).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
