//! Requests in flight on one member (`api.max_requests_in_flight`), and the
//! lane that keeps held locks alive past them.
//!
//! Why: a member serves up to `max_connections` connections, and with
//! HTTP/1 each may have a request in flight. Under a storm of them (50,000
//! sessions renewing at a 1 s TTL, docs/overload.md) every request, a lock
//! holder's keepalive included, waited its turn behind thousands of
//! others, longer than the holder's TTL: its session expired and its lock
//! went to the next in line, although nothing had failed.
//!
//! What:
//! - A request takes one of `max_requests_in_flight` slots for as long as
//!   its handler runs (a long-poll: for its whole wait). With every slot
//!   taken it waits for one, first come first served, at most
//!   `max_queue_wait_ms`; then it is answered `503 overloaded` with
//!   `Retry-After: 1` and nothing was done (the client may go to another
//!   member at once). A waiting request costs no CPU: the load a member
//!   works on is bounded, and so is the wait of what it admits.
//! - A keepalive of a session that owns nodes (holds or waits for a lock,
//!   a semaphore permit, an election, or has ephemeral nodes) takes no
//!   slot and never waits for one: it is what keeps those nodes, and
//!   losing them is what overload must not cause. The check is a read of
//!   this member's replica; a session it does not know yet (just opened
//!   on the leader) waits like any request. A keepalive of a session that
//!   owns nothing is a request like the others: if it comes too late, the
//!   session expires and the client opens another, losing nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use raftlock_core::SessionId;
use raftlock_node::Node;
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::state::AppState;

/// The slots of one member, and what a request may wait for one.
#[derive(Clone)]
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    max: usize,
    max_wait: Duration,
    app: AppState,
}

impl Admission {
    /// `max` requests in flight (at least one), waiting at most `max_wait`
    /// for a slot; `app` to tell which sessions own nodes.
    pub(crate) fn new(max: usize, max_wait: Duration, app: AppState) -> Admission {
        let max = max.max(1);
        Admission {
            slots: Arc::new(Semaphore::new(max)),
            max,
            max_wait,
            app,
        }
    }

    /// True for a keepalive of a session this replica knows to own nodes.
    async fn is_holders_keepalive(&self, method: &Method, path: &str) -> bool {
        match keepalive_session(method, path) {
            Some(id) => self.owns_nodes(id).await,
            None => false,
        }
    }

    async fn owns_nodes(&self, id: SessionId) -> bool {
        owns_nodes(&self.app.node, id).await
    }

    /// Asks hyper to close the connection after `response` when the
    /// member sheds connections (`shedding.rs`), unless it answered a
    /// holder's keepalive (`keepalive`: its session, if it was one).
    async fn shed(&self, keepalive: Option<SessionId>, response: &mut Response) {
        if !self.app.shedding.over() {
            return;
        }
        if let Some(id) = keepalive {
            if self.owns_nodes(id).await {
                return;
            }
        }
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
}

/// True when `node`'s replica knows session `id` to own nodes: whose
/// keepalives take the holders' lanes here and past the connection cap
/// (`overflow.rs`).
pub(crate) async fn owns_nodes(node: &Node, id: SessionId) -> bool {
    // A stale read of this member's replica: no Raft round trip.
    node.session_owns_nodes(id).await
}

/// The session of `POST /v1/sessions/{id}/keepalive`, if it is one.
fn keepalive_session(method: &Method, path: &str) -> Option<SessionId> {
    if method != Method::POST {
        return None;
    }
    let id = path
        .strip_prefix("/v1/sessions/")?
        .strip_suffix("/keepalive")?;
    crate::extract::parse_session(id).ok()
}

/// Middleware: admits the request into a slot (or the holders' lane), or
/// answers `503 overloaded` once it waited `max_queue_wait_ms` for one.
pub(crate) async fn admit(
    State(admission): State<Admission>,
    request: Request,
    next: Next,
) -> Response {
    let slot = match Arc::clone(&admission.slots).try_acquire_owned() {
        Ok(slot) => slot,
        Err(_) => {
            // Full: a holder's keepalive goes ahead; the rest wait in line.
            if admission
                .is_holders_keepalive(request.method(), request.uri().path())
                .await
            {
                return next.run(request).await;
            }
            let waited = tokio::time::timeout(
                admission.max_wait,
                Arc::clone(&admission.slots).acquire_owned(),
            )
            .await;
            match waited {
                Ok(Ok(slot)) => slot,
                // Closed: never, the semaphore lives as long as this layer.
                Ok(Err(_)) | Err(_) => {
                    return ApiError::overloaded(format!(
                        "this member has {} requests in flight, its limit \
                         (api.max_requests_in_flight), and this one waited {} ms for a slot; \
                         retry later or on another member",
                        admission.max,
                        admission.max_wait.as_millis()
                    ))
                    .into_response()
                }
            }
        }
    };
    let keepalive = keepalive_session(request.method(), request.uri().path());
    let mut response = next.run(request).await;
    // The handler is done (a streamed body, SSE, goes on without the slot:
    // it waits on events, it does not work).
    drop(slot);
    admission.shed(keepalive, &mut response).await;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_keepalive_names_its_session() {
        let id = "0123456789abcdef0123456789abcdef";
        let path = format!("/v1/sessions/{id}/keepalive");
        assert!(keepalive_session(&Method::POST, &path).is_some());
        assert!(keepalive_session(&Method::GET, &path).is_none());
        assert!(keepalive_session(&Method::POST, &format!("/v1/sessions/{id}")).is_none());
        assert!(keepalive_session(&Method::POST, "/v1/sessions/xyz/keepalive").is_none());
        assert!(keepalive_session(&Method::POST, "/v1/locks/a/keepalive").is_none());
    }
}
