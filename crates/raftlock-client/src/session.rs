//! `Session`: a lease on the cluster, kept alive in the background, that
//! tells its owner when it may be gone ([`Session::lost`]).
//!
//! The loss deadline. The server restarts a session's TTL when it handles
//! a keepalive, which is after the client sent it, and a leader change
//! only ever lengthens a session. So a session cannot expire before
//! *(send time of the last successful keepalive) + TTL*. `lost()` fires
//! a margin earlier, at `last_renewed + ttl − margin`, with
//!
//! > margin = max(ttl / 10, 500 ms), at most ttl / 2 ([`lost_margin`]).
//!
//! The margin is the application's time to notice and stop (a task
//! wake-up on a busy runtime, aborting a write in flight) before another
//! client can be granted the lock. 10 % scales with the TTL the caller
//! chose; the 500 ms floor is there because reaction time does not shrink
//! with the TTL; the ttl / 2 cap keeps the deadline after the first
//! keepalives (sent every ttl / 3) for very short TTLs. After a failed
//! keepalive the next one is retried sooner (every ttl / 10, 50 ms–1 s).
//!
//! A `session_not_found` answer, to a keepalive or to any recipe call,
//! fires `lost()` at once. `lost()` is final: once fired, open a new
//! session.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::LockClient;
use crate::error::{ClientError, Result};
use crate::types::SessionId;

/// Why [`Session::lost`] fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The cluster answered `session_not_found`: the session expired or
    /// was closed elsewhere. Its locks are released.
    Expired,
    /// No keepalive succeeded in time: the cluster may expire the session
    /// (and grant its locks to others) from `ttl − margin` from now on.
    KeepaliveFailed,
    /// [`Session::close`] was called or the `Session` was dropped.
    Closed,
}

/// How long before the earliest possible expiry [`Session::lost`] fires:
/// `max(ttl / 10, 500 ms)`, capped at `ttl / 2`. See the module docs.
pub fn lost_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(500)).min(ttl / 2)
}

/// State shared by a session, its keepalive task and the recipes built on
/// it (which hold an `Arc` so guards can be moved to other tasks).
pub(crate) struct Shared {
    pub client: Arc<dyn LockClient>,
    pub id: SessionId,
    pub ttl: Duration,
    margin: Duration,
    /// Send time of the last keepalive (or the open) that succeeded; the
    /// server's deadline is at least this plus the TTL.
    renewed: std::sync::Mutex<Instant>,
    /// `Some` once lost; set once, never cleared.
    lost: watch::Sender<Option<LostReason>>,
}

impl Shared {
    fn last_renewed(&self) -> Instant {
        *self.renewed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lost_at(&self) -> Instant {
        self.last_renewed() + self.ttl - self.margin
    }

    /// Fires `lost()` with `reason`, unless it already fired.
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        self.lost.send_if_modified(|lost| {
            let first = lost.is_none();
            if first {
                tracing::info!(session = %self.id, ?reason, "session lost");
                *lost = Some(reason);
            }
            first
        });
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        *self.lost.borrow()
    }

    /// Completes when the session is lost (or every handle is gone).
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let mut lost = self.lost.subscribe();
        async move {
            match lost.wait_for(Option::is_some).await {
                Ok(reason) => reason.unwrap_or(LostReason::Closed),
                Err(_) => LostReason::Closed,
            }
        }
    }

    /// Passes `result` through, firing `lost()` on `session_not_found`.
    pub(crate) fn note<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(ClientError::SessionNotFound(_)) = result {
            self.mark_lost(LostReason::Expired);
        }
        result
    }

    /// One keepalive; on success moves the loss deadline.
    async fn keepalive(&self) -> Result<Duration> {
        let sent = Instant::now();
        let ttl = self.note(self.client.keepalive(self.id).await)?;
        let mut renewed = self.renewed.lock().unwrap_or_else(|e| e.into_inner());
        *renewed = (*renewed).max(sent);
        Ok(ttl)
    }
}

