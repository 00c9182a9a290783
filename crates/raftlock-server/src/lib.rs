//! # raftlock-server
//!
//! The raftlock HTTP/JSON API (the contract in `docs/api.md`) over an
//! embedded [`raftlock_node::Node`]. Every node serves it; a follower
//! forwards writes to the leader itself, and long-polls wait on the node
//! the client is connected to.
//!
//! ```no_run
//! # async fn run(node: raftlock_node::Node) -> std::io::Result<()> {
//! use raftlock_server::{serve, ApiConfig};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7001").await?;
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! serve(node, listener, ApiConfig::default(), stop).await
//! # }
//! ```
//!
//! Modules: one per resource (`sessions`, `locks`, `elections` with
//! `observe`, `nodes`, `cluster` with `reachability`, `backup`,
//! `metrics`), the dashboard's static files (`ui`), the long-poll shared by
//! every acquire and campaign (`acquire`), the acquire/release routes of
//! locks, read-write locks and semaphores (`queue_routes`), one generic
//! set of handlers for the shared-queue kinds (`shared_routes`),
//! JSON-rejecting extractors
//! (`extract`), the single error mapping (`error`), overload control
//! (`overload`: connections, shedding, admission, limits), and the OpenAPI
//! document generated from all of them (`openapi`). Request, answer and
//! error types come from the operations contract (`raftlock_api`).

#![warn(missing_docs)]

mod acquire;
mod auth;
mod backup;
mod cluster;
mod config;
mod elections;
mod error;
mod extract;
mod locks;
mod metrics;
mod multilocks;
mod node_watch;
mod nodes;
mod observe;
mod openapi;
mod overload;
mod process;
mod queue_routes;
mod reachability;
mod redact;
mod session_list;
mod sessions;
mod shared_locks;
mod shared_routes;
mod state;
mod txn;
mod ui;

use std::future::Future;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use raftlock_node::Node;
use tokio::net::TcpListener;
use tokio::sync::watch;

use overload::{admission, connection, overflow, shedding};

pub use auth::{hash_token, AuthConfig, AuthConfigError, Grant, Permission, Token};
pub use config::{ApiConfig, ApiConfigError};

/// For the fuzz targets (`fuzz/`) and their corpus replay test: decodes
/// `bytes` as each JSON request body the API's `JsonBody` extractor takes
/// (with `serde_json::from_slice`, as the extractor does) and says which
/// decoded. Not an API. `cluster.rs`'s `AddMember` is left out for now.
#[doc(hidden)]
pub fn fuzz_json_bodies(bytes: &[u8]) -> [bool; 3] {
    [
        serde_json::from_slice::<nodes::PutBody>(bytes).is_ok(),
        serde_json::from_slice::<sessions::OpenRequest>(bytes).is_ok(),
        serde_json::from_slice::<raftlock_api::lock::FencingBody>(bytes).is_ok(),
    ]
}
pub use error::ApiError;

use state::AppState;

/// The API's routes over `node`. Long-polls and event streams of this
/// router never end on their own account; use [`serve`] for a server that
/// shuts down gracefully. Call it inside a tokio runtime (it starts the
/// task that times lock holds for `/metrics`).
pub fn router(node: Node, config: ApiConfig) -> Router {
    build(
        node,
        config,
        Arc::new(watch::channel(false).0),
        shedding::Shedding::off(),
    )
}

