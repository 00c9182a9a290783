//! `/v1/rwlocks`: read-write locks (docs/api.md, "Read-write locks").
//!
//! Routed like `/v1/locks` (`locks.rs`): `POST {name}/acquire|release`,
//! `GET {name}`. Readers at the head of the queue share the lock, a writer
//! holds alone, and the queue is FIFO, so readers never starve a writer.

use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use raftlock_core::{RwMode, SharedKind};
use raftlock_node::AcquireOptions;
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{no_such_action, ApiError};
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadQuery};
use crate::locks::{split_action, SessionBody};
use crate::shared_locks::{self, SharedGrant, SharedHolder, SharedWaiter};
use crate::state::AppState;

/// The read-write lock routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/rwlocks/{*rest}", get(inspect).post(action))
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Read,
    Write,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    session_id: String,
    mode: Mode,
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize)]
struct Granted {
    rwlock: String,
    mode: Mode,
    #[serde(flatten)]
    grant: SharedGrant,
}

#[derive(Debug, Serialize)]
struct RwLockBody {
    rwlock: String,
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
                SharedKind::RwLock,
                name,
                &body.session_id,
                body.wait_ms,
            )
            .await?;
            let mode = match body.mode {
                Mode::Read => RwMode::Read,
                Mode::Write => RwMode::Write,
            };
            let options = AcquireOptions {
                wait,
                keep_queued: body.keep_queued,
            };
            let grant = shared_locks::long_poll(
                &app,
                body.keep_queued,
                app.node.acquire_rwlock(name, session, mode, options),
            )
            .await?;
            Ok(Json(Granted {
                rwlock: name.to_string(),
                mode: body.mode,
                grant: grant.into(),
            })
            .into_response())
        }
        "release" => {
            let JsonBody(body) = JsonBody::<SessionBody>::from_request(request, &app).await?;
            shared_locks::release(&app, &caller, SharedKind::RwLock, name, &body.session_id)
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
) -> Result<Json<RwLockBody>, ApiError> {
    let listing =
        shared_locks::inspect(&app, &caller, SharedKind::RwLock, &name, query.consistency).await?;
    Ok(Json(RwLockBody {
        rwlock: name,
        holders: listing.holders,
        waiters: listing.waiters,
    }))
}
