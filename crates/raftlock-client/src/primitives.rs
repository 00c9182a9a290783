//! `RwLock`, `Semaphore` and `MultiLock`: the other recipes of
//! docs/api.md, with guards like [`MutexGuard`](crate::MutexGuard)'s.
//!
//! Waiting works as for [`Mutex`](crate::Mutex) (`queue.rs`): long polls
//! that keep the session's place in line, a local turn per handle (the
//! cluster keeps one entry per session and name), and a release in a
//! spawned task when a wait or a guard is dropped, so nothing stays queued
//! behind an abandoned caller.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::OwnedMutexGuard;

use raftlock_api::{Mode, QueueKind};

use crate::error::{ClientError, Result};
use crate::queue::{finish_turn, local_turn, poll_until_granted, Wait};
use crate::session::{LostReason, Session, Shared};
use crate::types::{Grant, Poll, SessionId};

/// The shared queue kind `mode` is asked of: a read-write lock or a
/// semaphore. An exclusive hold is a lock's acquire, not a shared one.
pub(crate) fn shared_kind(mode: Mode) -> Result<QueueKind> {
    match mode {
        Mode::Read | Mode::Write => Ok(QueueKind::RwLock),
        Mode::Permits(_) => Ok(QueueKind::Semaphore),
        Mode::Exclusive => Err(ClientError::BadRequest(
            "an exclusive hold is a lock's acquire, not a shared one".into(),
        )),
    }
}

/// Refuses a shared release of a kind that is not shared.
pub(crate) fn check_shared(kind: QueueKind) -> Result<()> {
    if kind.is_shared() {
        Ok(())
    } else {
        Err(ClientError::BadRequest(format!(
            "{} are not shared queues",
            kind.segment()
        )))
    }
}

/// Which entry a wait or a guard stands for, and how to let it go.
#[derive(Clone)]
enum Target {
    Shared { name: String, kind: QueueKind },
    Multi { locks: Vec<String> },
}

impl Target {
    fn release<'a>(&'a self, session: &'a Shared) -> BoxFuture<'a, Result<()>> {
        match self {
            Target::Shared { name, kind } => session.client.release_shared(name, *kind, session.id),
            Target::Multi { locks } => session.client.release_multi(locks, session.id),
        }
    }

    fn describe(&self) -> String {
        match self {
            Target::Shared { name, .. } => name.clone(),
            Target::Multi { locks } => locks.join(", "),
        }
    }
}

/// Releases `target` in a spawned task, then lets go of the local turn.
fn spawn_release(session: Arc<Shared>, target: Target, local: Option<OwnedMutexGuard<()>>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: the session's end cleans up instead
    };
    runtime.spawn(async move {
        let result = target.release(&session).await;
        if let Err(e) = session.note(result) {
            tracing::debug!(target = target.describe(), "background release: {e}");
        }
        drop(local);
    });
}

/// A wait in progress; dropped before it is granted, it releases what the
/// wait may have queued (as `queue::Pending` does for locks).
struct Pending {
    session: Arc<Shared>,
    target: Target,
    local: Option<OwnedMutexGuard<()>>,
    kept_queued: bool,
}

impl Pending {
    fn finish<T>(mut self, result: &Result<T>) -> Option<OwnedMutexGuard<()>> {
        finish_turn(&mut self.local, self.kept_queued, result)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(local) = self.local.take() {
            spawn_release(self.session.clone(), self.target.clone(), Some(local));
        }
    }
}

/// Takes the local turn, waits for the grant, and hands back the turn
/// with the grant (to keep in the guard).
async fn acquire<T, F>(
    session: &Arc<Shared>,
    local: &Arc<tokio::sync::Mutex<()>>,
    target: Target,
    wait: Wait,
    attempt: F,
) -> Result<(T, Option<OwnedMutexGuard<()>>)>
where
    F: FnMut(Poll) -> BoxFuture<'static, Result<T>>,
{
    let turn = local_turn(local, wait).await?;
    let mut pending = Pending {
        session: session.clone(),
        target,
        local: Some(turn),
        kept_queued: false,
    };
    let what = || pending.target.describe();
    let result = poll_until_granted(session, wait, what, &mut pending.kept_queued, attempt).await;
    let turn = pending.finish(&result);
    result.map(|grant| (grant, turn))
}

/// A held entry: releases on drop (in a spawned task) or on `unlock`.
struct Held {
    session: Arc<Shared>,
    target: Target,
    local: Option<OwnedMutexGuard<()>>,
}

impl Held {
    async fn unlock(mut self) -> Result<()> {
        let result = self.session.note(self.target.release(&self.session).await);
        self.local.take();
        result
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(local) = self.local.take() {
            spawn_release(self.session.clone(), self.target.clone(), Some(local));
        }
    }
}

