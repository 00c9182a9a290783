//! `Mutex`: a distributed lock held by a [`Session`], with a guard that
//! carries the fencing token and releases on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::error::Result;
use crate::queue::{self, Kind, Pending, Wait};
use crate::session::{LostReason, Session, Shared};
use crate::types::{Grant, LockState, NodeWritten, SessionId};
use raftlock_core::HolderGuard;

/// A named lock, taken through a session. Clones share one local queue,
/// so tasks of one process that share a `Mutex` take turns locally before
/// the session queues once on the cluster.
///
/// Use one `Mutex` handle per (session, name): the cluster keeps one node
/// per session and lock, so two independent handles of the same session
/// would share one grant.
#[derive(Clone)]
pub struct Mutex {
    session: Arc<Shared>,
    name: String,
    /// Serializes this handle's acquires and (background) releases.
    local: Arc<tokio::sync::Mutex<()>>,
    /// The lock-delay this handle asks for, if any.
    lock_delay: Option<Duration>,
}

impl Mutex {
    /// The lock `name` (e.g. `orders/42`) for `session`. Sends nothing.
    pub fn new(session: &Session, name: impl Into<String>) -> Mutex {
        Mutex {
            session: session.shared().clone(),
            name: name.into(),
            local: Arc::default(),
            lock_delay: None,
        }
    }

    /// Asks for a lock-delay (docs/api.md, "Lock-delay"): after a holder's
    /// session expires or is closed, the cluster grants the lock to nobody
    /// for `delay` (a release skips it), so a holder that lost its session
    /// but still writes does not overlap the next. The acquire that creates
    /// the lock's queue fixes the delay; while anyone is queued, another
    /// value is refused (`BadRequest`). At most 60 s.
    pub fn with_lock_delay(mut self, delay: Duration) -> Mutex {
        self.lock_delay = Some(delay);
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the lock is granted. Fails with `SessionLost` if the
    /// session is lost meanwhile. Cancel-safe: dropping the future
    /// withdraws the queued node.
    pub async fn lock(&self) -> Result<MutexGuard> {
        self.acquire(Wait::Forever).await
    }

    /// Waits at most `timeout`; then fails with `Timeout` (the queued node
    /// is withdrawn).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard> {
        self.acquire(Wait::timeout(timeout)).await
    }

    /// Takes the lock only if it is free right now; `LockHeld` otherwise
    /// (also while this handle's guard, or its release, is outstanding:
    /// use [`MutexGuard::unlock`] to re-lock at once).
    pub async fn try_lock(&self) -> Result<MutexGuard> {
        self.acquire(Wait::Try).await
    }

    /// The lock's holder and waiters, as the cluster sees them now.
    pub async fn state(&self) -> Result<LockState> {
        self.session.client.lock_state(&self.name).await
    }

    async fn acquire(&self, wait: Wait) -> Result<MutexGuard> {
        let local = queue::local_turn(&self.local, wait).await?;
        let mut pending = Pending::new(self.session.clone(), &self.name, false, local);
        let kind = Kind::Lock {
            lock_delay: self.lock_delay,
        };
        let result =
            queue::wait_for_grant(&self.session, &self.name, kind, wait, &mut pending).await;
        let local = pending.finish(&result);
        let grant = result?;
        tracing::debug!(lock = self.name, token = grant.fencing_token, "locked");
        Ok(MutexGuard {
            session: self.session.clone(),
            name: self.name.clone(),
            grant,
            local,
        })
    }
}

/// Proof of holding a [`Mutex`], valid while the session lives. Dropping
/// it releases the lock in a spawned task (Drop cannot await); call
/// [`unlock`](MutexGuard::unlock) to release and see the answer.
///
/// The guard cannot know the instant the cluster lets go of the lock
/// (a lost session): watch [`lost`](MutexGuard::lost), and pass
/// [`fencing_token`](MutexGuard::fencing_token) to storage that checks it.
#[must_use = "dropping the guard releases the lock"]
pub struct MutexGuard {
    session: Arc<Shared>,
    name: String,
    grant: Grant,
    /// The handle's local turn; `None` once released.
    local: Option<OwnedMutexGuard<()>>,
}

impl MutexGuard {
    /// The grant's fencing token: strictly greater than every token
    /// granted before it, on any lock.
    pub fn fencing_token(&self) -> u64 {
        self.grant.fencing_token
    }

    /// The session's queue node (`/locks/{name}/lock-0000000042`).
    pub fn node(&self) -> &str {
        &self.grant.node
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The holding session.
    pub fn session_id(&self) -> SessionId {
        self.session.id
    }

    /// The whole grant.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// This grant as a guard for writes: "the lock's holder still has my
    /// token" (a [`Compare::Holder`](crate::Compare::Holder) in a
    /// [`Txn`](crate::Txn)).
    pub fn holder_guard(&self) -> HolderGuard {
        HolderGuard {
            lock: self.name.clone(),
            fencing_token: self.grant.fencing_token,
        }
    }

    /// Writes `data` to the node at tree path `path` only while this
    /// guard's grant still holds the lock, checked by the cluster in the
    /// same log entry as the write: a holder whose session expired, or
    /// whose lock went to another, gets `Rejected { code: "not_holder" }`
    /// and nothing is written.
    pub async fn put_if_holder(&self, path: &str, data: &[u8]) -> Result<NodeWritten> {
        let guard = self.holder_guard();
        self.session.client.put_node(path, data, Some(&guard)).await
    }

    /// Completes when the holding session is lost; from then on the lock
    /// may be granted to someone else.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.session.lost()
    }

    /// Releases the lock and waits for the answer. `NotFound`/`NotOwner`/
    /// `SessionNotFound` mean the lock had already been lost.
    /// Cancel-safe: if dropped midway, the guard's drop releases again.
    pub async fn unlock(mut self) -> Result<()> {
        let client = &self.session.client;
        let result = self
            .session
            .note(client.release(&self.name, self.session.id).await);
        // Only now: a cancelled unlock leaves the guard armed for Drop.
        self.local.take();
        result
    }
}

impl std::fmt::Debug for MutexGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("name", &self.name)
            .field("node", &self.grant.node)
            .field("fencing_token", &self.grant.fencing_token)
            .finish()
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        if let Some(local) = self.local.take() {
            let name = std::mem::take(&mut self.name);
            queue::spawn_release(self.session.clone(), name, false, Some(local));
        }
    }
}
