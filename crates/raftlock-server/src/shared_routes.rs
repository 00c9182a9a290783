//! `/v1/rwlocks` and `/v1/semaphores`: the shared-queue primitives
//! (docs/api.md, "Read-write locks" and "Semaphores").
//!
//! Routed like `/v1/locks` (`locks.rs`): `POST {name}/acquire|release`,
//! `GET {name}`, and `GET` of the collection lists by prefix. One set of
//! generic handlers serves every shared kind: a kind is its request and
//! answer types and one [`SharedRoute`] (which says, through
//! `queue_routes.rs`'s [`QueueRoute`], how its body is asked and answered,
//! and how its inspection and listing are shaped); the [`shared_api!`]
//! table at the end gives each kind its routes and OpenAPI operations.
//! A new shared primitive is a kind and an entry of that table.
//!
//! Read-write locks: readers at the head of the queue share the lock, a
//! writer holds alone, and the queue is FIFO, so readers never starve a
//! writer. Semaphores: the first acquire fixes the number of permits while
//! anyone is queued; an acquire that names another number is refused
//! (`409 limit_mismatch`). At most that many sessions hold at once, in
//! FIFO order.

use axum::extract::State;
use axum::Json;
use raftlock_api::{Mode, QueueKind};
use raftlock_node::Grant;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery, ReadQuery};
use crate::queue_routes::{Asked, QueueRoute};
use crate::shared_locks::{self, ListQuery};
use crate::state::AppState;
use raftlock_api::shared::{RwLockView, SemaphoreView, SharedHolder, SharedLine, SharedQueue};

/// One shared kind behind `/v1/{segment}`: its acquire and release are
/// its [`QueueRoute`], its inspection and listing are shaped here.
pub(crate) trait SharedRoute: QueueRoute + Send + Sync + 'static {
    /// The answer to `GET /v1/{segment}/{name}`.
    type Body: Serialize + Send;
    /// The answer to `GET /v1/{segment}`.
    type List: Serialize + Send;

    /// The inspection of `name`.
    fn body(name: String, listing: SharedQueue) -> Self::Body;

    /// The listing of these lines.
    fn list(lines: Vec<SharedLine>) -> Self::List;
}

async fn inspect<K: SharedRoute>(
    State(app): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<K::Body>, ApiError> {
    let listing = shared_locks::inspect(&app, &caller, K::KIND, &name, query.consistency).await?;
    Ok(Json(K::body(name, listing)))
}

async fn list<K: SharedRoute>(
    State(app): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<K::List>, ApiError> {
    let lines = shared_locks::list(&app, &caller, K::KIND, &query).await?;
    Ok(Json(K::list(lines)))
}

// Read-write locks.

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = Mode)]
enum RwAccess {
    Read,
    Write,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RwLockAcquire)]
struct RwLockAcquire {
    session_id: String,
    mode: RwAccess,
    /// How long to wait for the grant; `0` tries once.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockGranted)]
struct RwLockGranted {
    rwlock: String,
    mode: RwAccess,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockLine)]
struct RwLockLine {
    rwlock: String,
    holders: Vec<SharedHolder>,
    /// Entries waiting behind the holders.
    waiters: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RwLockList)]
struct RwLockList {
    rwlocks: Vec<RwLockLine>,
}

/// The read-write lock.
struct RwLocks;

impl QueueRoute for RwLocks {
    const KIND: QueueKind = QueueKind::RwLock;
    type Acquire = RwLockAcquire;
    type Granted = RwLockGranted;

    fn asked(body: &RwLockAcquire) -> Asked<'_> {
        Asked {
            mode: match body.mode {
                RwAccess::Read => Mode::Read,
                RwAccess::Write => Mode::Write,
            },
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: None,
        }
    }

    fn granted(name: &str, body: &RwLockAcquire, grant: Grant) -> RwLockGranted {
        RwLockGranted {
            rwlock: name.to_string(),
            mode: body.mode,
            node: grant.node,
            fencing_token: grant.fencing_token,
            session_id: grant.session.to_string(),
            since_revision: grant.since_revision,
        }
    }
}

impl SharedRoute for RwLocks {
    type Body = RwLockView;
    type List = RwLockList;

    fn body(name: String, listing: SharedQueue) -> RwLockView {
        RwLockView {
            rwlock: name,
            holders: listing.holders,
            waiters: listing.waiters,
        }
    }

    fn list(lines: Vec<SharedLine>) -> RwLockList {
        let line = |line: SharedLine| RwLockLine {
            rwlock: line.name,
            holders: line.holders,
            waiters: line.waiters,
        };
        RwLockList {
            rwlocks: lines.into_iter().map(line).collect(),
        }
    }
}

// Semaphores.

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SemaphoreAcquire)]
struct SemaphoreAcquire {
    session_id: String,
    /// How many may hold at once; must match the limit in force.
    permits: u64,
    /// How long to wait for the grant; `0` tries once.
    wait_ms: Option<u64>,
    #[serde(default)]
    keep_queued: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreGranted)]
struct SemaphoreGranted {
    semaphore: String,
    permits: u64,
    node: String,
    fencing_token: u64,
    session_id: String,
    since_revision: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreLine)]
struct SemaphoreLine {
    semaphore: String,
    /// `null` while nobody is queued.
    permits: Option<u64>,
    holders: Vec<SharedHolder>,
    /// Entries waiting behind the holders.
    waiters: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SemaphoreList)]
struct SemaphoreList {
    semaphores: Vec<SemaphoreLine>,
}

/// The counting semaphore.
struct Semaphores;

impl QueueRoute for Semaphores {
    const KIND: QueueKind = QueueKind::Semaphore;
    type Acquire = SemaphoreAcquire;
    type Granted = SemaphoreGranted;