/// Serves the API on `listener` until `shutdown` completes, then stops
/// accepting, ends pending long-polls (`503 shutting_down`; their queued
/// nodes stay for the client's retry on another node) and event streams,
/// and returns once in-flight requests are done. The node itself keeps
/// running; shut it down after.
///
/// Fails at once with `InvalidInput` when `config` does not pass
/// [`ApiConfig::validate`] (the message names the field).
///
/// Unlike [`router`] alone, `serve` also enforces the connection-level
/// limits: request headers must arrive within
/// [`ApiConfig::header_read_timeout_ms`] (HTTP/1 only; see `connection.rs`).
pub async fn serve(
    node: Node,
    listener: TcpListener,
    config: ApiConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    config
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // The cluster file's `[tls]` table, which the node carries: HTTPS
    // for clients (with client certificates as `client_auth` says).
    let tls = match &node.config().tls {
        Some(settings) => Some(
            raftlock_tls::api_server_config(settings)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
        ),
        None => None,
    };
    let header_timeout = std::time::Duration::from_millis(config.header_read_timeout_ms);
    let slots = overflow::Slots::new(config.max_connections).with_holders(node.clone());
    let stopping = Arc::new(watch::channel(false).0);
    // Measures the runtime this listener's connections run on.
    let mut stopped = stopping.subscribe();
    tokio::spawn(slots.shedding().run(async move {
        let _ = stopped.wait_for(|stopping| *stopping).await;
    }));
    let tokens = config.auth.tokens.len();
    let app = build(node, config, stopping.clone(), slots.shedding());
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    if tokens > 0 {
        tracing::info!(%addr, scheme, tokens, "API listening; bearer tokens required");
    } else {
        tracing::info!(%addr, scheme, "API listening; no tokens configured: the API is open");
    }
    let shutdown = async move {
        shutdown.await;
        tracing::info!(%addr, "API shutting down");
        stopping.send_replace(true);
    };
    connection::serve(listener, tls, app, (header_timeout, slots), shutdown).await
}

fn build(
    node: Node,
    config: ApiConfig,
    shutdown: Arc<watch::Sender<bool>>,
    shedding: Arc<shedding::Shedding>,
) -> Router {
    let metrics = metrics::Metrics::new();
    metrics.track_holds(node.subscribe());
    let body_limit = config.max_body_bytes;
    let body_limits = connection::BodyLimits {
        max_bytes: config.max_body_bytes,
        timeout: std::time::Duration::from_millis(config.body_read_timeout_ms),
    };
    let tokens = config
        .auth
        .enabled()
        .then(|| auth::Tokens::new(&config.auth));
    let metrics_handle = metrics.clone();
    let max_in_flight = config.max_requests_in_flight;
    let max_queue_wait = std::time::Duration::from_millis(config.max_queue_wait_ms);
    let state = AppState {
        node,
        config: Arc::new(config),
        metrics,
        shutdown,
        shedding,
    };
    let admission = admission::Admission::new(max_in_flight, max_queue_wait, state.clone());
    routes()
        // After the routes, before the fallbacks: times matched routes
        // only, labelled by their template.
        .route_layer(middleware::from_fn_with_state(
            metrics_handle,
            metrics::time_request,
        ))
        .fallback(no_route)
        // After every route is added: applies to the routes present.
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            body_limits,
            connection::read_body,
        ))
        // Outside the body limits: a request without a valid token is
        // refused before its body is read.
        .layer(middleware::from_fn_with_state(tokens, auth::authenticate))
        // Outermost but for the error shape: a request waits for a slot
        // before anything of it is read or checked (admission.rs).
        .layer(middleware::from_fn_with_state(admission, admission::admit))
        .layer(middleware::map_response(json_errors))
        .with_state(state)
}

/// Every route of the API, without fallbacks and layers. The OpenAPI
/// document's test reads the routes from here (`openapi/tests.rs`).
fn routes() -> Router<AppState> {
    Router::new()
        .merge(sessions::routes())
        .merge(session_list::routes())
        .merge(locks::routes())
        .merge(elections::routes())
        .merge(shared_routes::rwlocks::routes())
        .merge(shared_routes::semaphores::routes())
        .merge(multilocks::routes())
        .merge(nodes::routes())
        .merge(txn::routes())
        .merge(cluster::routes())
        .merge(backup::routes())
        .merge(reachability::routes())
        .merge(ui::routes())
        .route("/metrics", get(metrics::scrape))
        .route("/v1/openapi.json", get(openapi::serve))
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    // axum adds the `Allow` header to this response.
    ApiError::method_not_allowed(format!("{method} is not allowed on {}", uri.path()))
}

/// Safety net: an error response produced below the handlers (by a layer
/// or by axum itself) without a JSON body gets the API's error body,
/// keeping its status and headers (e.g. `Allow`).
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let (_, body) = ApiError::from_status(status).into_response().into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, body)
}
