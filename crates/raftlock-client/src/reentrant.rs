//! `ReentrantMutex`: a [`Mutex`] in reentrant mode. The task that holds
//! it may lock it again without queueing; the lock is released only when
//! the hold count returns to zero (Redisson's and Curator's semantics).
//!
//! The count lives here, in the client, per handle and holding task, as
//! Curator's `InterProcessMutex` counts per thread; the cluster keeps one
//! node per session and lock as before. Not in the replicated state,
//! because an acquire is resent after a lost answer (it is idempotent per
//! session, docs/api.md), and a server-side count would count such a
//! retry as a second hold that nobody releases; and a re-entry then costs
//! no Raft write. The price: the count does not survive a client restart,
//! which loses the guards that the count stands for anyway.

use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard};
use std::time::Duration;

use crate::error::Result;
use crate::mutex::{Mutex, MutexGuard};
use crate::session::LostReason;
use crate::types::Grant;

/// A [`Mutex`] the holding task may lock again; see the module docs.
/// Clones share the count. Made by [`Mutex::reentrant`].
#[derive(Clone)]
pub struct ReentrantMutex {
    mutex: Mutex,
    held: Arc<StdMutex<Holding>>,
}

/// Who holds the lock through this handle, and how many times.
#[derive(Default)]
struct Holding {
    /// The task that locked it first; re-entries are counted for it only.
    task: Option<Owner>,
    count: usize,
    /// The one real guard, released when the count returns to zero.
    guard: Option<MutexGuard>,
}

impl Mutex {
    /// This lock in reentrant mode: see [`ReentrantMutex`].
    pub fn reentrant(self) -> ReentrantMutex {
        ReentrantMutex {
            mutex: self,
            held: Arc::default(),
        }
    }
}

/// Who is locking: a tokio task (which may move between threads), or,
/// for a future driven by `block_on` (`#[tokio::main]`'s body, which is
/// no task), the thread that drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

fn current_owner() -> Owner {
    match tokio::task::try_id() {
        Some(id) => Owner::Task(id),
        None => Owner::Thread(std::thread::current().id()),
    }
}

impl ReentrantMutex {
    fn holding(&self) -> StdGuard<'_, Holding> {
        // A panic while holding this short lock leaves a valid state.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one more hold if the current task holds the lock already.
    fn reenter(&self, task: Owner) -> Option<ReentrantGuard> {
        let mut holding = self.holding();
        if holding.task != Some(task) {
            return None;
        }
        holding.count += 1;
        let grant = holding.guard.as_ref()?.grant().clone();
        Some(ReentrantGuard {
            held: self.held.clone(),
            grant,
            armed: true,
        })
    }

    fn enter(&self, task: Owner, guard: MutexGuard) -> ReentrantGuard {
        let grant = guard.grant().clone();
        let mut holding = self.holding();
        *holding = Holding {
            task: Some(task),
            count: 1,
            guard: Some(guard),
        };
        ReentrantGuard {
            held: self.held.clone(),
            grant,
            armed: true,
        }
    }

    /// Waits until the lock is granted; at once (no request) when this
    /// task holds it already.
    pub async fn lock(&self) -> Result<ReentrantGuard> {
        let task = current_owner();
        if let Some(guard) = self.reenter(task) {
            return Ok(guard);
        }
        Ok(self.enter(task, self.mutex.lock().await?))
    }

    /// As [`lock`](Self::lock), waiting at most `timeout`.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<ReentrantGuard> {
        let task = current_owner();
        if let Some(guard) = self.reenter(task) {
            return Ok(guard);
        }
        Ok(self.enter(task, self.mutex.lock_timeout(timeout).await?))
    }

    /// As [`Mutex::try_lock`], but succeeds at once when this task holds
    /// the lock already.
    pub async fn try_lock(&self) -> Result<ReentrantGuard> {
        let task = current_owner();
        if let Some(guard) = self.reenter(task) {
            return Ok(guard);
        }
        Ok(self.enter(task, self.mutex.try_lock().await?))
    }

    /// How many guards of this handle hold the lock now.
    pub fn hold_count(&self) -> usize {
        self.holding().count
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.mutex.name()
    }
}

/// One hold of a [`ReentrantMutex`]. Dropping it, or
/// [`unlock`](Self::unlock), gives the hold back; the last one releases
/// the lock (dropping releases in a spawned task, as [`MutexGuard`]).
#[must_use = "dropping the guard gives the hold back"]
pub struct ReentrantGuard {
    held: Arc<StdMutex<Holding>>,
    grant: Grant,
    /// False once this hold was given back.
    armed: bool,
}

impl ReentrantGuard {
    /// The grant's fencing token (the same for every hold of one grant).
    pub fn fencing_token(&self) -> u64 {
        self.grant.fencing_token
    }

    /// The whole grant.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Completes when the holding session is lost (see [`MutexGuard::lost`]).
    pub fn lost(&self) -> impl std::future::Future<Output = LostReason> + Send + 'static {
        let holding = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let lost = holding.guard.as_ref().map(|g| g.lost());
        async move {
            match lost {
                Some(lost) => lost.await,
                // Unreachable while this hold is armed; never completes.
                None => std::future::pending().await,
            }
        }
    }

    /// Gives this hold back; returns the lock's guard if it was the last.
    fn give_back(&mut self) -> Option<MutexGuard> {
        if !std::mem::take(&mut self.armed) {
            return None;
        }
        let mut holding = self.held.lock().unwrap_or_else(|p| p.into_inner());
        holding.count = holding.count.saturating_sub(1);
        if holding.count > 0 {
            return None;
        }
        holding.task = None;
        holding.guard.take()
    }

    /// Gives this hold back; if it was the last, releases the lock and
    /// waits for the answer (as [`MutexGuard::unlock`]).
    pub async fn unlock(mut self) -> Result<()> {
        match self.give_back() {
            Some(guard) => guard.unlock().await,
            None => Ok(()),
        }
    }
}

impl Drop for ReentrantGuard {
    fn drop(&mut self) {
        // Dropping the last `MutexGuard` spawns its release.
        drop(self.give_back());
    }
}

impl std::fmt::Debug for ReentrantGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantGuard")
            .field("name", &self.grant.name)
            .field("fencing_token", &self.grant.fencing_token)
            .finish()
    }
}
