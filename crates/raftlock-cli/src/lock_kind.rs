//! Which primitive `raftlock lock` holds: a lock (default), a read-write
//! lock (`--read`/`--write`) or a semaphore place (`--permits N`), as one
//! guard type with the fencing token and a release (docs/api.md).

use clap::Args;
use raftlock_client::{
    ClientError, Mutex, MutexGuard, RwLock, RwLockGuard, Semaphore, SemaphorePermit, Session,
};
use std::time::Duration;

/// The flags that pick the primitive.
#[derive(Args, Debug, Clone, Copy)]
#[group(multiple = false)]
pub struct KindArgs {
    /// Hold read-write lock NAME to read (shared with other readers).
    #[arg(long)]
    read: bool,
    /// Hold read-write lock NAME to write (alone).
    #[arg(long)]
    write: bool,
    /// Hold one place of semaphore NAME, which has N places (every
    /// holder must name the same N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    permits: Option<u64>,
    /// Lock-delay of lock NAME (e.g. 5s; at most 60s): if this process
    /// loses its session while holding the lock, nobody gets the lock for
    /// this long, so a command still writing cannot overlap the next
    /// holder. A release (the command exiting) skips it. Every user of
    /// the lock must name the same delay, or none.
    #[arg(long, value_name = "DELAY", value_parser = crate::lock::parse_duration)]
    lock_delay: Option<Duration>,
}

/// A held lock, read-write lock or semaphore place.
pub enum Held {
    Lock(MutexGuard),
    RwLock(RwLockGuard),
    Permit(SemaphorePermit),
}

impl KindArgs {
    /// What the command's environment calls the primitive.
    pub fn describe(&self) -> &'static str {
        match (self.read, self.write, self.permits) {
            (true, _, _) => "read",
            (_, true, _) => "write",
            (_, _, Some(_)) => "semaphore",
            _ => "lock",
        }
    }

    /// Takes it, waiting up to `wait` (zero: try once).
    pub async fn acquire(
        &self,
        session: &Session,
        name: &str,
        wait: Duration,
    ) -> Result<Held, ClientError> {
        let try_once = wait.is_zero();
        if self.read || self.write {
            let rw = RwLock::new(session, name);
            let access = if self.read {
                raftlock_client::Mode::Read
            } else {
                raftlock_client::Mode::Write
            };
            let guard = match (try_once, self.read) {
                (true, true) => rw.try_read().await,
                (true, false) => rw.try_write().await,
                (false, _) => rw.lock_timeout(access, wait).await,
            };
            return guard.map(Held::RwLock);
        }
        if let Some(permits) = self.permits {
            let sem = Semaphore::new(session, name, permits);
            let permit = if try_once {
                sem.try_acquire().await
            } else {
                sem.acquire_timeout(wait).await
            };
            return permit.map(Held::Permit);
        }
        let mut mutex = Mutex::new(session, name);
        if let Some(delay) = self.lock_delay {
            mutex = mutex.with_lock_delay(delay);
        }
        let guard = if try_once {
            mutex.try_lock().await
        } else {
            mutex.lock_timeout(wait).await
        };
        guard.map(Held::Lock)
    }
}

impl Held {
    /// The grant's fencing token.
    pub fn fencing_token(&self) -> u64 {
        match self {
            Held::Lock(g) => g.fencing_token(),
            Held::RwLock(g) => g.fencing_token(),
            Held::Permit(p) => p.fencing_token(),
        }
    }

    /// Releases it and waits for the answer.
    pub async fn unlock(self) -> Result<(), ClientError> {
        match self {
            Held::Lock(g) => g.unlock().await,
            Held::RwLock(g) => g.unlock().await,
            Held::Permit(p) => p.release().await,
        }
    }
}
