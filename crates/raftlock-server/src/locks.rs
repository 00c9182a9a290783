//! `/v1/locks` and `/v1/fencing/check`.
//!
//! Lock names contain `/`, so `/v1/locks/{*rest}` is one wildcard route:
//! `POST` takes the last component as the action (`acquire`, `release`)
//! and the rest as the name; `GET` takes the whole rest as the name. A
//! lock named `a/acquire` is thus inspected at `GET /v1/locks/a/acquire`
//! and acquired at `POST /v1/locks/a/acquire/acquire`.

use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, QueueKind, QueueSummary, QueueView};
use raftlock_node::Grant;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::acquire::{Queue, Target};
use crate::auth::{Caller, Permission, Visibility};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, JsonBody, ReadConsistency, ReadQuery};
use crate::queue_routes::{self, Asked, QueueRoute};
use crate::state::AppState;

/// The lock operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(list, inspect, acquire_lock, release_lock, fencing_check))]
pub(crate) struct Api;

/// The lock routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/locks", get(list))
        .route("/v1/locks/{*rest}", get(inspect).post(action))
        .route("/v1/fencing/check", post(fencing_check))
}

/// Splits `name/action` at the last `/`; a bare action has an empty name.
pub(crate) fn split_action(rest: &str) -> (&str, &str) {
    rest.rsplit_once('/').unwrap_or(("", rest))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    session_id: String,
    /// How long to wait for the grant; `0` is a try-lock.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
    /// Lock-delay: after a holder's session expires or is closed, nobody
    /// is granted the lock for this long (a release skips it). The
    /// acquire that creates the lock's queue fixes it (0 to 60000);
    /// another value is refused while anyone is queued.
    #[schema(maximum = 60000)]
    lock_delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SessionRef)]
pub(crate) struct SessionBody {
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Granted {
    lock: String,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

/// `session_id` is `null` for a session of another principal
/// (docs/security.md); `principal` is `null` without tokens.
#[derive(Debug, Serialize, ToSchema)]
struct Holder {
    session_id: Option<String>,
    owner: String,
    principal: Option<String>,
    node: String,
    fencing_token: u64,
    since_revision: u64,
}

impl Holder {
    fn new(e: QueueEntryView, caller: &Caller) -> Self {
        let visibility = caller.visibility(e.principal.as_deref());
        Holder {
            session_id: visibility.session_id(e.session),
            since_revision: e.granted_revision.unwrap_or(e.fencing_token),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
            fencing_token: e.fencing_token,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
struct Waiter {
    session_id: Option<String>,
    owner: String,
    principal: Option<String>,
    node: String,
}

impl Waiter {
    fn new(e: QueueEntryView, caller: &Caller) -> Self {
        let visibility: Visibility = caller.visibility(e.principal.as_deref());
        Waiter {
            session_id: visibility.session_id(e.session),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Lock)]
struct LockBody {
    lock: String,
    holder: Option<Holder>,
    waiters: Vec<Waiter>,
    /// The lock's lock-delay (fixed by the acquire that created its
    /// queue); `null` for none.
    lock_delay_ms: Option<u64>,
    /// True while the lock is held off: its holder's session ended and
    /// nobody is granted it until the delay has passed (`holder` is then
    /// `null`). The end is timed by the leader, not kept in the state.
    held_off: bool,
}

#[derive(Debug, Serialize, ToSchema)]
struct LockLine {
    lock: String,
    holder: Option<Holder>,
    waiters: usize,
    /// As in `GET /v1/locks/{name}`: the lock's lock-delay, `null` for none.
    lock_delay_ms: Option<u64>,
    /// As in `GET /v1/locks/{name}`: a lost holder's delay runs.
    held_off: bool,
}

#[derive(Debug, Serialize, ToSchema)]
struct LockList {
    locks: Vec<LockLine>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only locks whose name starts with this.
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    consistency: ReadConsistency,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FencingBody {
    lock: String,
    fencing_token: u64,
}

#[derive(Debug, Serialize, ToSchema)]
struct FencingAnswer {
    valid: bool,
    current_token: Option<u64>,
}

/// The lock queue's acquire and release (`queue_routes.rs`).
struct Locks;

impl QueueRoute for Locks {
    const QUEUE: Queue = Queue::Plain(QueueKind::Lock);
    type Acquire = AcquireBody;
    type Granted = Granted;

    fn asked(body: &AcquireBody) -> Asked<'_> {
        Asked {
            target: Target::Plain(QueueKind::Lock, Ok(Vec::new())),
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: body.lock_delay_ms,
        }
    }

    fn granted(name: &str, _: &AcquireBody, grant: Grant) -> Granted {
        Granted {
            lock: name.to_string(),
            node: grant.node,
            fencing_token: grant.fencing_token,
            session_id: grant.session.to_string(),
            since_revision: grant.since_revision,
        }
    }
}

async fn action(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(rest): ApiPath<String>,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::dispatch((app, caller, rest, request), acquire_lock, release_lock).await
}

/// Acquires a lock: granted at once, after waiting in line up to
/// `wait_ms`, or refused (`lock_held` for a try-lock, `timeout`).
#[utoipa::path(post, path = "/v1/locks/{name}/acquire", tag = "locks",
    params(("name" = String, Path, description = "Lock name; may contain `/`")),
    request_body = AcquireBody,
    responses((status = 200, description = "Granted", body = Granted)))]
async fn acquire_lock(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::acquire::<Locks>(app, caller, name, request).await
}

/// Releases a lock, or cancels the session's wait for it.
#[utoipa::path(post, path = "/v1/locks/{name}/release", tag = "locks",
    params(("name" = String, Path, description = "Lock name; may contain `/`")),
    request_body = SessionBody,
    responses((status = 204, description = "Released")))]
async fn release_lock(
    app: AppState,
    caller: Caller,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    queue_routes::release::<Locks>(app, caller, name, request).await
}

/// Reads one queue after validating its name.
pub(crate) async fn read_queue(
    app: &AppState,
    kind: QueueKind,
    name: &str,
    consistency: ReadConsistency,
) -> Result<QueueView, ApiError> {
    validate_lock_name(name)?;
    Ok(app
        .node
        .read(consistency.into(), |s| s.queue(kind, name))
        .await?)
}

/// Lists queues whose name starts with `prefix` and that the caller may
/// read (a listing shows what the caller's grants cover, and is not
/// refused for the rest).
pub(crate) async fn read_queues(
    app: &AppState,
    caller: &Caller,
    kind: QueueKind,
    prefix: &str,
    consistency: ReadConsistency,
) -> Result<Vec<QueueSummary>, ApiError> {
    let mut queues = app
        .node
        .read(consistency.into(), |s| s.queues(kind, prefix))
        .await?;
    queues.retain(|q| caller.may(Permission::Read, &q.name));
    Ok(queues)
}

/// A lock's holder and its waiters in queue order.
#[utoipa::path(get, path = "/v1/locks/{name}", tag = "locks",
    params(("name" = String, Path, description = "Lock name; may contain `/`"), ReadQuery),
    responses((status = 200, description = "The lock", body = LockBody)))]
