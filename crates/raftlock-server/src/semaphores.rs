//! `/v1/semaphores`: counting semaphores (docs/api.md, "Semaphores").
//!
//! Routed like `/v1/locks` (`locks.rs`). The first acquire fixes the
//! number of permits while anyone is queued; an acquire that names
//! another number is refused (`409 limit_mismatch`). At most that many
//! sessions hold at once, in FIFO order.

use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use raftlock_core::SharedKind;
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

/// The semaphore operations, for the OpenAPI document.
#[derive(OpenApi)]
#[openapi(paths(list, inspect, acquire_semaphore, release_semaphore))]
pub(crate) struct Api;

/// The semaphore routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/semaphores", get(list))
        .route("/v1/semaphores/{*rest}", get(inspect).post(action))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SemaphoreAcquire)]
struct AcquireBody {
    session_id: String,
    /// How many may hold at once; must match the limit in force.
    permits: u64,
    /// How long to wait for the grant; `0` tries once.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreGranted)]
struct Granted {
    semaphore: String,
    permits: u64,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Semaphore)]
struct SemaphoreBody {
    semaphore: String,
    /// `null` while nobody is queued: the next acquire sets it.
    permits: Option<u64>,
    holders: Vec<SharedHolder>,
    waiters: Vec<SharedWaiter>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreLine)]
struct SemaphoreLine {
    semaphore: String,
    /// `null` while nobody is queued.
    permits: Option<u64>,
    holders: Vec<SharedHolder>,
    /// Entries waiting behind the holders.
    waiters: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreList)]
struct SemaphoreList {
    semaphores: Vec<SemaphoreLine>,
}

/// The semaphore's acquire and release (`queue_routes.rs`).
struct Semaphores;

impl QueueRoute for Semaphores {
    const QUEUE: Queue = Queue::Shared(SharedKind::Semaphore);
    type Acquire = AcquireBody;
    type Granted = Granted;

    fn asked(body: &AcquireBody) -> Asked<'_> {
        Asked {
            target: Target::Semaphore(body.permits),
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: None,
        }
    }

    fn granted(name: &str, body: &AcquireBody, grant: Grant) -> Granted {
        Granted {
            semaphore: name.to_string(),
            permits: body.permits,
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
    let request = (app, caller, rest, request);
    queue_routes::dispatch(request, acquire_semaphore, release_semaphore).await
}

/// Takes one of a semaphore's places, waiting in FIFO order.
#[utoipa::path(post, path = "/v1/semaphores/{name}/acquire", tag = "semaphores",
    params(("name" = String, Path, description = "Semaphore name; may contain `/`")),
    request_body = AcquireBody,
    responses((status = 200, description = "Granted", body = Granted)))]
async fn acquire_semaphore(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::acquire::<Semaphores>(app, caller, name, request).await
}

/// Releases the session's place in a semaphore, or cancels its wait.
#[utoipa::path(post, path = "/v1/semaphores/{name}/release", tag = "semaphores",
    params(("name" = String, Path, description = "Semaphore name; may contain `/`")),
    request_body = SessionBody,
    responses((status = 204, description = "Released")))]
async fn release_semaphore(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::release::<Semaphores>(app, caller, name, request).await
}

/// A semaphore's limit, holders and waiters.
#[utoipa::path(get, path = "/v1/semaphores/{name}", tag = "semaphores",
    params(("name" = String, Path, description = "Semaphore name; may contain `/`"), ReadQuery),
    responses((status = 200, description = "The semaphore", body = SemaphoreBody)))]
async fn inspect(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<SemaphoreBody>, ApiError> {
    let listing = shared_locks::inspect(
        &app,
        &caller,
        SharedKind::Semaphore,
        &name,
        query.consistency,
    )
    .await?;
    Ok(Json(SemaphoreBody {
        semaphore: name,
        permits: listing.limit,
        holders: listing.holders,
        waiters: listing.waiters,
    }))
}

/// The semaphores with holders or waiters, by name prefix.
#[utoipa::path(get, path = "/v1/semaphores", tag = "semaphores",
    params(ListQuery),
    responses((status = 200, description = "The semaphores", body = SemaphoreList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<SemaphoreList>, ApiError> {
    let lines = shared_locks::list(&app, &caller, SharedKind::Semaphore, &query).await?;
    Ok(Json(SemaphoreList {
        semaphores: lines
            .into_iter()
            .map(|line| SemaphoreLine {
                semaphore: line.name,
                permits: line.limit,
                holders: line.holders,
                waiters: line.waiters,
            })
            .collect(),
    }))
}