/// A named read-write lock (docs/api.md, "Read-write locks"): readers at
/// the head of the FIFO queue share it, a writer holds alone, and readers
/// never overtake a waiting writer. One handle per (session, name), as
/// for [`Mutex`](crate::Mutex).
#[derive(Clone)]
pub struct RwLock {
    session: Arc<Shared>,
    name: String,
    local: Arc<tokio::sync::Mutex<()>>,
}

impl RwLock {
    /// The read-write lock `name` for `session`. Sends nothing.
    pub fn new(session: &Session, name: impl Into<String>) -> RwLock {
        RwLock {
            session: session.shared().clone(),
            name: name.into(),
            local: Arc::default(),
        }
    }

    /// Waits until the session may read.
    pub async fn read(&self) -> Result<RwLockGuard> {
        self.acquire(Mode::Read, Wait::Forever).await
    }

    /// Waits until the session may write, alone.
    pub async fn write(&self) -> Result<RwLockGuard> {
        self.acquire(Mode::Write, Wait::Forever).await
    }

    /// Reads if granted at once; `LockHeld` otherwise.
    pub async fn try_read(&self) -> Result<RwLockGuard> {
        self.acquire(Mode::Read, Wait::Try).await
    }

    /// Writes if granted at once; `LockHeld` otherwise.
    pub async fn try_write(&self) -> Result<RwLockGuard> {
        self.acquire(Mode::Write, Wait::Try).await
    }

    /// Waits at most `timeout` to read or write (`Timeout` withdraws).
    pub async fn lock_timeout(&self, access: Mode, timeout: Duration) -> Result<RwLockGuard> {
        self.acquire(access, Wait::timeout(timeout)).await
    }

    async fn acquire(&self, access: Mode, wait: Wait) -> Result<RwLockGuard> {
        if matches!(access, Mode::Permits(_)) {
            return Err(ClientError::BadRequest(
                "a read-write lock is taken to read or write".into(),
            ));
        }
        let target = Target::Shared {
            name: self.name.clone(),
            kind: QueueKind::RwLock,
        };
        let attempt = self.attempt(access);
        let (grant, local) =
            acquire(&self.session, &self.local, target.clone(), wait, attempt).await?;
        Ok(RwLockGuard {
            access,
            grant,
            held: Held {
                session: self.session.clone(),
                target,
                local,
            },
        })
    }

    fn attempt(&self, access: Mode) -> impl FnMut(Poll) -> BoxFuture<'static, Result<Grant>> {
        let (session, name) = (self.session.clone(), self.name.clone());
        move |poll| {
            let (session, name) = (session.clone(), name.clone());
            Box::pin(async move {
                session
                    .client
                    .acquire_shared(&name, access, session.id, poll)
                    .await
            })
        }
    }
}

/// Proof of reading or writing a [`RwLock`]; releases on drop.
#[must_use = "dropping the guard releases the lock"]
pub struct RwLockGuard {
    access: Mode,
    grant: Grant,
    held: Held,
}

impl RwLockGuard {
    /// `Mode::Read` or `Mode::Write`.
    pub fn access(&self) -> Mode {
        self.access
    }

    /// This grant's fencing token: above every earlier grant's.
    pub fn fencing_token(&self) -> u64 {
        self.grant.fencing_token
    }

    /// The whole grant.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The holding session.
    pub fn session_id(&self) -> SessionId {
        self.held.session.id
    }

    /// Completes when the holding session is lost.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.held.session.lost()
    }

    /// Releases the lock and waits for the answer.
    pub async fn unlock(self) -> Result<()> {
        self.held.unlock().await
    }
}

/// A named counting semaphore (docs/api.md, "Semaphores"): at most
/// `permits` sessions hold it at once, FIFO. The first acquire on the
/// cluster fixes `permits`; another value is refused (`Rejected` with
/// code `limit_mismatch`).
#[derive(Clone)]
pub struct Semaphore {
    session: Arc<Shared>,
    name: String,
    permits: u64,
    local: Arc<tokio::sync::Mutex<()>>,
}

impl Semaphore {
    /// The semaphore `name` of `permits` holders, for `session`.
    pub fn new(session: &Session, name: impl Into<String>, permits: u64) -> Semaphore {
        Semaphore {
            session: session.shared().clone(),
            name: name.into(),
            permits,
            local: Arc::default(),
        }
    }

