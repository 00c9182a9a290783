//! What `/v1/rwlocks` and `/v1/semaphores` share: the holder listing
//! (their acquire and release are `queue_routes.rs`'s).

use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, SharedKind};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
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
    let holders = view
        .holders
        .into_iter()
        .map(|e| SharedHolder {
            session_id: caller
                .visibility(e.principal.as_deref())
                .session_id(e.session),
            mode: mode(kind, &e),
            since_revision: e.granted_revision.unwrap_or(e.fencing_token),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
            fencing_token: e.fencing_token,
        })
        .collect();
    let waiters = view
        .waiters
        .into_iter()
        .map(|e| SharedWaiter {
            session_id: caller
                .visibility(e.principal.as_deref())
                .session_id(e.session),
            mode: mode(kind, &e),
            owner: e.owner,
            principal: e.principal,
            node: e.node,
        })
        .collect();
    Ok(SharedListing {
        holders,
        waiters,
        limit: view.limit,
    })
}
