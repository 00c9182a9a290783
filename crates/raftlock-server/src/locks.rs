//! `/v1/locks` and `/v1/fencing/check`.
//!
//! Lock names contain `/`, so `/v1/locks/{*rest}` is one wildcard route:
//! `POST` takes the last component as the action (`acquire`, `release`)
//! and the rest as the name; `GET` takes the whole rest as the name. A
//! lock named `a/acquire` is thus inspected at `GET /v1/locks/a/acquire`
//! and acquired at `POST /v1/locks/a/acquire/acquire`.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use raftlock_api::lock::{FencingAnswer, FencingBody, LockBody, LockList};
use raftlock_node::Grant;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::auth::{Caller, Permission};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadConsistency, ReadQuery};
use crate::queue_routes::{self, Asked, QueueRoute};
use crate::redact::Redact;
use crate::state::AppState;

/// The lock operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(list, inspect, acquire_lock, release_lock, fencing_check))]
pub(crate) struct Api;

/// The lock routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/locks", get(list))
        .route("/v1/locks/{*rest}", get(inspect).post(action))
        .route("/v1/fencing/check", post(fencing_check))
}

/// Splits `name/action` at the last `/`; a bare action has an empty name.
pub(crate) fn split_action(rest: &str) -> (&str, &str) {
    rest.rsplit_once('/').unwrap_or(("", rest))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    session_id: String,
    /// How long to wait for the grant; `0` is a try-lock.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
    /// Lock-delay: after a holder's session expires or is closed, nobody
    /// is granted the lock for this long (a release skips it). The
    /// acquire that creates the lock's queue fixes it (0 to 60000);
    /// another value is refused while anyone is queued.
    #[schema(maximum = 60000)]
    lock_delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SessionRef)]
pub(crate) struct SessionBody {
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Granted {
    lock: String,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only locks whose name starts with this.
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    consistency: ReadConsistency,
}

/// The lock queue's acquire and release (`queue_routes.rs`).
struct Locks;

impl QueueRoute for Locks {
    const KIND: raftlock_api::QueueKind = raftlock_api::QueueKind::Lock;
    type Acquire = AcquireBody;
    type Granted = Granted;

    fn asked(body: &AcquireBody) -> Asked<'_> {
        Asked {
            mode: raftlock_api::Mode::Exclusive,
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: body.lock_delay_ms,
        }
    }

    fn granted(name: &str, _: &AcquireBody, grant: Grant) -> Granted {
        Granted {
            lock: name.to_string(),
            node: grant.node,
            fencing_token: grant.fencing_token,
            session_id: grant.session.to_string(),
            since_revision: grant.since_revision,
        }
    }
}

queue_routes::queue_actions! {
    Locks, tag "locks", name "Lock name; may contain `/`";
    /// Acquires a lock: granted at once, after waiting in line up to
    /// `wait_ms`, or refused (`lock_held` for a try-lock, `timeout`).
    post "/v1/locks/{name}/acquire" => acquire_lock(AcquireBody) -> Granted;
    /// Releases a lock, or cancels the session's wait for it.
    post "/v1/locks/{name}/release" => release_lock;
}

/// A lock's holder and its waiters in queue order.
#[utoipa::path(get, path = "/v1/locks/{name}", tag = "locks",
    params(("name" = String, Path, description = "Lock name; may contain `/`"), ReadQuery),
    responses((status = 200, description = "The lock", body = LockBody)))]
async fn inspect(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<LockBody>, ApiError> {
    let lock = app.node.lock(&name, query.consistency.into()).await?;
    Ok(Json(lock.redact(&caller)))
}

/// The locks with a holder or waiters, by name prefix.
#[utoipa::path(get, path = "/v1/locks", tag = "locks",
    params(ListQuery),
    responses((status = 200, description = "The locks", body = LockList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<LockList>, ApiError> {
    // The delays are read with the queues: one consistent view.
    let locks = app
        .node
        .locks(&query.prefix, query.consistency.into(), caller.reads())
        .await?;
    Ok(Json(LockList {
        locks: locks.redact(&caller),
    }))
}

/// Is this fencing token still the lock's current one?
#[utoipa::path(post, path = "/v1/fencing/check", tag = "locks",
    request_body = FencingBody,
    responses((status = 200, description = "The answer", body = FencingAnswer)))]
async fn fencing_check(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<FencingBody>,
) -> Result<Json<FencingAnswer>, ApiError> {
    caller.require(Permission::Read, &body.lock)?;
    Ok(Json(
        app.node
            .check_fencing(&body.lock, body.fencing_token)
            .await?,
    ))
}
