//! Below the routes: accepting connections and reading requests with
//! deadlines, so slow or stalled clients (slowloris) cannot pin
//! connections, tasks and buffers forever.
//!
//! `axum::serve` exposes no header read timeout, so this is its accept
//! loop with hyper's HTTP/1 connection builder configured directly:
//! headers must arrive within `header_read_timeout_ms` (hyper closes the
//! connection otherwise), and a middleware reads each body within
//! `body_read_timeout_ms`; and at most `max_connections` connections are
//! served at once ([`crate::overflow`]). HTTP/1 only: no client of the API speaks h2c,
//! and hyper's HTTP/2 server has no header deadline of this kind.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use raftlock_tls::rustls::ServerConfig;
use raftlock_tls::{accept_failed, TlsConnection, TlsIncoming};
use tokio::net::{TcpListener, TcpStream};

use crate::error::ApiError;
use crate::overload::overflow::{self, Admit, Slots};
use tokio::sync::OwnedSemaphorePermit;

/// Serves `app` on `listener` until `shutdown` completes, then stops
/// accepting and waits for every open connection to finish its
/// in-flight request (idle keep-alive connections close at once). With
/// `tls`, connections are HTTPS: each TLS handshake runs in its own task
/// and must finish within the header deadline, so a client that connects
/// and stalls holds neither the accept loop nor, for long, a task.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    app: Router,
    (header_read_timeout, slots): (Duration, Slots),
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The timer is what makes hyper enforce the header deadline at all.
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let mut incoming = match tls {
        None => Incoming::Plain(listener),
        Some(tls) => Incoming::Tls(TlsIncoming::new(listener, tls, header_read_timeout, "api")?),
    };
    // A holder's keepalive past the cap (overflow.rs): one request, then
    // the connection closes and gives its place back.
    let mut lane = http.clone();
    lane.keep_alive(false);
    let refusal = Arc::new(overflow::answer(slots.max()));
    let mut warned = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = incoming.accept() => {
                let admit = match &accepted {
                    Accepted::Failed(_) => None,
                    _ => Some(slots.admit()),
                };
                if !warned && !matches!(admit, None | Some(Admit::Serve(_))) {
                    // Once per listener: a flood would repeat it per connection.
                    warned = true;
                    tracing::warn!(
                        max = slots.max(),
                        limit = slots.shedding().limit(),
                        "API connection limit reached (api.max_connections, or fewer while \
                         the member falls behind its load): new connections get 503 \
                         overloaded until some close"
                    );
                }
                let past_cap = (&lane, &slots, &refusal);
                match (accepted, admit) {
                    (Accepted::Plain(stream, peer), Some(admit)) => {
                        admitted(&http, &graceful, &app, stream, peer, admit, past_cap);
                    }
                    (Accepted::Tls(stream, peer), Some(admit)) => {
                        admitted(&http, &graceful, &app, stream, peer, admit, past_cap);
                    }
                    (Accepted::Failed(e), _) => accept_failed(e).await,
                    (_, None) => {}
                }
            }
            () = &mut shutdown => break,
        }
    }
    drop(incoming);
    graceful.shutdown().await;
    Ok(())
}

/// Where connections come from: TCP, or TCP with a finished handshake.
enum Incoming {
    Plain(TcpListener),
    Tls(TlsIncoming),
}

enum Accepted {
    Plain(TcpStream, SocketAddr),
    Tls(Box<TlsConnection>, SocketAddr),
    Failed(std::io::Error),
}

impl Incoming {
    async fn accept(&mut self) -> Accepted {
        match self {
            Incoming::Plain(listener) => match listener.accept().await {
                Ok((stream, peer)) => Accepted::Plain(stream, peer),
                Err(e) => Accepted::Failed(e),
            },
            Incoming::Tls(incoming) => {
                let (stream, peer) = incoming.accept().await;
                Accepted::Tls(Box::new(stream), peer)
            }
        }
    }
}

/// What a connection past the cap needs: the builder of the holders'
/// lane, the slots (which know whose keepalive it is) and the 503.
type PastCap<'a> = (
    &'a hyper::server::conn::http1::Builder,
    &'a Slots,
    &'a Arc<Vec<u8>>,
);

/// Serves, refuses or drops a new connection, as its admission says.
fn admitted<S>(
    http: &hyper::server::conn::http1::Builder,
    graceful: &GracefulShutdown,
    app: &Router,
    stream: S,
    peer: SocketAddr,
    admit: Admit,
    (lane, slots, refusal): PastCap<'_>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    match admit {
        Admit::Serve(slot) => spawn_connection(http, graceful, app, stream, peer, slot),
        Admit::Refuse(permit) => {
            let (lane, app) = (lane.clone(), app.clone());
            let serve = move |stream: overflow::Prefixed<S>| async move {
                let connection =
                    lane.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
                if let Err(e) = connection.await {
                    tracing::debug!(%peer, "connection past the cap ended: {e}");
                }
            };
            tokio::spawn(overflow::refuse(
                stream,
                Arc::clone(refusal),
                permit,
                slots.clone(),
                serve,
            ));
        }
        Admit::Drop => drop(stream),
    }
}

fn spawn_connection<S>(
    http: &hyper::server::conn::http1::Builder,
    graceful: &GracefulShutdown,
    app: &Router,
    stream: S,
    peer: SocketAddr,
    slot: OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection =
        http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
    let connection = graceful.watch(connection);
    tokio::spawn(async move {
        // A header timeout, a reset or a malformed request: the
        // client's problem, worth a debug line at most.
        if let Err(e) = connection.await {
            tracing::debug!(%peer, "connection ended: {e}");
        }
        // The connection's slot is free again.
        drop(slot);
    });
}

/// How a request body must arrive: its size and time budget.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// Middleware: reads the whole request body within `limits.timeout` and
/// hands the handlers a buffered body. API bodies are small JSON, so
/// buffering them here costs one copy and makes the deadline cover the
/// whole body, however slowly it trickles in.
pub(crate) async fn read_body(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let read = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.timeout, read).await {
        Ok(Ok(collected)) => {
            let body = Body::from(collected.to_bytes());
            next.run(Request::from_parts(parts, body)).await
        }
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => ApiError::too_large(
            format!("request body over the limit of {} bytes", limits.max_bytes),
        )
        .into_response(),
        Ok(Err(e)) => {
            ApiError::bad_request(format!("cannot read the request body: {e}")).into_response()
        }
        Err(_) => ApiError::request_timeout(format!(
            "the request body did not arrive within {} ms",
            limits.timeout.as_millis()
        ))
        .into_response(),
    }
}
