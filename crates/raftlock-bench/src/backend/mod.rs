//! The three clients behind one trait, so every workload runs the same
//! code against each system. A session is what the system calls it
//! (raftlock session, etcd lease, ZooKeeper session = connection); a lock
//! is a name. Every call is bounded by a deadline; failures that are safe
//! to retry (a member down, no leader yet) are retried on another member.

pub mod etcd;
#[cfg(feature = "etcd-grpc")]
pub mod etcd_grpc;
pub mod http;
pub mod raftlock;
pub mod zookeeper;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::cluster::System;

/// How an acquire ended (errors are `Err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Granted; raftlock returns a fencing token.
    Granted { token: Option<u64> },
    /// `wait` elapsed (or the try-lock found it held); nothing left queued.
    TimedOut,
}

pub trait Backend: Clone + Send + Sync + 'static {
    type Session: Send + Sync + 'static;

    fn system(&self) -> System;

    /// Opens a session with this TTL whose requests go to member `member`
    /// first (another one if that member is down).
    fn open(
        &self,
        member: usize,
        ttl: Duration,
    ) -> impl Future<Output = anyhow::Result<Self::Session>> + Send;

    /// Acquires `lock`, waiting up to `wait` (zero: try once).
    fn acquire(
        &self,
        s: &Self::Session,
        lock: &str,
        wait: Duration,
    ) -> impl Future<Output = anyhow::Result<Acquired>> + Send;

    fn release(
        &self,
        s: &Self::Session,
        lock: &str,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Writes `value` to this client's own key (a node outside any lock;
    /// the first put may create it). The `put` workload.
    fn put(
        &self,
        s: &Self::Session,
        key: &str,
        value: &[u8],
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// One keepalive (a no-op where the client library pings by itself).
    fn keepalive(&self, s: &Self::Session) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// True if the client library keeps sessions alive on its own
    /// (ZooKeeper's pings); then `keepalive` does nothing.
    fn self_keepalive(&self) -> bool;

    fn close(&self, s: Self::Session) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Holder plus waiters of `lock`, as the system reports them.
    fn queue_len(&self, lock: &str) -> impl Future<Output = anyhow::Result<usize>> + Send;

    /// How many locks one `bulk_hold` call takes at most.
    fn bulk_chunk(&self) -> usize;

    /// Makes `s` hold each of `locks` (all free) as cheaply as the system
    /// allows (one txn / one multi where it has them). Set-up only.
    fn bulk_hold(
        &self,
        s: &Self::Session,
        locks: &[String],
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Does member `member`, on its own, answer a read that finds `lock`
    /// held? (the restart workload's "serving again").
    fn serves_on(&self, member: usize, lock: &str) -> impl Future<Output = bool> + Send;
}

/// What one attempt of a retried call says.
pub enum Step<T> {
    Done(T),
    /// Try again on another member (this one did not answer).
    Rotate(String),
    /// Try again (e.g. no leader yet).
    Again(String),
    Fail(anyhow::Error),
}

/// Longest a single call keeps retrying before giving up.
pub const RETRY_FOR: Duration = Duration::from_secs(30);
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Runs `attempt(member, n)` until it is done, fails, or `RETRY_FOR`
/// passes; `member` is the session's preferred member, moved on rotation.
pub async fn retry<T, F, Fut>(
    member: &AtomicUsize,
    members: usize,
    mut attempt: F,
) -> anyhow::Result<T>
where
    F: FnMut(usize, u32) -> Fut,
    Fut: Future<Output = Step<T>>,
{
    let deadline = Instant::now() + RETRY_FOR;
    let mut n = 0u32;
    loop {
        let m = member.load(Ordering::Relaxed) % members.max(1);
        let why = match attempt(m, n).await {
            Step::Done(v) => return Ok(v),
            Step::Fail(e) => return Err(e),
            Step::Rotate(why) => {
                let _ = member.compare_exchange(
                    m,
                    (m + 1) % members.max(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                why
            }
            Step::Again(why) => why,
        };
        n += 1;
        if Instant::now() > deadline {
            bail!("gave up after {n} attempts: {why}");
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