    fn asked(body: &SemaphoreAcquire) -> Asked<'_> {
        Asked {
            mode: Mode::Permits(body.permits),
            session_id: &body.session_id,
            wait_ms: body.wait_ms,
            keep_queued: body.keep_queued,
            lock_delay_ms: None,
        }
    }

    fn granted(name: &str, body: &SemaphoreAcquire, grant: Grant) -> SemaphoreGranted {
        SemaphoreGranted {
            semaphore: name.to_string(),
            permits: body.permits,
            node: grant.node,
            fencing_token: grant.fencing_token,
            session_id: grant.session.to_string(),
            since_revision: grant.since_revision,
        }
    }
}

impl SharedRoute for Semaphores {
    type Body = SemaphoreView;
    type List = SemaphoreList;

    fn body(name: String, listing: SharedQueue) -> SemaphoreView {
        SemaphoreView {
            semaphore: name,
            permits: listing.limit,
            holders: listing.holders,
            waiters: listing.waiters,
        }
    }

    fn list(lines: Vec<SharedLine>) -> SemaphoreList {
        let line = |line: SharedLine| SemaphoreLine {
            semaphore: line.name,
            permits: line.limit,
            holders: line.holders,
            waiters: line.waiters,
        };
        SemaphoreList {
            semaphores: lines.into_iter().map(line).collect(),
        }
    }
}

/// Each kind's module: its `routes()` and its OpenAPI operations (`Api`).
/// The handlers named here are what the document describes (their names
/// are its operation ids); each calls the generic handler of its kind.
macro_rules! shared_api {
    ($(
        mod $module:ident: $kind:ident, tag $tag:literal, name $name:literal {
            $(#[doc = $acquire_doc:literal])*
            post $acquire_path:literal => $acquire:ident($acquire_body:ident) -> $granted:ident;
            $(#[doc = $release_doc:literal])*
            post $release_path:literal => $release:ident;
            $(#[doc = $inspect_doc:literal])*
            get $inspect_path:literal => inspect -> $body:ident, $inspect_said:literal;
            $(#[doc = $list_doc:literal])*
            get $list_path:literal => list -> $list:ident, $list_said:literal;
        }
    )*) => {$(
        pub(crate) mod $module {
            use axum::routing::get;
            use axum::Router;
            use utoipa::OpenApi;

            use super::*;
            use crate::locks::SessionBody;
            use crate::queue_routes;

            /// This kind's operations, for the OpenAPI document.
            #[derive(OpenApi)]
            #[openapi(paths(list, inspect, $acquire, $release))]
            pub(crate) struct Api;

            /// This kind's routes: the listing, the inspection, the actions.
            pub(crate) fn routes() -> Router<AppState> {
                let base = format!("/v1/{}", <$kind as QueueRoute>::KIND.segment());
                Router::new()
                    .route(&base, get(list))
                    .route(&format!("{base}/{{*rest}}"), get(inspect).post(action))
            }

            queue_routes::queue_actions! {
                $kind, tag $tag, name $name;
                $(#[doc = $acquire_doc])*
                post $acquire_path => $acquire($acquire_body) -> $granted;
                $(#[doc = $release_doc])*
                post $release_path => $release;
            }

            $(#[doc = $inspect_doc])*
            #[utoipa::path(get, path = $inspect_path, tag = $tag,
                params(("name" = String, Path, description = $name), ReadQuery),
                responses((status = 200, description = $inspect_said, body = $body)))]
            async fn inspect(
                app: State<AppState>,
                caller: Caller,
                name: ApiPath<String>,
                query: ApiQuery<ReadQuery>,
            ) -> Result<Json<$body>, ApiError> {
                super::inspect::<$kind>(app, caller, name, query).await
            }

            $(#[doc = $list_doc])*
            #[utoipa::path(get, path = $list_path, tag = $tag,
                params(ListQuery),
                responses((status = 200, description = $list_said, body = $list)))]
            async fn list(
                app: State<AppState>,
                caller: Caller,
                query: ApiQuery<ListQuery>,
            ) -> Result<Json<$list>, ApiError> {
                super::list::<$kind>(app, caller, query).await
            }
        }
    )*};
}

shared_api! {
    mod rwlocks: RwLocks, tag "rwlocks", name "Lock name; may contain `/`" {
        /// Takes a read-write lock to read (shared with the readers at the head
        /// of the queue) or to write (alone), waiting in FIFO order.
        post "/v1/rwlocks/{name}/acquire" => acquire_rwlock(RwLockAcquire) -> RwLockGranted;
        /// Releases a read-write lock, or cancels the session's wait for it.
        post "/v1/rwlocks/{name}/release" => release_rwlock;
        /// A read-write lock's holders and waiters, each in queue order.
        get "/v1/rwlocks/{name}" => inspect -> RwLockView, "The read-write lock";
        /// The read-write locks with holders or waiters, by name prefix.
        get "/v1/rwlocks" => list -> RwLockList, "The read-write locks";
    }
    mod semaphores: Semaphores, tag "semaphores", name "Semaphore name; may contain `/`" {
        /// Takes one of a semaphore's places, waiting in FIFO order.
        post "/v1/semaphores/{name}/acquire" => acquire_semaphore(SemaphoreAcquire) -> SemaphoreGranted;
        /// Releases the session's place in a semaphore, or cancels its wait.
        post "/v1/semaphores/{name}/release" => release_semaphore;
        /// A semaphore's limit, holders and waiters.
        get "/v1/semaphores/{name}" => inspect -> SemaphoreView, "The semaphore";
        /// The semaphores with holders or waiters, by name prefix.
        get "/v1/semaphores" => list -> SemaphoreList, "The semaphores";
    }
}