    /// Waits for a place.
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        self.take(Wait::Forever).await
    }

    /// Takes a place only if one is free now; `LockHeld` otherwise.
    pub async fn try_acquire(&self) -> Result<SemaphorePermit> {
        self.take(Wait::Try).await
    }

    /// Waits at most `timeout` for a place.
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<SemaphorePermit> {
        self.take(Wait::timeout(timeout)).await
    }

    async fn take(&self, wait: Wait) -> Result<SemaphorePermit> {
        let target = Target::Shared {
            name: self.name.clone(),
            kind: QueueKind::Semaphore,
        };
        let (session, name, access) = (
            self.session.clone(),
            self.name.clone(),
            Mode::Permits(self.permits),
        );
        let attempt = move |poll| {
            let (session, name) = (session.clone(), name.clone());
            Box::pin(async move {
                session
                    .client
                    .acquire_shared(&name, access, session.id, poll)
                    .await
            }) as BoxFuture<'static, Result<Grant>>
        };
        let (grant, local) =
            acquire(&self.session, &self.local, target.clone(), wait, attempt).await?;
        Ok(SemaphorePermit {
            grant,
            held: Held {
                session: self.session.clone(),
                target,
                local,
            },
        })
    }
}

/// A place in a [`Semaphore`]; released on drop.
#[must_use = "dropping the permit releases it"]
pub struct SemaphorePermit {
    grant: Grant,
    held: Held,
}

impl SemaphorePermit {
    /// This grant's fencing token (orders the grants).
    pub fn fencing_token(&self) -> u64 {
        self.grant.fencing_token
    }

    /// The whole grant.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Completes when the holding session is lost.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.held.session.lost()
    }

    /// Releases the place and waits for the answer.
    pub async fn release(self) -> Result<()> {
        self.held.unlock().await
    }
}

/// Several locks taken all at once or not at all (docs/api.md,
/// "Multi-locks"); the locks are ordinary [`Mutex`](crate::Mutex) locks.
/// Two sessions asking for overlapping sets, in any order, never deadlock.
#[derive(Clone)]
pub struct MultiLock {
    session: Arc<Shared>,
    locks: Vec<String>,
    local: Arc<tokio::sync::Mutex<()>>,
}

impl MultiLock {
    /// The locks `locks` for `session`. Sends nothing.
    pub fn new<S: Into<String>>(
        session: &Session,
        locks: impl IntoIterator<Item = S>,
    ) -> MultiLock {
        MultiLock {
            session: session.shared().clone(),
            locks: locks.into_iter().map(Into::into).collect(),
            local: Arc::default(),
        }
    }

    /// Waits until the session holds every lock.
    pub async fn lock(&self) -> Result<MultiLockGuard> {
        self.take(Wait::Forever).await
    }

    /// Takes every lock if all are free now; `LockHeld` otherwise (and
    /// none is taken).
    pub async fn try_lock(&self) -> Result<MultiLockGuard> {
        self.take(Wait::Try).await
    }

    /// Waits at most `timeout`; on `Timeout` none is held or queued.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MultiLockGuard> {
        self.take(Wait::timeout(timeout)).await
    }

    async fn take(&self, wait: Wait) -> Result<MultiLockGuard> {
        let target = Target::Multi {
            locks: self.locks.clone(),
        };
        let (session, locks) = (self.session.clone(), self.locks.clone());
        let attempt = move |poll| {
            let (session, locks) = (session.clone(), locks.clone());
            Box::pin(async move { session.client.acquire_multi(&locks, session.id, poll).await })
                as BoxFuture<'static, Result<Vec<Grant>>>
        };
        let (grants, local) =
            acquire(&self.session, &self.local, target.clone(), wait, attempt).await?;
        Ok(MultiLockGuard {
            grants,
            held: Held {
                session: self.session.clone(),
                target,
                local,
            },
        })
    }
}

/// Proof of holding every lock of a [`MultiLock`]; releases them all on
/// drop.
#[must_use = "dropping the guard releases the locks"]
pub struct MultiLockGuard {
    grants: Vec<Grant>,
    held: Held,
}

impl MultiLockGuard {
    /// One grant per lock, in the order named; each carries that lock's
    /// fencing token.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// Completes when the holding session is lost.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.held.session.lost()
    }

    /// Releases every lock together and waits for the answer.
    pub async fn unlock(self) -> Result<()> {
        self.held.unlock().await
    }
}

impl std::fmt::Debug for RwLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLockGuard")
            .field("access", &self.access)
            .field("node", &self.grant.node)
            .field("fencing_token", &self.grant.fencing_token)
            .finish()
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("node", &self.grant.node)
            .field("fencing_token", &self.grant.fencing_token)
            .finish()
    }
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("grants", &self.grants)
            .finish()
    }
}
