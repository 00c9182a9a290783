//! `/v1/elections`: campaign, proclaim, resign, inspect, observe.
//!
//! An election is a lock queue under `/elections/` whose nodes carry the
//! candidate's value: the holder leads. Routing follows `locks`: `POST
//! .../{name}/{campaign|proclaim|resign}`, `GET .../{name}` inspects and
//! `GET .../{name}/observe` streams (so the last component `observe` is
//! reserved for the stream on `GET`).

use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use raftlock_api::election::{ElectionList, ElectionView};
use raftlock_core::path::validate_lock_name;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::acquire::{acquire, release, AcquireRequest};
use crate::auth::Caller;
use crate::error::{no_such_action, ApiError};
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadConsistency, ReadQuery};
use crate::locks::{split_action, SessionBody};
use crate::observe::observe;
use crate::redact::Redact;
use crate::state::AppState;

/// The election operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(list, inspect, observe_route, campaign, proclaim, resign))]
pub(crate) struct Api;

/// The election routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/elections", get(list))
        .route("/v1/elections/{*rest}", get(read).post(action))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CampaignBody {
    session_id: String,
    value: String,
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ProclaimBody {
    session_id: String,
    value: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Elected {
    election: String,
    leader: bool,
    node: String,
    fencing_token: u64,
    session_id: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only elections whose name starts with this.
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    consistency: ReadConsistency,
}

async fn action(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (name, action) = split_action(&rest);
    match action {
        "campaign" => campaign(app, caller, name, request).await,
        "proclaim" => proclaim(app, caller, name, request).await,
        "resign" => resign(app, caller, name, request).await,
        other => Ok(no_such_action(
            other,
            "GET,HEAD",
            "campaign, proclaim, resign",
        )),
    }
}

/// Campaigns: waits in line up to `wait_ms` to lead the election.
#[utoipa::path(post, path = "/v1/elections/{name}/campaign", tag = "elections",
    params(("name" = String, Path, description = "Election name; may contain `/`")),
    request_body = CampaignBody,
    responses((status = 200, description = "Elected", body = Elected)))]
async fn campaign(
    app: AppState,
    caller: Caller,
    name: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let JsonBody(body) = JsonBody::<CampaignBody>::from_request(request, &app).await?;
    let data = app
        .check_data(body.value.len())
        .map(|()| body.value.into_bytes());
    let grant = acquire(
        &app,
        AcquireRequest {
            caller: &caller,
            kind: raftlock_api::QueueKind::Election,
            mode: raftlock_api::Mode::Exclusive,
            data,
            name,
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: None,
        },
    )
    .await?;
    Ok(Json(Elected {
        election: name.to_string(),
        leader: true,
        node: grant.node,
        fencing_token: grant.fencing_token,
        session_id: grant.session.to_string(),
    })
    .into_response())
}

/// The leader changes its value.
#[utoipa::path(post, path = "/v1/elections/{name}/proclaim", tag = "elections",
    params(("name" = String, Path, description = "Election name; may contain `/`")),
    request_body = ProclaimBody,
    responses((status = 204, description = "Proclaimed")))]
async fn proclaim(
    app: AppState,
    caller: Caller,
    name: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let JsonBody(body) = JsonBody::<ProclaimBody>::from_request(request, &app).await?;
    let session = caller.own_session(&app, &body.session_id).await?;
    let checked = validate_lock_name(name)
        .map_err(ApiError::from)
        .and_then(|()| app.check_data(body.value.len()));
    app.session_wins(session, checked).await?;
    app.node
        .proclaim(name, session, body.value.into_bytes())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Resigns leadership, or withdraws a candidacy.
#[utoipa::path(post, path = "/v1/elections/{name}/resign", tag = "elections",
    params(("name" = String, Path, description = "Election name; may contain `/`")),
    request_body = SessionBody,
    responses((status = 204, description = "Resigned")))]
async fn resign(
    app: AppState,
    caller: Caller,
    name: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let JsonBody(body) = JsonBody::<SessionBody>::from_request(request, &app).await?;
    release(
        &app,
        &caller,
        raftlock_api::QueueKind::Election,
        name,
        &body.session_id,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn read(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Response, ApiError> {
    if let (name, "observe") = split_action(&rest) {
        return observe_route(app, caller, name.to_string()).await;
    }
    inspect(app, caller, rest, query).await
}

/// Server-Sent Events: one `leader` event (an `Election` body) at
/// connect, then one per change of leader or value.
#[utoipa::path(get, path = "/v1/elections/{name}/observe", tag = "elections",
    params(("name" = String, Path, description = "Election name; may contain `/`")),
    responses((status = 200, description = "An event stream of `leader` events, each an Election",
        content_type = "text/event-stream", body = ElectionView)))]
async fn observe_route(app: AppState, caller: Caller, name: String) -> Result<Response, ApiError> {
    observe(app, caller, name).await
}

/// The election's leader and value.
#[utoipa::path(get, path = "/v1/elections/{name}", tag = "elections",
    params(("name" = String, Path, description = "Election name; may contain `/`"), ReadQuery),
    responses((status = 200, description = "The election", body = ElectionView)))]
async fn inspect(
    app: AppState,
    caller: Caller,
    name: String,
    query: ReadQuery,
) -> Result<Response, ApiError> {
    let election = app.node.election(&name, query.consistency.into()).await?;
    Ok(Json(election.redact(&caller)).into_response())
}

/// The elections with a leader or candidates, by name prefix.
#[utoipa::path(get, path = "/v1/elections", tag = "elections",
    params(ListQuery),
    responses((status = 200, description = "The elections", body = ElectionList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ElectionList>, ApiError> {
    let elections = app
        .node
        .elections(&query.prefix, query.consistency.into(), caller.reads())
        .await?;
    Ok(Json(ElectionList {
        elections: elections.redact(&caller),
    }))
}
