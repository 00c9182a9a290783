//! The primitive operations both transports offer, as one object-safe
//! trait.
//!
//! Object-safe on purpose: the recipes hold an `Arc<dyn LockClient>`, so
//! [`Session`](crate::Session), [`Mutex`](crate::Mutex) and
//! [`Election`](crate::Election) are plain types rather than generics
//! threaded through every signature, an application can pick HTTP or
//! embedded at run time (a flag, a config file), and a test can slip in
//! a double. The price is one boxed future per call, which is nothing next
//! to a Raft commit.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

use crate::error::Result;
use crate::types::{
    FencingCheck, Grant, Leader, Lease, LockState, NodeWritten, Poll, SessionId, Txn, TxnOutcome,
};
use crate::watch::{NodeData, NodeWatch};
use raftlock_api::{Mode, QueueKind};
use raftlock_core::HolderGuard;

/// The longest `wait` an acquire or campaign accepts: the HTTP API's
/// default cap on `wait_ms` (servers may configure another), which the
/// embedded client enforces too so both transports answer alike.
/// [`Mutex::lock`](crate::Mutex::lock) waits longer by repeating shorter
/// polls.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(300);

/// A stream of an election's leader: the current state first, then one
/// item per change of leader or value (`None`: nobody leads).
pub type LeaderStream = BoxStream<'static, Result<Option<Leader>>>;

/// What a raftlock cluster offers a client. Implemented by
/// [`HttpClient`](crate::HttpClient) and (feature `embedded`)
/// [`EmbeddedClient`](crate::EmbeddedClient).
///
/// Every method is one request to the cluster; the recipes build waiting,
/// keepalive and cleanup on top. Transports retry `no_leader` and
/// unreachable endpoints themselves, so an error here is final for this
/// call.
pub trait LockClient: Send + Sync + 'static {
    /// Opens a session that expires after `ttl` without a keepalive.
    fn open_session<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, Result<Lease>>;

    /// Restarts the session's TTL; returns the TTL.
    fn keepalive(&self, session: SessionId) -> BoxFuture<'_, Result<Duration>>;

    /// Ends the session and releases every lock it holds.
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<()>>;

    /// Queues the session in lock `name` and waits up to `poll.wait` for
    /// the grant; a zero wait is a try-lock (`LockHeld` when held), and
    /// above [`DEFAULT_MAX_WAIT`] is `BadRequest`. On `Timeout` the
    /// session's waiting node is withdrawn, unless `poll.keep_queued`.
    /// Idempotent: a session that already holds or waits gets the same
    /// node back. A `Duration` converts into a withdrawing [`Poll`].
    fn acquire<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>>;

    /// Releases the session's node in lock `name` (or cancels its wait).
    fn release<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>>;

    /// The lock's holder and waiters (linearizable read).
    fn lock_state<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<LockState>>;

    /// Is `token` the fencing token of lock `name`'s current holder?
    fn fencing_check<'a>(
        &'a self,
        name: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<FencingCheck>>;

    /// Queues the session as a candidate of election `name` with `value`
    /// and waits up to `poll.wait` until it leads (a timeout as for
    /// [`LockClient::acquire`]).
    fn campaign<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>>;

    /// The leader changes its value (`NotLeader` from anyone else).
    fn proclaim<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
    ) -> BoxFuture<'a, Result<()>>;

    /// Leaves the election (resigns if leading, cancels if waiting).
    fn resign<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>>;

    /// The election's current leader (linearizable read).
    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>>>;

    /// Queues the session in read-write lock (`Mode::Read`/`Write`) or
    /// semaphore (`Mode::Permits`) `name` and waits up to `poll.wait`
    /// for the grant, as [`LockClient::acquire`] does for locks.
    /// `Mode::Exclusive` is refused: locks have [`LockClient::acquire`].
    fn acquire_shared<'a>(
        &'a self,
        name: &'a str,
        mode: Mode,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>>;

    /// Releases (or cancels the wait for) the session's place in a
    /// read-write lock or semaphore (`kind`).
    fn release_shared<'a>(
        &'a self,
        name: &'a str,
        kind: QueueKind,
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>>;

    /// Queues the session in every lock of `locks` as one entry and waits
    /// up to `poll.wait` until it holds them all; one grant per lock, in
    /// the order named.
    fn acquire_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Vec<Grant>>>;

    /// Releases (or cancels) the session's nodes in every lock of `locks`.
    fn release_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>>;

    /// Leader changes of election `name`, starting with the current state.
    /// Lazy: nothing is sent until the stream is polled. Ends after an
    /// error it could not recover from (reported as the last item).
    fn observe(&self, name: &str) -> LeaderStream;

    /// Creates or updates the persistent node at tree path `path` with
    /// `data`. With `guard`, it commits only while the guard's fencing
    /// token is its lock's current holder, checked in the same log entry
    /// as the write (`not_holder` otherwise, and nothing is written).
    fn put_node<'a>(
        &'a self,
        path: &'a str,
        data: &'a [u8],
        guard: Option<&'a HolderGuard>,
    ) -> BoxFuture<'a, Result<NodeWritten>>;

    /// Runs a transaction (docs/api.md, Transactions). A failing operation
    /// fails the whole transaction with that operation's error; nothing
    /// is written then.
    fn txn<'a>(&'a self, txn: &'a Txn) -> BoxFuture<'a, Result<TxnOutcome>>;

    /// The node at tree path `path` and the revision the read saw
    /// (linearizable); pass that revision to [`LockClient::watch`] to
    /// miss no later change.
    fn read_node<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<(NodeData, u64)>>;

    /// Changes of the node at `path` and of its direct children after
    /// `since_revision` (`None`: from now), in revision order (docs/api.md,
    /// Nodes). Lazy: nothing is sent until polled. Ends after
    /// [`WatchEvent::Compacted`](crate::WatchEvent::Compacted) (the member
    /// no longer keeps the changes after `since_revision`: read afresh and
    /// watch from the read's revision) or after an error it could not
    /// recover from (the last item).
    fn watch(&self, path: &str, since_revision: Option<u64>) -> NodeWatch;
}