async fn inspect(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<LockBody>, ApiError> {
    validate_lock_name(&name)?;
    let (view, lock_delay_ms, held_off) = app
        .node
        .read(query.consistency.into(), |s| {
            let delay = s.lock_delay(&name);
            (
                s.queue(QueueKind::Lock, &name),
                (delay > 0).then_some(delay),
                s.lock_held_off(&name),
            )
        })
        .await?;
    Ok(Json(LockBody {
        lock_delay_ms,
        held_off,
        lock: name,
        holder: view.holder.map(|h| Holder::new(h, &caller)),
        waiters: view
            .waiters
            .into_iter()
            .map(|w| Waiter::new(w, &caller))
            .collect(),
    }))
}

/// The locks with a holder or waiters, by name prefix.
#[utoipa::path(get, path = "/v1/locks", tag = "locks",
    params(ListQuery),
    responses((status = 200, description = "The locks", body = LockList)))]
async fn list(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<LockList>, ApiError> {
    // The delays are read with the queues: one consistent view.
    let locks = app
        .node
        .read(query.consistency.into(), |s| {
            s.queues(QueueKind::Lock, &query.prefix)
                .into_iter()
                .filter(|q| caller.may(Permission::Read, &q.name))
                .map(|q| {
                    let delay = s.lock_delay(&q.name);
                    LockLine {
                        lock_delay_ms: (delay > 0).then_some(delay),
                        held_off: s.lock_held_off(&q.name),
                        holder: q.holder.map(|h| Holder::new(h, &caller)),
                        waiters: q.waiters,
                        lock: q.name,
                    }
                })
                .collect()
        })
        .await?;
    Ok(Json(LockList { locks }))
}

/// Is this fencing token still the lock's current one?
#[utoipa::path(post, path = "/v1/fencing/check", tag = "locks",
    request_body = FencingBody,
    responses((status = 200, description = "The answer", body = FencingAnswer)))]
async fn fencing_check(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<FencingBody>,
) -> Result<Json<FencingAnswer>, ApiError> {
    caller.require(Permission::Read, &body.lock)?;
    validate_lock_name(&body.lock)?;
    let (valid, current_token) = app
        .node
        .read(raftlock_node::Consistency::Linearizable, |s| {
            s.fencing_check(&body.lock, body.fencing_token)
        })
        .await?;
    Ok(Json(FencingAnswer {
        valid,
        current_token,
    }))
}
