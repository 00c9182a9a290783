//! `GET /v1/sessions`: the live sessions the caller may see (all of them
//! without tokens or for a cluster admin; otherwise the caller's own), in
//! session id order, at most `limit` (docs/api.md). The dashboard (`/ui`)
//! shows them; a separate file from `sessions.rs` because it is a listing,
//! not an operation on one session.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

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

#[derive(Debug, Serialize, ToSchema)]
struct SessionLine {
    session_id: String,
    owner: String,
    principal: Option<String>,
    ttl_ms: u64,
    /// Its ephemeral nodes: lock and election queue nodes included.
    nodes: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct SessionList {
    sessions: Vec<SessionLine>,
    /// More sessions matched than `limit`.
    truncated: bool,
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
    let mut views = app
        .node
        .read(query.consistency.into(), move |s| {
            s.session_leases()
                .filter_map(|lease| s.session(lease.id))
                .filter(|view| every || view.principal == mine)
                .take(limit + 1)
                .collect::<Vec<_>>()
        })
        .await?;
    let truncated = views.len() > limit;
    views.truncate(limit);
    Ok(Json(SessionList {
        sessions: views
            .into_iter()
            .map(|v| SessionLine {
                session_id: v.id.to_string(),
                owner: v.owner,
                principal: v.principal,
                ttl_ms: v.ttl_ms,
                nodes: v.nodes,
            })
            .collect(),
        truncated,
    }))
}
