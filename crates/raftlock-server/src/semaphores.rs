//! `/v1/semaphores`: counting semaphores (docs/api.md, "Semaphores").
//!
//! Routed like `/v1/locks` (`locks.rs`). The first acquire fixes the
//! number of permits while anyone is queued; an acquire that names
//! another number is refused (`409 limit_mismatch`). At most that many
//! sessions hold at once, in FIFO order.

use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use raftlock_core::SharedKind;
use raftlock_node::AcquireOptions;
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{no_such_action, ApiError};
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadQuery};
use crate::locks::{split_action, SessionBody};
use crate::shared_locks::{self, SharedGrant, SharedHolder, SharedWaiter};
use crate::state::AppState;

/// The semaphore routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/semaphores/{*rest}", get(inspect).post(action))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    session_id: String,
    permits: u64,
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize)]
struct Granted {
    semaphore: String,
    permits: u64,
    #[serde(flatten)]
    grant: SharedGrant,
}

#[derive(Debug, Serialize)]
struct SemaphoreBody {
    semaphore: String,
    /// `null` while nobody is queued: the next acquire sets it.
    permits: Option<u64>,
    holders: Vec<SharedHolder>,
    waiters: Vec<SharedWaiter>,
}

async fn action(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (name, action) = split_action(&rest);
    match action {
        "acquire" => {
            let JsonBody(body) = JsonBody::<AcquireBody>::from_request(request, &app).await?;
            let (session, wait) = shared_locks::admit(
                &app,
                &caller,
                SharedKind::Semaphore,
                name,
                &body.session_id,
                body.wait_ms,
            )
            .await?;
            let options = AcquireOptions {
                wait,
                keep_queued: body.keep_queued,
            };
            let grant = shared_locks::long_poll(
                &app,
                body.keep_queued,
                app.node
                    .acquire_semaphore(name, session, body.permits, options),
            )
            .await?;
            Ok(Json(Granted {
                semaphore: name.to_string(),
                permits: body.permits,
                grant: grant.into(),
            })
            .into_response())
        }
        "release" => {
            let JsonBody(body) = JsonBody::<SessionBody>::from_request(request, &app).await?;
            shared_locks::release(&app, &caller, SharedKind::Semaphore, name, &body.session_id)
                .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        other => Ok(no_such_action(other, "GET,HEAD", "acquire, release")),
    }
}

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
