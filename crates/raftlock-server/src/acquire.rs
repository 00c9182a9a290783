//! The long-poll and release shared by every queue route: lock acquire,
//! election campaign, read-write lock and semaphore acquire (one generic
//! [`acquire`] over the contract's kind and mode), and multi-locks
//! ([`long_poll`]).
//!
//! The node does the waiting (predecessor-only wake-ups, withdrawal on
//! timeout). This module adds what only the HTTP edge knows about:
//! - the request's wait, validated against the configured maximum, and the
//!   "unknown session wins" rule for invalid requests;
//! - the waiters-per-lock admission limit (`limits.rs`);
//! - graceful shutdown: a long-poll ends with `503 shutting_down` instead
//!   of holding the server's shutdown up for minutes;
//! - metrics: wait time of grants, failures by error code.
//!
//! A client that goes away (disconnect) drops the request future, which
//! unregisters the waiter; its queued node deliberately stays. Withdrawing
//! it would race with the client's retry: a retry of the same session
//! re-attaches to the same node (idempotent acquire, docs/design.md) and may
//! already have been told it holds the lock when the withdrawal deletes
//! the node and grants it to the next in line — two holders. A client that
//! abandons a wait releases (cancels) or closes its session instead.

use std::future::Future;
use std::time::Instant;

use raftlock_api::{Mode, QueueKind};
use raftlock_core::path::validate_lock_name;
use raftlock_node::{AcquireOptions, Enqueue, Grant, NodeError};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// One acquire or campaign as the request stated it, not yet validated.
pub(crate) struct AcquireRequest<'a> {
    /// Who asks: the session must be theirs.
    pub caller: &'a Caller,
    /// The primitive, and how the entry is to hold it.
    pub kind: QueueKind,
    pub mode: Mode,
    /// The entry's data (an election's value), or why it was refused.
    pub data: Result<Vec<u8>, ApiError>,
    pub name: &'a str,
    pub session_id: &'a str,
    pub wait_ms: Option<u64>,
    /// On timeout, keep the session's waiting node queued (long polls that
    /// keep their place in line) instead of withdrawing it.
    pub keep_queued: bool,
    /// A lock's lock-delay, if the request names one (locks only).
    pub lock_delay_ms: Option<u64>,
}

/// Validates, queues and waits; records the outcome in the metrics.
pub(crate) async fn acquire(app: &AppState, req: AcquireRequest<'_>) -> Result<Grant, ApiError> {
    timed(app, run(app, req)).await
}

async fn run(app: &AppState, req: AcquireRequest<'_>) -> Result<Grant, ApiError> {
    let session = req.caller.own_session(app, req.session_id).await?;
    let checked = validate_lock_name(req.name)
        .map_err(ApiError::from)
        .and_then(|()| {
            req.lock_delay_ms
                .map_or(Ok(()), raftlock_core::validate_lock_delay)
                .map_err(ApiError::from)
        })
        .and_then(|()| app.wait(req.wait_ms))
        .and_then(|wait| req.data.map(|data| (wait, data)));
    let (wait, data) = app.session_wins(session, checked).await?;
    // After validation, so bad input is refused as such; an unknown
    // session still wins over a full queue.
    let admitted =
        crate::overload::limits::check_queue(app, req.kind, req.name, session, !wait.is_zero());
    app.session_wins(session, admitted.await).await?;
    let options = AcquireOptions {
        wait,
        keep_queued: req.keep_queued,
    };
    let ask = Enqueue {
        kind: req.kind,
        mode: req.mode,
        data,
        lock_delay_ms: req.lock_delay_ms,
    };
    let grant = app.node.acquire_queue(req.name, session, ask, options);
    poll(app, req.keep_queued, grant).await
}

/// Runs a node acquire as a long-poll (see [`poll`]) and records the
/// outcome in the metrics: for acquires validated by their route
/// (multi-locks).
pub(crate) async fn long_poll<T>(
    app: &AppState,
    keep_queued: bool,
    acquire: impl Future<Output = Result<T, NodeError>>,
) -> Result<T, ApiError> {
    timed(app, poll(app, keep_queued, acquire)).await
}

/// Records how `outcome` ends: the wait of a grant, or the error code.
async fn timed<T>(
    app: &AppState,
    outcome: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let started = Instant::now();
    let outcome = outcome.await;
    match &outcome {
        Ok(_) => app.metrics.granted(started.elapsed()),
        Err(e) => app.metrics.failed(e.code()),
    }
    outcome
}

/// Ends a node acquire with `503 shutting_down` when the server stops.
/// The queued node stays, as when the node itself shuts down: the client
/// retries elsewhere and finds it (idempotent acquire).
async fn poll<T>(
    app: &AppState,
    keep_queued: bool,
    acquire: impl Future<Output = Result<T, NodeError>>,
) -> Result<T, ApiError> {
    tokio::select! {
        result = acquire => match result {
            Err(NodeError::Timeout) if keep_queued => Err(ApiError::timeout_still_queued()),
            other => other.map_err(ApiError::from),
        },
        _ = app.stopping() => Err(ApiError::shutting_down()),
    }
}

/// Release (or cancel a wait, or resign): deletes the session's entry.
pub(crate) async fn release(
    app: &AppState,
    caller: &Caller,
    kind: QueueKind,
    name: &str,
    session_id: &str,
) -> Result<(), ApiError> {
    let session = caller.own_session(app, session_id).await?;
    app.session_wins(session, validate_lock_name(name).map_err(ApiError::from))
        .await?;
    app.node.release_queue(kind, name, session).await?;
    Ok(())
}
