//! `GET /v1/sessions`: the live sessions the caller may see (all of them
//! without tokens or for a cluster admin; otherwise the caller's own), in
//! session id order, at most `limit` (docs/api.md). The dashboard (`/ui`)
//! shows them; a separate file from `sessions.rs` because it is a listing,
//! not an operation on one session.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use raftlock_api::session::SessionList;
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiQuery, ReadConsistency};
use crate::state::AppState;

/// Sessions per answer without `limit`.
const DEFAULT_LIMIT: usize = 1000;
/// The largest `limit`: an answer stays a few MiB at most.
const MAX_LIMIT: usize = 10_000;

/// The listing in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(list))]
pub(crate) struct Api;

/// The listing route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/sessions", get(list))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// At most this many sessions (default 1000, at most 10000).
    limit: Option<usize>,
    #[serde(default)]
    consistency: ReadConsistency,
}

/// The live sessions the caller may see, in session id order.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    params(ListQuery),
    responses((status = 200, description = "The sessions", body = SessionList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<SessionList>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be at most {MAX_LIMIT}"
        )));
    }
    let every = caller.sees_every_session();
    let mine = caller.principal().map(str::to_string);
    Ok(Json(
        app.node
            .sessions(
                query.consistency.into(),
                |principal| every || principal == mine.as_deref(),
                limit,
            )
            .await?,
    ))
}
