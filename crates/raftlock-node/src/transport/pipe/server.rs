//! The serving side of a peer pipe: the upgrade route on the internal
//! listener, then one frame at a time on the upgraded connection, each
//! through the identity check and the internal route's own handler.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::frame::{self, Head};
use super::{Kind, PROTOCOL};
use crate::replica::Replica;
use crate::transport::peer_guard::Claims;
use crate::transport::routes::{self, Failure};

/// A connection with no frame for this long is closed. The dialing side
/// stops reusing an idle connection well before (`client::IDLE_REUSE`),
/// so it never writes to one this side is closing; a peer that vanished
/// behind a partition costs a task and a socket only this long.
pub(crate) const IDLE_CLOSE: Duration = Duration::from_secs(120);

/// `GET /internal/pipe` with `Upgrade: raftlock-pipe/1`: switches the
/// connection to frames. Unguarded as a route: each frame is checked.
pub(crate) async fn upgrade(State(replica): State<Arc<Replica>>, mut request: Request) -> Response {
    let asked = request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        == Some(PROTOCOL);
    if !asked {
        let message = format!("expected `Upgrade: {PROTOCOL}`");
        return (StatusCode::BAD_REQUEST, message).into_response();
    }
    let upgraded = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        match upgraded.await {
            Ok(io) => serve(replica, TokioIo::new(io)).await,
            Err(e) => tracing::debug!("peer pipe upgrade failed: {e}"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, PROTOCOL)
        .body(Body::empty())
        .unwrap_or_else(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}

/// Answers frames in order until the peer closes, falls silent for
/// [`IDLE_CLOSE`], breaks the protocol, or this node stops.
async fn serve<Io: AsyncRead + AsyncWrite + Unpin>(replica: Arc<Replica>, io: Io) {
    let mut io = BufReader::new(io);
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(IDLE_CLOSE, frame::read(&mut io)) => next,
            _ = replica.shutdown.stopped() => return,
        };
        let request = match next {
            Ok(Ok(Some(request))) => request,
            // Closed between frames, or idle too long.
            Ok(Ok(None)) | Err(_) => return,
            Ok(Err(e)) => {
                tracing::debug!("peer pipe closed: {e}");
                return;
            }
        };
        let answer = answer(&replica, &request).await;
        let bytes = match frame::answer(answer) {
            Ok(bytes) => bytes,
            Err(e) => {
                match frame::answer(Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))) {
                    Ok(bytes) => bytes,
                    Err(_) => return,
                }
            }
        };
        if io.write_all(&bytes).await.is_err() || io.flush().await.is_err() {
            return;
        }
    }
}

/// One request frame's answer, as its HTTP route would give it.
async fn answer(replica: &Replica, request: &[u8]) -> Result<Vec<u8>, Failure> {
    let (Head { kind, claims }, body) =
        frame::split_request(request).map_err(|m| (StatusCode::BAD_REQUEST, m))?;
    // No claims: as an HTTP request without the identity headers.
    let claims = claims.unwrap_or(Claims {
        from: 0,
        from_incarnation: 0,
        cluster: None,
        to_incarnation: None,
    });
    replica.guard.admit_claims(&claims)?;
    match kind {
        Kind::Append => routes::answer_append(replica, body).await,
        Kind::Vote => routes::answer_vote(replica, body).await,
        Kind::Leader => routes::answer_leader(replica, body).await,
    }
}
