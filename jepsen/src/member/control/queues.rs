//! The queue primitives on the control endpoint, as the public API spells
//! them (docs/api.md):
//!
//! - `POST /v1/locks/{name}/acquire` `{"session_id", "wait_ms",
//!   "lock_delay_ms"?}` → `200 {"fencing_token", …}`; `…/release` → `204`
//! - `POST /v1/rwlocks/{name}/acquire` `{"session_id", "mode", "wait_ms"}`;
//!   `…/release`
//! - `POST /v1/semaphores/{name}/acquire` `{"session_id", "permits",
//!   "wait_ms"}`; `…/release`
//! - `POST /v1/multilocks/acquire` `{"session_id", "locks", "wait_ms"}` →
//!   `200 {"locks": [{"lock", "fencing_token", …}]}`; `…/release`
//!
//! Names contain `/`, so the action is the last path component.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftlock_client::{EmbeddedClient, Grant, LockClient, Mode, Poll, QueueKind, SessionId};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

use super::{bad_request, error, session, unknown_session};

#[derive(Deserialize)]
pub(super) struct QueueBody {
    session_id: String,
    #[serde(default)]
    wait_ms: u64,
    /// Locks: the lock's lock-delay.
    #[serde(default)]
    lock_delay_ms: Option<u64>,
    /// Read-write locks: `read` or `write`.
    #[serde(default)]
    mode: Option<String>,
    /// Semaphores: the limit.
    #[serde(default)]
    permits: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct MultiBody {
    session_id: String,
    locks: Vec<String>,
    #[serde(default)]
    wait_ms: u64,
}

pub(super) async fn lock_action(
    State(client): State<EmbeddedClient>,
    Path(rest): Path<String>,
    Json(body): Json<QueueBody>,
) -> Response {
    action(&client, QueueKind::Lock, &rest, body).await
}

pub(super) async fn rwlock_action(
    State(client): State<EmbeddedClient>,
    Path(rest): Path<String>,
    Json(body): Json<QueueBody>,
) -> Response {
    action(&client, QueueKind::RwLock, &rest, body).await
}

pub(super) async fn semaphore_action(
    State(client): State<EmbeddedClient>,
    Path(rest): Path<String>,
    Json(body): Json<QueueBody>,
) -> Response {
    action(&client, QueueKind::Semaphore, &rest, body).await
}

/// `{name}/acquire` or `{name}/release` of one primitive.
async fn action(client: &EmbeddedClient, kind: QueueKind, rest: &str, body: QueueBody) -> Response {
    let Some((name, action)) = rest.rsplit_once('/') else {
        return bad_request(format!("no action in {rest:?}"));
    };
    let Some(id) = session(&body.session_id) else {
        return unknown_session(&body.session_id);
    };
    let result = match (action, kind) {
        ("acquire", QueueKind::Lock) => {
            let poll = Poll {
                lock_delay: body.lock_delay_ms.map(Duration::from_millis),
                ..Duration::from_millis(body.wait_ms).into()
            };
            client.acquire(name, id, poll).await.map(Some)
        }
        ("acquire", QueueKind::RwLock | QueueKind::Semaphore) => {
            let access = match (kind, body.mode.as_deref(), body.permits) {
                (QueueKind::RwLock, Some("read"), _) => Mode::Read,
                (QueueKind::RwLock, Some("write"), _) => Mode::Write,
                (QueueKind::Semaphore, _, Some(permits)) => Mode::Permits(permits),
                _ => return bad_request(format!("no mode or permits for {name:?}")),
            };
            let wait = Duration::from_millis(body.wait_ms).into();
            client
                .acquire_shared(name, access, id, wait)
                .await
                .map(Some)
        }
        ("release", QueueKind::Lock) => client.release(name, id).await.map(|()| None),
        ("release", shared) => client.release_shared(name, shared, id).await.map(|()| None),
        (other, _) => return bad_request(format!("unknown action {other:?}")),
    };
    match result {
        Ok(Some(grant)) => Json(grant_json(&grant)).into_response(),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(&e),
    }
}

/// `acquire` or `release` of a multi-lock.
pub(super) async fn multilock_action(
    State(client): State<EmbeddedClient>,
    Path(action): Path<String>,
    Json(body): Json<MultiBody>,
) -> Response {
    let Some(id): Option<SessionId> = session(&body.session_id) else {
        return unknown_session(&body.session_id);
    };
    match action.as_str() {
        "acquire" => {
            let wait = Duration::from_millis(body.wait_ms).into();
            match client.acquire_multi(&body.locks, id, wait).await {
                Ok(grants) => {
                    let locks: Vec<_> = grants.iter().map(grant_json).collect();
                    Json(json!({ "locks": locks })).into_response()
                }
                Err(e) => error(&e),
            }
        }
        "release" => match client.release_multi(&body.locks, id).await {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => error(&e),
        },
        other => bad_request(format!("unknown multi-lock action {other:?}")),
    }
}

fn grant_json(grant: &Grant) -> serde_json::Value {
    json!({
        "lock": grant.name,
        "node": grant.node,
        "fencing_token": grant.fencing_token,
        "session_id": grant.session.to_string(),
    })
}
