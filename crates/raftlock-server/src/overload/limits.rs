//! Admission limits that keep one client from filling a shared cluster:
//! sessions in total and per owner (the label, or with tokens the
//! principal), waiters per lock or election.
//! Over a limit the answer is `429 too_many_requests` with `Retry-After`,
//! and nothing is proposed.
//!
//! # Where the check runs, and why there
//!
//! The member that takes the request checks its own replica (a stale
//! read: no Raft round trip) before it proposes the write. The other
//! place, a check in the core state machine at apply time, would be
//! exact, but the limits would then have to travel inside every
//! `OpenSession`/`Acquire` log entry (apply must not read a member's own
//! config, or two members with different files would diverge), which
//! changes the log format, and a per-owner count would need an owner index
//! in the replicated state. The price of checking at the edge: opens or
//! acquires that are in flight at the same moment all see the same count,
//! so the cluster can overshoot a limit by as many as run concurrently
//! (plus what a follower's replica has not applied yet). That is fine for
//! what these limits are for (bounding memory and queue length within a
//! margin), not for quotas that must be exact.

use raftlock_api::QueueKind;
use raftlock_core::SessionId;

use crate::error::ApiError;
use crate::state::AppState;

/// Refuses a new session when the cluster, or the owner, is full. With
/// bearer tokens the owner is the principal (the token's name, which the
/// client cannot choose); without, the client's `owner` label.
pub(crate) async fn check_open(
    app: &AppState,
    owner: &str,
    principal: Option<&str>,
) -> Result<(), ApiError> {
    let max_total = app.config.max_sessions;
    let max_owned = app.config.max_sessions_per_owner;
    let counts = app
        .node
        .session_counts(owner, principal, max_owned.is_some())
        .await?;
    let (total, owned) = (counts.total, max_owned.map(|_| counts.owned));
    let owner = principal.unwrap_or(owner);
    if total >= max_total {
        return Err(ApiError::too_many_requests(format!(
            "the cluster holds {total} sessions, its limit (api.max_sessions = {max_total}); \
             close unused sessions or retry later"
        )));
    }
    if let (Some(max), Some(owned)) = (max_owned, owned) {
        if owned >= max {
            let shown: String = owner.chars().take(64).collect();
            return Err(ApiError::too_many_requests(format!(
                "owner {shown:?} holds {owned} sessions, its limit \
                 (api.max_sessions_per_owner = {max})"
            )));
        }
    }
    Ok(())
}

/// Refuses a waiting acquire or campaign that would queue one waiter too
/// many (read-write locks and semaphores: their holders counted). A
/// session already in the queue passes (its retry re-attaches to its node
/// and adds nothing), and so does a try-lock (it never queues).
pub(crate) async fn check_queue(
    app: &AppState,
    kind: QueueKind,
    name: &str,
    session: SessionId,
    waits: bool,
) -> Result<(), ApiError> {
    if !waits {
        return Ok(());
    }
    let max = app.config.max_waiters_per_lock;
    let (queued, mine) = app.node.queue_place(kind, name, session).await?;
    // `queued` counts the holder: a new node would be waiter number `queued`.
    if !mine && queued > max {
        let what = kind.noun();
        return Err(ApiError::too_many_requests(if !kind.is_shared() {
            format!(
                "{what} {name} has {} waiters, its limit (api.max_waiters_per_lock = {max})",
                queued - 1
            )
        } else {
            // Several may hold: the count is of entries, not waiters.
            format!(
                "{what} {name} has {queued} entries, more than its waiter limit \
                 (api.max_waiters_per_lock = {max})"
            )
        }));
    }
    Ok(())
}
