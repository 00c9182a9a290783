//! What `/v1/rwlocks` and `/v1/semaphores` share: the long-poll around the
//! node's acquire (validation, admission, shutdown, metrics, as
//! `acquire.rs` does for locks), release, and the holder listing.

use std::future::Future;
use std::time::Instant;

use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, SessionId, SharedKind};
use raftlock_node::{Consistency, Grant, NodeError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{parse_session, ReadConsistency};
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

/// Checks the session and the name; returns the session and the wait.
pub(crate) async fn admit(
    app: &AppState,
    caller: &Caller,
    kind: SharedKind,
    name: &str,
    session_id: &str,
    wait_ms: Option<u64>,
) -> Result<(SessionId, std::time::Duration), ApiError> {
    let session = parse_session(session_id)?;
    caller.require_session(app, session).await?;
    let checked = validate_lock_name(name)
        .map_err(ApiError::from)
        .and_then(|()| app.wait(wait_ms));
    let wait = app.session_wins(session, checked).await?;
    if !wait.is_zero() {
        let max = app.config.max_waiters_per_lock;
        let (queued, mine) = app
            .node
            .read(Consistency::Stale, |s| s.shared_place(kind, name, session))
            .await?;
        if !mine && queued > max {
            let err = ApiError::too_many_requests(format!(
                "{name} has {queued} entries, more than its waiter limit \
                 (api.max_waiters_per_lock = {max})"
            ));
            app.session_wins(session, Err::<(), _>(err)).await?;
        }
    }
    Ok((session, wait))
}

/// Runs a node acquire as a long-poll: ends with `503 shutting_down` when
/// the server stops (the queued entry stays for the client's retry, as
/// for locks), and records the outcome in the metrics.
pub(crate) async fn long_poll<T>(
    app: &AppState,
    keep_queued: bool,
    acquire: impl Future<Output = Result<T, NodeError>>,
) -> Result<T, ApiError> {
    let started = Instant::now();
    let outcome = tokio::select! {
        result = acquire => match result {
            Err(NodeError::Timeout) if keep_queued => Err(ApiError::timeout_still_queued()),
            other => other.map_err(ApiError::from),
        },
        _ = app.stopping() => Err(ApiError::shutting_down()),
    };
    match &outcome {
        Ok(_) => app.metrics.granted(started.elapsed()),
        Err(e) => app.metrics.failed(e.code()),
    }
    outcome
}

/// Releases (or cancels the wait of) the session's entry.
pub(crate) async fn release(
    app: &AppState,
    caller: &Caller,
    kind: SharedKind,
    name: &str,
    session_id: &str,
) -> Result<(), ApiError> {
    let session = parse_session(session_id)?;
    caller.require_session(app, session).await?;
    app.session_wins(session, validate_lock_name(name).map_err(ApiError::from))
        .await?;
    app.node.release_shared(kind, name, session).await?;
    Ok(())
}

/// The parts of a grant every answer carries.
pub(crate) struct SharedGrant {
    pub node: String,
    pub fencing_token: u64,
    pub session_id: String,
    pub since_revision: u64,
}

impl From<Grant> for SharedGrant {
    fn from(g: Grant) -> Self {
        SharedGrant {
            node: g.node,
            fencing_token: g.fencing_token,
            session_id: g.session.to_string(),
            since_revision: g.since_revision,
        }
    }
}
