//! The internal listener: Raft RPCs from peers and operations forwarded by
//! followers to the leader. bincode in, bincode out; a body that does not
//! decode is answered 400 and changes nothing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, VoteRequest,
};
use raftlock_tls::rustls::ServerConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::raft::typ::TypeConfig;
use crate::replica::at_leader::LeaderRequest;
use crate::replica::Replica;
use crate::transport::member_tls::MemberListener;
use crate::transport::network::route;

type Shared = State<Arc<Replica>>;

/// Why an internal call was not answered: the status the HTTP route
/// answers with, and a message. A peer pipe (`pipe`) carries the same.
pub(crate) type Failure = (StatusCode, String);

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Failure> {
    bincode::deserialize(body)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("undecodable body: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, Failure> {
    bincode::serialize(value).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

fn respond(answer: Result<Vec<u8>, Failure>) -> Response {
    match answer {
        Ok(bytes) => bytes.into_response(),
        Err(failure) => failure.into_response(),
    }
}

/// An append from the leader: the encoded answer, once durable.
pub(crate) async fn answer_append(replica: &Replica, body: &[u8]) -> Result<Vec<u8>, Failure> {
    let request = decode::<AppendEntriesRequest<TypeConfig>>(body)?;
    let through = request
        .entries
        .last()
        .map(|e| e.log_id.index)
        .max(request.prev_log_id.map(|l| l.index));
    // The append and its durability wait concern one log store: after a
    // full disk the member swaps in a new one (storage_watch.rs).
    let incarnation = replica.raft.get();
    let answer = incarnation.raft.append_entries(request).await;
    // The leader counts a success as these entries being on our disk, but
    // openraft here saw them only written (deferred durability): answer
    // once they are durable. A failure or a conflict claims nothing.
    let acknowledged = match &answer {
        Ok(AppendEntriesResponse::Success) => through,
        Ok(AppendEntriesResponse::PartialSuccess(matching)) => matching.map(|l| l.index),
        _ => None,
    };
    if let Some(index) = acknowledged {
        match tokio::time::timeout(ACK_DURABLE_WAIT, incarnation.durable.wait_for(index)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err((StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
            Err(_) => {
                let message = format!("log not durable through index {index} in time");
                return Err((StatusCode::SERVICE_UNAVAILABLE, message));
            }
        }
    }
    encode(&answer)
}

/// Longest an append acknowledgement waits for this node's disk before the
/// request fails instead (the leader resends). Long enough for a slow sync;
/// bounded because after a truncation an index may only become durable
/// again when new entries reach it.
const ACK_DURABLE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A vote request from a candidate.
pub(crate) async fn answer_vote(replica: &Replica, body: &[u8]) -> Result<Vec<u8>, Failure> {
    let request = decode::<VoteRequest<u64>>(body)?;
    encode(&replica.raft.current().vote(request).await)
}

/// A write, keepalive or read index forwarded by a follower.
pub(crate) async fn answer_leader(replica: &Replica, body: &[u8]) -> Result<Vec<u8>, Failure> {
    let request = decode::<LeaderRequest>(body)?;
    encode(&replica.answer_here(request).await)
}

async fn append(State(replica): Shared, body: Bytes) -> Response {
    respond(answer_append(&replica, &body).await)
}

async fn vote(State(replica): Shared, body: Bytes) -> Response {
    respond(answer_vote(&replica, &body).await)
}

async fn snapshot(State(replica): Shared, body: Bytes) -> Response {
    respond(match decode::<InstallSnapshotRequest<TypeConfig>>(&body) {
        Ok(request) => encode(&replica.raft.current().install_snapshot(request).await),
        Err(failure) => Err(failure),
    })
}

async fn leader(State(replica): Shared, body: Bytes) -> Response {
    respond(answer_leader(&replica, &body).await)
}

async fn initialized(State(replica): Shared) -> Response {
    respond(encode(&replica.is_initialized_now()))
}

async fn identity(State(replica): Shared) -> Response {
    respond(encode(&replica.peer_identity()))
}

/// Refuses a request from another cluster, or one meant for another
/// incarnation of this member (`peer_guard`), before it reaches Raft.
async fn guard(State(replica): Shared, request: Request, next: Next) -> Response {
    match replica.guard.admit(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// Serves the internal routes until the node stops.
/// With `tls` (the `[tls]` table), only peers presenting a certificate
/// signed by the cluster CA get past the handshake (member_tls.rs).
pub(crate) async fn serve(
    replica: Arc<Replica>,
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
) {
    let router = Router::new()
        .route(route::APPEND, post(append))
        .route(route::VOTE, post(vote))
        .route(route::SNAPSHOT, post(snapshot))
        .route(route::LEADER, post(leader))
        .route_layer(axum::middleware::from_fn_with_state(replica.clone(), guard))
        // Asked before a member is in any membership: not guarded.
        .route(route::INITIALIZED, post(initialized))
        .route(route::IDENTITY, post(identity))
        // A peer pipe: every frame on it passes the guard itself.
        .route(route::PIPE, get(crate::transport::pipe::server::upgrade))
        // Snapshot chunks and entry batches can be large.
        .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(replica.clone());
    let stopping = replica.shutdown.clone();
    let shutdown = async move { stopping.stopped().await };
    let served = match tls {
        None => {
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(tls) => match MemberListener::new(listener, tls) {
            Ok(listener) => {
                axum::serve(listener, router)
                    .with_graceful_shutdown(shutdown)
                    .await
            }
            Err(e) => Err(e),
        },
    };
    if let Err(e) = served {
        tracing::error!("internal server failed: {e}");
    }
}
