//! What `Mutex` and `Election` share: waiting in a queue in long polls,
//! and never leaving a node behind when the wait is abandoned.
//!
//! Each recipe handle serializes its own queue operations behind a local
//! async mutex (one node per session and queue on the server, so two
//! local callers would otherwise share one grant). A wait whose future is
//! dropped, or a guard dropped without `unlock()`, releases its node in a
//! spawned task that keeps holding the local mutex until the release is
//! answered: the handle's next `lock()` cannot be handed the very node
//! that is being released.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use crate::error::{ClientError, Result};
use crate::session::Shared;
use crate::types::{Grant, Poll};

/// Longest single acquire/campaign request. A longer wait repeats it with
/// `keep_queued` on every poll but the last, so the server keeps the
/// session's node between polls and the wait keeps its place in line
/// (FIFO) however long it lasts. The API's default cap on `wait_ms` is 5
/// minutes; a minute keeps an idle connection well inside common proxy
/// timeouts.
pub(crate) const LONG_POLL: Duration = Duration::from_secs(60);

/// Which queue, and what to queue with.
#[derive(Clone, Copy)]
pub(crate) enum Kind<'a> {
    Lock { lock_delay: Option<Duration> },
    Election { value: &'a str },
}

/// How long a caller is prepared to wait.
#[derive(Clone, Copy)]
pub(crate) enum Wait {
    /// Until granted (or the session is lost).
    Forever,
    /// Until this instant.
    Until(Instant),
    /// Not at all: a try-lock.
    Try,
}

impl Wait {
    pub(crate) fn timeout(d: Duration) -> Wait {
        if d.is_zero() {
            Wait::Try
        } else {
            Wait::Until(Instant::now() + d)
        }
    }
}

/// Takes the handle's local mutex within the caller's patience.
pub(crate) async fn local_turn(
    local: &Arc<tokio::sync::Mutex<()>>,
    wait: Wait,
) -> Result<OwnedMutexGuard<()>> {
    let busy = "another caller of this handle holds or is acquiring it";
    match wait {
        Wait::Forever => Ok(local.clone().lock_owned().await),
        Wait::Until(deadline) => tokio::time::timeout_at(deadline, local.clone().lock_owned())
            .await
            .map_err(|_| ClientError::Timeout(busy.into())),
        Wait::Try => local
            .clone()
            .try_lock_owned()
            .map_err(|_| ClientError::LockHeld(busy.into())),
    }
}

/// Releases (or resigns) `name` in a spawned task, then lets go of the
/// local mutex. Without a runtime, the session's end cleans up instead.
pub(crate) fn spawn_release(
    session: Arc<Shared>,
    name: String,
    election: bool,
    local: Option<OwnedMutexGuard<()>>,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let client = &session.client;
        let result = if election {
            client.resign(&name, session.id).await
        } else {
            client.release(&name, session.id).await
        };
        if let Err(e) = session.note(result) {
            tracing::debug!(name, "background release: {e}");
        }
        drop(local);
    });
}

/// A wait in progress: if dropped before [`Pending::granted`], releases
/// whatever node the wait may have queued.
pub(crate) struct Pending {
    session: Arc<Shared>,
    name: String,
    election: bool,
    local: Option<OwnedMutexGuard<()>>,
    /// A poll ended with the node kept queued (`keep_queued`) and no later
    /// poll withdrew it: a failed wait must release it.
    kept_queued: bool,
}

impl Pending {
    pub(crate) fn new(
        session: Arc<Shared>,
        name: &str,
        election: bool,
        local: OwnedMutexGuard<()>,
    ) -> Pending {
        Pending {
            session,
            name: name.to_string(),
            election,
            local: Some(local),
            kept_queued: false,
        }
    }

    /// The wait ended. Granted: hand back the local turn. A definite
    /// refusal: nothing is queued (the server withdrew it), let go. An
    /// unknown outcome, a lost session or a node an earlier poll kept
    /// queued: a node may remain, so release it in the background (by
    /// dropping `self` armed).
    pub(crate) fn finish(mut self, result: &Result<Grant>) -> Option<OwnedMutexGuard<()>> {
        finish_turn(&mut self.local, self.kept_queued, result)
    }
}

/// The end of a wait holding the local turn `local`: granted, the turn is
/// handed back; a definite refusal lets it go; otherwise (`kept_queued`,
/// an unknown outcome, a lost session) it stays in `local`, for the
/// caller's drop to release in the background with whatever is queued.
pub(crate) fn finish_turn<T>(
    local: &mut Option<OwnedMutexGuard<()>>,
    kept_queued: bool,
    result: &Result<T>,
) -> Option<OwnedMutexGuard<()>> {
    match result {
        Ok(_) => local.take(),
        Err(_) if kept_queued => None,
        Err(e) if e.outcome_unknown() || matches!(e, ClientError::SessionLost(_)) => None,
        Err(_) => {
            local.take();
            None
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(local) = self.local.take() {
            let session = self.session.clone();
            spawn_release(session, self.name.clone(), self.election, Some(local));
        }
    }
}

/// Queues the session and waits for the grant in long polls until `wait`
/// runs out; every poll but the last keeps the node queued, so the wait
/// keeps its place in line. Gives up with [`ClientError::SessionLost`] as
/// soon as the session is lost. `pending` learns whether a node may be
/// left queued when this fails.
pub(crate) async fn wait_for_grant(
    session: &Shared,
    name: &str,
    kind: Kind<'_>,
    wait: Wait,
    pending: &mut Pending,
) -> Result<Grant> {
    let client = &session.client;
    let attempt = move |poll: Poll| match kind {
        Kind::Lock { lock_delay } => client.acquire(name, session.id, Poll { lock_delay, ..poll }),
        Kind::Election { value } => client.campaign(name, session.id, value, poll),
    };
    let what = || name.to_string();
    poll_until_granted(session, wait, what, &mut pending.kept_queued, attempt).await
}

/// Polls `attempt` until it grants or `wait` runs out; every poll but the
/// last keeps the node queued. `kept_queued` learns whether a node may be
/// left queued when this fails; `what` names the wait in a timeout.
pub(crate) async fn poll_until_granted<T, Fut>(
    session: &Shared,
    wait: Wait,
    what: impl Fn() -> String,
    kept_queued: &mut bool,
    mut attempt: impl FnMut(Poll) -> Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<T>>,
{
    let mut first = true;
    loop {
        if let Some(reason) = session.lost_reason() {
            return Err(ClientError::SessionLost(reason));
        }
        let poll = match wait {
            Wait::Forever => Poll {
                wait: LONG_POLL,
                keep_queued: true,
                lock_delay: None,
            },
            Wait::Try => Poll::from(Duration::ZERO),
            Wait::Until(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() && !first {
                    return Err(ClientError::Timeout(format!("waiting for {}", what())));
                }
                Poll {
                    wait: left.min(LONG_POLL),
                    // The last poll withdraws the node when it times out.
                    keep_queued: left > LONG_POLL,
                    lock_delay: None,
                }
            }
        };
        first = false;
        let result = tokio::select! {
            reason = session.lost() => return Err(ClientError::SessionLost(reason)),
            result = attempt(poll) => result,
        };
        match session.note(result) {
            Err(ClientError::Timeout(_)) if !matches!(wait, Wait::Try) => {
                // Kept queued, or withdrawn by the server with this poll.
                *kept_queued = poll.keep_queued;
                continue;
            }
            other => return other,
        }
    }
}
