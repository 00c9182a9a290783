//! The member's control endpoint: the workloads' operations, done by an
//! [`EmbeddedClient`] over this process's node.
//!
//! It speaks the public API's paths, bodies and error codes (the subset
//! the workloads use), so the harness drives embedded clients with the
//! same [`crate::api::Api`] and the same ok/fail/info classification as
//! HTTP clients; only the base URL differs:
//!
//! - `POST /v1/sessions` `{"ttl_ms", "owner"}` → `201 {"session_id", "ttl_ms"}`
//! - `POST /v1/sessions/{id}/keepalive` → `200 {"ttl_ms"}`
//! - `DELETE /v1/sessions/{id}` → `204`
//! - locks, read-write locks, semaphores and multi-locks ([`queues`]);
//! - nodes and transactions ([`nodes`]).
//!
//! Each request is one call of the embedded client, which (like the HTTP
//! client) retries `no_leader` and lost answers itself for about 1.5 s.

mod nodes;
mod queues;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use raftlock_client::{ClientError, EmbeddedClient, LockClient, SessionId};
use raftlock_node::Node;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// The control routes over `node`.
pub fn router(node: Node) -> Router {
    Router::new()
        .route("/v1/sessions", post(open_session))
        .route("/v1/sessions/{id}/keepalive", post(keepalive))
        .route("/v1/sessions/{id}", delete(close_session))
        .route("/v1/locks/{*rest}", post(queues::lock_action))
        .route("/v1/rwlocks/{*rest}", post(queues::rwlock_action))
        .route("/v1/semaphores/{*rest}", post(queues::semaphore_action))
        .route("/v1/multilocks/{action}", post(queues::multilock_action))
        .route("/v1/nodes/{*path}", get(nodes::read).put(nodes::put))
        .route("/v1/txn", post(nodes::txn))
        .with_state(EmbeddedClient::new(node))
}

#[derive(Deserialize)]
struct OpenBody {
    ttl_ms: u64,
    #[serde(default)]
    owner: String,
}

async fn open_session(
    State(client): State<EmbeddedClient>,
    Json(body): Json<OpenBody>,
) -> Response {
    match client
        .open_session(&body.owner, Duration::from_millis(body.ttl_ms))
        .await
    {
        Ok(lease) => (
            StatusCode::CREATED,
            Json(json!({
                "session_id": lease.id.to_string(),
                "ttl_ms": u64::try_from(lease.ttl.as_millis()).unwrap_or(u64::MAX),
            })),
        )
            .into_response(),
        Err(e) => error(&e),
    }
}

async fn keepalive(State(client): State<EmbeddedClient>, Path(id): Path<String>) -> Response {
    let Some(id) = session(&id) else {
        return unknown_session(&id);
    };
    match client.keepalive(id).await {
        Ok(ttl) => Json(json!({"ttl_ms": u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)}))
            .into_response(),
        Err(e) => error(&e),
    }
}

async fn close_session(State(client): State<EmbeddedClient>, Path(id): Path<String>) -> Response {
    let Some(id) = session(&id) else {
        return unknown_session(&id);
    };
    match client.close_session(id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(&e),
    }
}

fn session(text: &str) -> Option<SessionId> {
    text.parse().ok()
}

fn unknown_session(text: &str) -> Response {
    reply(
        StatusCode::NOT_FOUND,
        "session_not_found",
        format!("{text:?} is not a session id"),
    )
}

fn bad_request(message: String) -> Response {
    reply(StatusCode::BAD_REQUEST, "bad_request", message)
}

fn reply(status: StatusCode, code: &str, message: String) -> Response {
    (status, Json(json!({"error": code, "message": message}))).into_response()
}

/// The public API's status and code for a client error, so the harness
/// classifies an embedded answer exactly as an HTTP one.
fn error(e: &ClientError) -> Response {
    let (status, code) = match e {
        ClientError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        ClientError::SessionNotFound(_) | ClientError::SessionLost(_) => {
            (StatusCode::NOT_FOUND, "session_not_found")
        }
        ClientError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        ClientError::NotOwner(_) => (StatusCode::FORBIDDEN, "not_owner"),
        ClientError::LockHeld(_) => (StatusCode::CONFLICT, "lock_held"),
        ClientError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, "timeout"),
        ClientError::NotLeader(_) => (StatusCode::CONFLICT, "not_leader"),
        ClientError::Withdrawn(_) => (StatusCode::CONFLICT, "withdrawn"),
        ClientError::NoLeader(_) | ClientError::Unavailable(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "no_leader")
        }
        ClientError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
        ClientError::Rejected { code, message } => {
            return reply(StatusCode::CONFLICT, code, message.clone())
        }
        ClientError::OutcomeUnknown(_) => (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown"),
        ClientError::Protocol(_) | ClientError::Internal(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        }
        // The client crate may grow variants: an unknown one is an unknown
        // outcome, which is always a safe classification.
        #[allow(unreachable_patterns)]
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    reply(status, code, e.to_string())
}
