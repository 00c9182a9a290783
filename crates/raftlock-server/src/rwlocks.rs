//! `/v1/rwlocks`: read-write locks (docs/api.md, "Read-write locks").
//!
//! Routed like `/v1/locks` (`locks.rs`): `POST {name}/acquire|release`,
//! `GET {name}`. Readers at the head of the queue share the lock, a writer
//! holds alone, and the queue is FIFO, so readers never starve a writer.

use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use raftlock_core::{RwMode, SharedKind};
use raftlock_node::Grant;
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::acquire::{Queue, Target};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, ReadQuery};
use crate::locks::SessionBody;
use crate::queue_routes::{self, Asked, QueueRoute};
use crate::shared_locks::{self, ListQuery, SharedHolder, SharedWaiter};
use crate::state::AppState;

/// The read-write lock operations, for the OpenAPI document.
#[derive(OpenApi)]
#[openapi(paths(list, inspect, acquire_rwlock, release_rwlock))]
pub(crate) struct Api;

/// The read-write lock routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/rwlocks", get(list))
        .route("/v1/rwlocks/{*rest}", get(inspect).post(action))
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Read,
    Write,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RwLockAcquire)]
struct AcquireBody {
    session_id: String,
    mode: Mode,
    /// How long to wait for the grant; `0` tries once.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockGranted)]
struct Granted {
    rwlock: String,
    mode: Mode,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLock)]
struct RwLockBody {
    rwlock: String,
    holders: Vec<SharedHolder>,
    waiters: Vec<SharedWaiter>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockLine)]
struct RwLockLine {
    rwlock: String,
    holders: Vec<SharedHolder>,
    /// Entries waiting behind the holders.
    waiters: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockList)]
struct RwLockList {
    rwlocks: Vec<RwLockLine>,
}

/// The read-write lock's acquire and release (`queue_routes.rs`).
struct RwLocks;

impl QueueRoute for RwLocks {
    const QUEUE: Queue = Queue::Shared(SharedKind::RwLock);
    type Acquire = AcquireBody;
    type Granted = Granted;

    fn asked(body: &AcquireBody) -> Asked<'_> {
        let mode = match body.mode {
            Mode::Read => RwMode::Read,
            Mode::Write => RwMode::Write,
        };
        Asked {
            target: Target::RwLock(mode),
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: None,
        }
    }

    fn granted(name: &str, body: &AcquireBody, grant: Grant) -> Granted {
        Granted {
            rwlock: name.to_string(),
            mode: body.mode,
            node: grant.node,
            fencing_token: grant.fencing_token,
            session_id: grant.session.to_string(),
            since_revision: grant.since_revision,
        }
    }
}

async fn action(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::dispatch((app, caller, rest, request), acquire_rwlock, release_rwlock).await
}

/// Takes a read-write lock to read (shared with the readers at the head
/// of the queue) or to write (alone), waiting in FIFO order.
#[utoipa::path(post, path = "/v1/rwlocks/{name}/acquire", tag = "rwlocks",
    params(("name" = String, Path, description = "Lock name; may contain `/`")),
    request_body = AcquireBody,
    responses((status = 200, description = "Granted", body = Granted)))]
async fn acquire_rwlock(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::acquire::<RwLocks>(app, caller, name, request).await
}

/// Releases a read-write lock, or cancels the session's wait for it.
#[utoipa::path(post, path = "/v1/rwlocks/{name}/release", tag = "rwlocks",
    params(("name" = String, Path, description = "Lock name; may contain `/`")),
    request_body = SessionBody,
    responses((status = 204, description = "Released")))]
async fn release_rwlock(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::release::<RwLocks>(app, caller, name, request).await
}

/// A read-write lock's holders and waiters, each in queue order.
#[utoipa::path(get, path = "/v1/rwlocks/{name}", tag = "rwlocks",
    params(("name" = String, Path, description = "Lock name; may contain `/`"), ReadQuery),
    responses((status = 200, description = "The read-write lock", body = RwLockBody)))]
async fn inspect(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<RwLockBody>, ApiError> {
    let listing =
        shared_locks::inspect(&app, &caller, SharedKind::RwLock, &name, query.consistency).await?;
    Ok(Json(RwLockBody {
        rwlock: name,
        holders: listing.holders,
        waiters: listing.waiters,
    }))
}

/// The read-write locks with holders or waiters, by name prefix.
#[utoipa::path(get, path = "/v1/rwlocks", tag = "rwlocks",
    params(ListQuery),
    responses((status = 200, description = "The read-write locks", body = RwLockList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<RwLockList>, ApiError> {
    let lines = shared_locks::list(&app, &caller, SharedKind::RwLock, &query).await?;
    Ok(Json(RwLockList {
        rwlocks: lines
            .into_iter()
            .map(|line| RwLockLine {
                rwlock: line.name,
                holders: line.holders,
                waiters: line.waiters,
            })
            .collect(),
    }))
}
