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
use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, QueueKind};
use serde::{Deserialize, Serialize};

use crate::acquire::{acquire, AcquireRequest};
use crate::auth::Caller;
use crate::error::{no_such_action, ApiError};
use crate::extract::{parse_session, ApiPath, ApiQuery, JsonBody, ReadConsistency, ReadQuery};
use crate::locks::{read_queue, read_queues, release, split_action, SessionBody};
use crate::observe::observe;
use crate::state::AppState;

/// The election routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/elections", get(list))
        .route("/v1/elections/{*rest}", get(read).post(action))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CampaignBody {
    session_id: String,
    value: String,
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProclaimBody {
    session_id: String,
    value: String,
}

#[derive(Debug, Serialize)]
struct Elected {
    election: String,
    leader: bool,
    node: String,
    fencing_token: u64,
    session_id: String,
}

/// The leader of an election as the API shows it: `session_id` is
/// `null` for another principal's session (docs/security.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Leader {
    session_id: Option<String>,
    principal: Option<String>,
    value: String,
    node: String,
    fencing_token: u64,
}

impl Leader {
    fn new(e: QueueEntryView, caller: &Caller) -> Self {
        Leader {
            session_id: caller
                .visibility(e.principal.as_deref())
                .session_id(e.session),
            principal: e.principal,
            // Values arrive as JSON strings, so they are UTF-8.
            value: String::from_utf8_lossy(&e.data).into_owned(),
            node: e.node,
            fencing_token: e.fencing_token,
        }
    }
}

/// `GET /v1/elections/{name}` and each `observe` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ElectionBody {
    election: String,
    leader: Option<Leader>,
}

impl ElectionBody {
    /// The election `name` in `state`, as `caller` may see it.
    pub fn of(state: &raftlock_core::StateMachine, name: &str, caller: &Caller) -> Self {
        ElectionBody {
            election: name.to_string(),
            leader: state
                .holder(QueueKind::Election, name)
                .map(|e| Leader::new(e, caller)),
        }
    }
}

#[derive(Debug, Serialize)]
struct ElectionLine {
    election: String,
    leader: Option<Leader>,
    /// Candidates waiting behind the leader.
    candidates: usize,
}

#[derive(Debug, Serialize)]
struct ElectionList {
    elections: Vec<ElectionLine>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
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
        "campaign" => {
            let JsonBody(body) = JsonBody::<CampaignBody>::from_request(request, &app).await?;
            let data = app
                .check_data(body.value.len())
                .map(|()| body.value.into_bytes());
            let grant = acquire(
                &app,
                AcquireRequest {
                    caller: &caller,
                    kind: QueueKind::Election,
                    name,
                    session_id: &body.session_id,
                    wait_ms: body.wait_ms,
                    keep_queued: body.keep_queued,
                    data,
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
        "proclaim" => {
            let JsonBody(body) = JsonBody::<ProclaimBody>::from_request(request, &app).await?;
            let session = parse_session(&body.session_id)?;
            caller.require_session(&app, session).await?;
            let checked = validate_lock_name(name)
                .map_err(ApiError::from)
                .and_then(|()| app.check_data(body.value.len()));
            app.session_wins(session, checked).await?;
            app.node
                .proclaim(name, session, body.value.into_bytes())
                .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        "resign" => {
            let JsonBody(body) = JsonBody::<SessionBody>::from_request(request, &app).await?;
            release(&app, &caller, QueueKind::Election, name, &body.session_id).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        other => Ok(no_such_action(
            other,
            "GET,HEAD",
            "campaign, proclaim, resign",
        )),
    }
}

async fn read(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Response, ApiError> {
    if let (name, "observe") = split_action(&rest) {
        return observe(app, caller, name.to_string()).await;
    }
    let view = read_queue(&app, QueueKind::Election, &rest, query.consistency).await?;
    Ok(Json(ElectionBody {
        election: rest,
        leader: view.holder.map(|e| Leader::new(e, &caller)),
    })
    .into_response())
}

async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ElectionList>, ApiError> {
    let queues = read_queues(
        &app,
        &caller,
        QueueKind::Election,
        &query.prefix,
        query.consistency,
    )
    .await?;
    Ok(Json(ElectionList {
        elections: queues
            .into_iter()
            .map(|q| ElectionLine {
                election: q.name,
                leader: q.holder.map(|e| Leader::new(e, &caller)),
                candidates: q.waiters,
            })
            .collect(),
    }))
}