/// A session: opened with a TTL and an owner label, kept alive by a
/// background task every ttl / 3 until [`close`](Session::close) or drop.
/// Locks and candidacies taken through it end with it.
///
/// Dropping a `Session` stops the keepalive and closes it on the cluster
/// in a spawned task (best effort; without a runtime the session simply
/// expires after its TTL).
pub struct Session {
    shared: Arc<Shared>,
    keepalive: JoinHandle<()>,
    /// False after `close()`, so drop does not close twice.
    open: bool,
}

impl Session {
    /// Opens a session on the cluster and starts keeping it alive.
    pub async fn open(client: Arc<dyn LockClient>, owner: &str, ttl: Duration) -> Result<Session> {
        let sent = Instant::now();
        let lease = client.open_session(owner, ttl).await?;
        let shared = Arc::new(Shared {
            id: lease.id,
            ttl: lease.ttl,
            margin: lost_margin(lease.ttl),
            renewed: std::sync::Mutex::new(sent),
            lost: watch::channel(None).0,
            client,
        });
        let keepalive = tokio::spawn(keep_alive(shared.clone()));
        Ok(Session {
            shared,
            keepalive,
            open: true,
        })
    }

    /// The session's id.
    pub fn id(&self) -> SessionId {
        self.shared.id
    }

    /// The TTL the cluster granted.
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// The client the session (and its recipes) use.
    pub fn client(&self) -> &Arc<dyn LockClient> {
        &self.shared.client
    }

    /// Completes when the session is, or may be, gone; see [`LostReason`].
    /// Independent of `self`: move it into a `select!` next to the work
    /// the session's locks protect.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.shared.lost()
    }

    /// `Some(reason)` once [`lost`](Session::lost) has fired.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.lost_reason()
    }

    /// Send time of the last successful keepalive (or of the open).
    pub fn last_renewed(&self) -> Instant {
        self.shared.last_renewed()
    }

    /// When `lost()` fires unless a keepalive succeeds first:
    /// `last_renewed() + ttl − lost_margin(ttl)`.
    pub fn lost_at(&self) -> Instant {
        self.shared.lost_at()
    }

    /// Sends a keepalive now (the background task does this by itself).
    pub async fn keepalive(&self) -> Result<Duration> {
        self.shared.keepalive().await
    }

    /// Stops the keepalive and closes the session, releasing its locks.
    /// Fires `lost()` with [`LostReason::Closed`].
    pub async fn close(mut self) -> Result<()> {
        self.open = false;
        self.keepalive.abort();
        self.shared.mark_lost(LostReason::Closed);
        self.shared.client.close_session(self.shared.id).await
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("ttl", &self.shared.ttl)
            .field("lost", &self.lost_reason())
            .finish()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
        if !self.open {
            return;
        }
        self.shared.mark_lost(LostReason::Closed);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, id) = (self.shared.client.clone(), self.shared.id);
            runtime.spawn(async move {
                if let Err(e) = client.close_session(id).await {
                    tracing::debug!(session = %id, "closing a dropped session: {e}");
                }
            });
        }
    }
}

/// The keepalive task: a keepalive every ttl / 3 after the last success,
/// retried sooner after a failure, each bounded by the loss deadline.
/// Ends when the session is lost.
async fn keep_alive(shared: Arc<Shared>) {
    let interval = shared.ttl / 3;
    let retry = (shared.ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut next = shared.last_renewed() + interval;
    while shared.lost_reason().is_none() {
        let deadline = shared.lost_at();
        if next >= deadline {
            tokio::time::sleep_until(deadline).await;
            // A manual keepalive may have moved the deadline meanwhile.
            if Instant::now() >= shared.lost_at() {
                shared.mark_lost(LostReason::KeepaliveFailed);
                return;
            }
            next = Instant::now();
            continue;
        }
        tokio::time::sleep_until(next).await;
        match tokio::time::timeout_at(shared.lost_at(), shared.keepalive()).await {
            Ok(Ok(_)) => next = shared.last_renewed() + interval,
            Ok(Err(ClientError::SessionNotFound(_))) => return,
            Ok(Err(e)) => {
                tracing::warn!(session = %shared.id, "keepalive failed: {e}");
                next = Instant::now() + retry;
            }
            Err(_) if Instant::now() >= shared.lost_at() => {
                shared.mark_lost(LostReason::KeepaliveFailed);
                return;
            }
            Err(_) => next = Instant::now(),
        }
    }
}
