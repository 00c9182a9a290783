//! What `/v1/rwlocks` and `/v1/semaphores` share: the inspection of one
//! and the listing by prefix, with the same holder and waiter entries
//! (their acquire and release are `queue_routes.rs`'s).

use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, SharedKind};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Caller, Permission};
use crate::error::ApiError;
use crate::extract::ReadConsistency;
use crate::state::AppState;

/// One granted entry. `session_id` is `null` for a session of another
/// principal (docs/security.md).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SharedHolder {
    session_id: Option<String>,
    owner: String,
    principal: Option<String>,
    node: String,
    /// `read`/`write` for a read-write lock; absent for a semaphore.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    fencing_token: u64,
    since_revision: u64,
}

/// One waiting entry.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SharedWaiter {
    session_id: Option<String>,
    owner: String,
    principal: Option<String>,
    node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
}

fn mode(kind: SharedKind, e: &QueueEntryView) -> Option<String> {
    (kind == SharedKind::RwLock).then(|| String::from_utf8_lossy(&e.data).into_owned())
}

impl SharedHolder {
    fn new(kind: SharedKind, e: QueueEntryView, caller: &Caller) -> Self {
        SharedHolder {
            session_id: caller
                .visibility(e.principal.as_deref())
                .session_id(e.session),
            mode: mode(kind, &e),
            since_revision: e.granted_revision.unwrap_or(e.fencing_token),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
            fencing_token: e.fencing_token,
        }
    }
}

impl SharedWaiter {
    fn new(kind: SharedKind, e: QueueEntryView, caller: &Caller) -> Self {
        SharedWaiter {
            session_id: caller
                .visibility(e.principal.as_deref())
                .session_id(e.session),
            mode: mode(kind, &e),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
        }
    }
}

/// Holders and waiters of one read-write lock or semaphore.
pub(crate) struct SharedListing {
    pub holders: Vec<SharedHolder>,
    pub waiters: Vec<SharedWaiter>,
    pub limit: Option<u64>,
}

/// Reads one read-write lock or semaphore after validating its name.
pub(crate) async fn inspect(
    app: &AppState,
    caller: &Caller,
    kind: SharedKind,
    name: &str,
    consistency: ReadConsistency,
) -> Result<SharedListing, ApiError> {
    validate_lock_name(name)?;
    let view = app
        .node
        .read(consistency.into(), |s| s.shared_queue(kind, name))
        .await?;
    Ok(SharedListing {
        holders: view
            .holders
            .into_iter()
            .map(|e| SharedHolder::new(kind, e, caller))
            .collect(),
        waiters: view
            .waiters
            .into_iter()
            .map(|e| SharedWaiter::new(kind, e, caller))
            .collect(),
        limit: view.limit,
    })
}

/// `GET /v1/rwlocks` and `GET /v1/semaphores`: which names to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only names that start with this.
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub consistency: ReadConsistency,
}

/// One read-write lock or semaphore of a listing.
pub(crate) struct SharedLine {
    pub name: String,
    pub holders: Vec<SharedHolder>,
    pub waiters: usize,
    pub limit: Option<u64>,
}

/// The read-write locks or semaphores with holders or waiters whose name
/// starts with the query's prefix and that the caller may read (as
/// `locks::read_queues`: a listing shows what the caller's grants cover).
pub(crate) async fn list(
    app: &AppState,
    caller: &Caller,
    kind: SharedKind,
    query: &ListQuery,
) -> Result<Vec<SharedLine>, ApiError> {
    let mut queues = app
        .node
        .read(query.consistency.into(), |s| {
            s.shared_queues(kind, &query.prefix)
        })
        .await?;
    queues.retain(|q| caller.may(Permission::Read, &q.name));
    Ok(queues
        .into_iter()
        .map(|q| SharedLine {
            name: q.name,
            holders: q
                .holders
                .into_iter()
                .map(|e| SharedHolder::new(kind, e, caller))
                .collect(),
            waiters: q.waiters,
            limit: q.limit,
        })
        .collect())
}
