//! `POST /v1/{locks|rwlocks|semaphores}/{name}/{acquire|release}`: the
//! action dispatch, acquire and release that the three resources share.
//!
//! Each resource module keeps its request and answer types and one
//! [`QueueRoute`] implementation saying how its body becomes an acquire
//! (a mode of the contract's [`Mode`]) and how a grant is answered; its
//! OpenAPI-annotated handlers, which only call [`acquire`] and [`release`]
//! here, are written once, by `queue_actions!`.

use std::future::Future;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftlock_api::{Mode, QueueKind};
use raftlock_node::Grant;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::acquire::{self, AcquireRequest};
use crate::auth::Caller;
use crate::error::{no_such_action, ApiError};
use crate::extract::JsonBody;
use crate::locks::{split_action, SessionBody};
use crate::state::AppState;

/// What an acquire body asks for.
pub(crate) struct Asked<'a> {
    /// How the entry is to hold the queue.
    pub mode: Mode,
    pub session_id: &'a str,
    pub wait_ms: Option<u64>,
    pub keep_queued: bool,
    /// A lock's lock-delay (locks only; `None` elsewhere).
    pub lock_delay_ms: Option<u64>,
}

/// One kind of queue behind `/v1/{kind}/{name}/acquire|release`.
pub(crate) trait QueueRoute {
    /// The primitive.
    const KIND: QueueKind;
    /// The acquire request body.
    type Acquire: DeserializeOwned + Send + Sync;
    /// The `200` answer to a granted acquire.
    type Granted: Serialize;

    /// The acquire the body asks for.
    fn asked(body: &Self::Acquire) -> Asked<'_>;

    /// The answer to a grant of `name` asked by `body`.
    fn granted(name: &str, body: &Self::Acquire, grant: Grant) -> Self::Granted;
}

/// Splits `{name}/{action}` and calls the route's acquire or release
/// handler; any other action is `405` (its `GET` is the inspection).
pub(crate) async fn dispatch<A, R>(
    (app, caller, rest, request): (AppState, Caller, String, Request),
    acquire: impl FnOnce(AppState, Caller, String, Request) -> A,
    release: impl FnOnce(AppState, Caller, String, Request) -> R,
) -> Result<Response, ApiError>
where
    A: Future<Output = Result<Response, ApiError>>,
    R: Future<Output = Result<Response, ApiError>>,
{
    let (name, action) = split_action(&rest);
    match action {
        "acquire" => acquire(app, caller, name.to_string(), request).await,
        "release" => release(app, caller, name.to_string(), request).await,
        other => Ok(no_such_action(other, "GET,HEAD", "acquire, release")),
    }
}

/// Reads the route's acquire body, queues and waits (`acquire.rs`), and
/// answers the grant.
pub(crate) async fn acquire<Q: QueueRoute>(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    let JsonBody(body) = JsonBody::<Q::Acquire>::from_request(request, &app).await?;
    let asked = Q::asked(&body);
    let grant = acquire::acquire(
        &app,
        AcquireRequest {
            caller: &caller,
            kind: Q::KIND,
            mode: asked.mode,
            data: Ok(Vec::new()),
            name: &name,
            session_id: asked.session_id,
            wait_ms: asked.wait_ms,
            keep_queued: asked.keep_queued,
            lock_delay_ms: asked.lock_delay_ms,
        },
    )
    .await?;
    Ok(Json(Q::granted(&name, &body, grant)).into_response())
}

/// Releases the session's entry, or cancels its wait: `204`.
pub(crate) async fn release<Q: QueueRoute>(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    let JsonBody(body) = JsonBody::<SessionBody>::from_request(request, &app).await?;
    acquire::release(&app, &caller, Q::KIND, &name, &body.session_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A route's `POST {name}/acquire|release`: `action`, which dispatches
/// to the two handlers named here, and those handlers with their OpenAPI
/// annotations (their names are the document's operation ids). The caller
/// has `SessionBody` in scope, the release body of the document.
macro_rules! queue_actions {
    (
        $route:ident, tag $tag:literal, name $name:literal;
        $(#[doc = $acquire_doc:literal])*
        post $acquire_path:literal => $acquire:ident($acquire_body:ident) -> $granted:ident;
        $(#[doc = $release_doc:literal])*
        post $release_path:literal => $release:ident;
    ) => {
        async fn action(
            axum::extract::State(app): axum::extract::State<$crate::state::AppState>,
            caller: $crate::auth::Caller,
            $crate::extract::ApiPath(rest): $crate::extract::ApiPath<String>,
            request: axum::extract::Request,
        ) -> Result<axum::response::Response, $crate::error::ApiError> {
            let request = (app, caller, rest, request);
            $crate::queue_routes::dispatch(request, $acquire, $release).await
        }

        $(#[doc = $acquire_doc])*
        #[utoipa::path(post, path = $acquire_path, tag = $tag,
            params(("name" = String, Path, description = $name)),
            request_body = $acquire_body,
            responses((status = 200, description = "Granted", body = $granted)))]
        async fn $acquire(
            app: $crate::state::AppState,
            caller: $crate::auth::Caller,
            name: String,
            request: axum::extract::Request,
        ) -> Result<axum::response::Response, $crate::error::ApiError> {
            $crate::queue_routes::acquire::<$route>(app, caller, name, request).await
        }

        $(#[doc = $release_doc])*
        #[utoipa::path(post, path = $release_path, tag = $tag,
            params(("name" = String, Path, description = $name)),
            request_body = SessionBody,
            responses((status = 204, description = "Released")))]
        async fn $release(
            app: $crate::state::AppState,
            caller: $crate::auth::Caller,
            name: String,
            request: axum::extract::Request,
        ) -> Result<axum::response::Response, $crate::error::ApiError> {
            $crate::queue_routes::release::<$route>(app, caller, name, request).await
        }
    };
}
pub(crate) use queue_actions;
