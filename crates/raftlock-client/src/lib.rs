//! # raftlock-client
//!
//! The Rust client of raftlock: one [`LockClient`] trait with two
//! transports, and the recipes applications use on top of it.
//!
//! - [`HttpClient`] talks to any nodes of a cluster over the HTTP API,
//!   failing over between endpoints and retrying `no_leader` by itself.
//! - [`EmbeddedClient`] (feature `embedded`, on by default) wraps a
//!   [`raftlock_node::Node`] running in this process: no HTTP hop.
//! - [`Session`] keeps a lease alive in the background and says, through
//!   [`Session::lost`], when the cluster may have expired it.
//! - [`Mutex`] takes a lock through a session; its [`MutexGuard`] carries
//!   the fencing token and releases on drop.
//! - [`RwLock`] (read and write guards), [`Semaphore`] (at most N
//!   holders) and [`MultiLock`] (several locks, all or none) work like
//!   [`Mutex`], on the API's `/v1/rwlocks`, `/v1/semaphores` and
//!   `/v1/multilocks`.
//! - [`ReentrantMutex`] ([`Mutex::reentrant`]) lets the holding task lock
//!   again without queueing, and releases when the hold count is zero.
//! - [`Election`] campaigns, proclaims, resigns and observes a leader.
//!
//! Errors are one type, [`ClientError`], that separates definite answers
//! from unknown outcomes ([`ClientError::outcome_unknown`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use raftlock_client::{HttpClient, LockClient, Mutex, Session};
//!
//! # async fn demo() -> Result<(), raftlock_client::ClientError> {
//! let client: Arc<dyn LockClient> = Arc::new(HttpClient::new([
//!     "http://127.0.0.1:7001",
//!     "http://127.0.0.1:7002",
//!     "http://127.0.0.1:7003",
//! ])?);
//! let session = Session::open(client, "worker-7", Duration::from_secs(10)).await?;
//! let guard = Mutex::new(&session, "orders/42").lock().await?;
//! tokio::select! {
//!     // Do the work the lock protects, passing the token to storage.
//!     _ = do_work(guard.fencing_token()) => {}
//!     // Stop if the cluster may have expired the session.
//!     reason = session.lost() => eprintln!("lock lost: {reason:?}"),
//! }
//! guard.unlock().await?;
//! session.close().await?;
//! # Ok(()) }
//! # async fn do_work(_token: u64) {}
//! ```
//!
//! Nothing here blocks a tokio worker: every wait is an `.await`, and
//! cleanup that `Drop` cannot await (releasing a dropped guard, closing a
//! dropped session) is spawned onto the current runtime.

#![warn(missing_docs)]

mod client;
mod election;
#[cfg(feature = "embedded")]
mod embedded;
mod error;
mod http;
mod mutex;
mod primitives;
mod queue;
mod reentrant;
mod retry;
mod session;
mod types;
mod watch;

pub use client::{LeaderStream, LockClient, DEFAULT_MAX_WAIT};
pub use election::Election;
#[cfg(feature = "embedded")]
pub use embedded::EmbeddedClient;
pub use error::{ClientError, ErrorCode, Result};
pub use http::{Answered, BearerToken, HttpClient, HttpConfig, NodeWrite, TlsFiles};
pub use mutex::{Mutex, MutexGuard};
pub use primitives::{MultiLock, MultiLockGuard, RwLock, RwLockGuard, Semaphore, SemaphorePermit};
pub use raftlock_api::{Mode, QueueKind};
pub use raftlock_core::{Compare, HolderGuard, TxnOp};
pub use reentrant::{ReentrantGuard, ReentrantMutex};
pub use retry::RetryPolicy;
pub use session::{lost_margin, LostReason, Session};
pub use types::{
    ClusterInfo, FencingCheck, Grant, Holder, Leader, Lease, LockState, LockSummary, MemberInfo,
    NodeWritten, Poll, RwHolder, RwLockSummary, SemaphoreSummary, SessionId, Txn, TxnOpResult,
    TxnOutcome, Waiter,
};
pub use watch::{NodeData, NodeWatch, WatchEvent};
