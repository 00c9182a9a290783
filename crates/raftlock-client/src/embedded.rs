//! The client over an in-process [`raftlock_node::Node`]: the same
//! operations as over HTTP, with no network hop of our own (writes still
//! reach the Raft leader through the node).

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use raftlock_api::{Mode, QueueKind};
use raftlock_core::HolderGuard;
use raftlock_node::{AcquireOptions, Consistency, Enqueue, Node, NodeError, TxnAnswer};

mod watch;

use crate::client::{LeaderStream, LockClient, DEFAULT_MAX_WAIT};
use crate::error::{ClientError, Result};
use crate::retry::RetryPolicy;
use crate::types::{
    checked, FencingCheck, Grant, Leader, Lease, LockState, NodeWritten, Poll, SessionId, Txn,
    TxnOpResult, TxnOutcome,
};
use crate::watch::{NodeData, NodeWatch};

/// A [`LockClient`] over a [`Node`] running in this process. Cheap to
/// clone. Retries `no_leader` and lost answers like
/// [`HttpClient`](crate::HttpClient) does, with the same policy.
///
/// ```no_run
/// # async fn demo(node: raftlock_node::Node) -> Result<(), raftlock_client::ClientError> {
/// use std::{sync::Arc, time::Duration};
/// use raftlock_client::{EmbeddedClient, Mutex, Session};
/// let client = Arc::new(EmbeddedClient::new(node));
/// let session = Session::open(client, "worker-1", Duration::from_secs(10)).await?;
/// let guard = Mutex::new(&session, "orders/42").lock().await?;
/// println!("token {}", guard.fencing_token());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EmbeddedClient {
    node: Node,
    retry: RetryPolicy,
}

impl std::fmt::Debug for EmbeddedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedClient")
            .field("node", &self.node.id())
            .field("retry", &self.retry)
            .finish()
    }
}

impl EmbeddedClient {
    /// A client over `node`, default retry policy.
    pub fn new(node: Node) -> EmbeddedClient {
        Self::with_retry(node, RetryPolicy::default())
    }

    /// A client over `node` with an explicit retry policy.
    pub fn with_retry(node: Node, retry: RetryPolicy) -> EmbeddedClient {
        EmbeddedClient { node, retry }
    }

    /// The node this client uses.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Runs `op` until it gives a final answer: `NoLeader` and lost
    /// answers are retried (every operation here is safe to resend, see
    /// the `http` module). With `gone: Some(done)`, a "nothing there"
    /// answer after a lost one means the lost attempt did the job.
    async fn retrying<T, F, Fut>(&self, mut gone: Option<T>, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, NodeError>>,
    {
        // A lost answer outranks later `NoLeader`s in the final error.
        let mut unknown: Option<ClientError> = None;
        let mut last = ClientError::NoLeader("no attempt made".into());
        for attempt in 0..self.retry.attempts() {
            tokio::time::sleep(self.retry.backoff(attempt)).await;
            match op().await.map_err(ClientError::from) {
                Ok(value) => return Ok(value),
                Err(e @ ClientError::NoLeader(_)) => last = e,
                Err(e @ ClientError::OutcomeUnknown(_)) => unknown = Some(e),
                Err(e) => {
                    let is_gone = matches!(
                        e,
                        ClientError::NotFound(_)
                            | ClientError::NotOwner(_)
                            | ClientError::SessionNotFound(_)
                    );
                    return match gone.take() {
                        Some(done) if unknown.is_some() && is_gone => Ok(done),
                        _ => Err(e),
                    };
                }
            }
        }
        Err(unknown.unwrap_or(last))
    }
}

/// Refuses a wait the HTTP API would refuse (and that could overflow a
/// deadline): the same answer over both transports.
fn checked_poll(poll: Poll) -> Result<AcquireOptions> {
    if poll.wait > DEFAULT_MAX_WAIT {
        return Err(ClientError::BadRequest(format!(
            "wait must be at most {} ms",
            DEFAULT_MAX_WAIT.as_millis()
        )));
    }
    Ok(AcquireOptions {
        wait: poll.wait,
        keep_queued: poll.keep_queued,
    })
}

fn grant_of(name: &str, grant: raftlock_node::Grant) -> Grant {
    Grant {
        name: name.to_string(),
        node: grant.node,
        fencing_token: grant.fencing_token,
        session: grant.session,
    }
}

/// Refuses what the HTTP edge refuses before proposing: a bad path and
/// the reserved prefixes (the state machine checks again).
fn checked_path(path: &str) -> Result<()> {
    raftlock_core::path::validate_node_path(path)
        .map_err(|e| ClientError::BadRequest(e.to_string()))?;
    if path == "/" || raftlock_core::path::is_reserved(path) {
        return Err(ClientError::BadRequest(format!(
            "{path} cannot be written (the root, /locks, /elections)"
        )));
    }
    Ok(())
}

/// A node write's answer as the client reports it.
fn written(w: raftlock_node::Written) -> NodeWritten {
    NodeWritten {
        path: w.path,
        created: w.created,
        version: w.version,
        create_revision: w.create_revision,
        mod_revision: w.mod_revision,
    }
}

impl EmbeddedClient {
    /// Runs a write that must not be applied twice: a lost answer is
    /// `OutcomeUnknown` at once, as over HTTP (`http` module docs); only
    /// "no leader" (nothing proposed) is retried.
    async fn write_once<T, F, Fut>(&self, write: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = std::result::Result<T, NodeError>>,
    {
        for attempt in 0..self.retry.attempts() {
            tokio::time::sleep(self.retry.backoff(attempt)).await;
            match write().await {
                Err(NodeError::NoLeader) => continue,
                other => return other.map_err(ClientError::from),
            }
        }
        Err(ClientError::NoLeader(
            "no leader within the retry policy".into(),
        ))
    }
}

impl LockClient for EmbeddedClient {
    fn open_session<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            let opened = self
                .retrying(None, || self.node.open_session(owner, ttl))
                .await?;
            Ok(Lease {
                id: opened.id,
                ttl: Duration::from_millis(opened.ttl_ms),
            })
        })
    }

    fn keepalive(&self, session: SessionId) -> BoxFuture<'_, Result<Duration>> {
        Box::pin(self.retrying(None, move || self.node.keepalive(session)))
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.retrying(Some(()), move || self.node.close_session(session)))
    }

    fn acquire<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(async move {
            checked(name)?;
            let options = checked_poll(poll)?;
            let lock_delay_ms = poll
                .lock_delay
                .map(|d| d.as_millis().try_into().unwrap_or(u64::MAX));
            let acquire = || {
                let ask = Enqueue {
                    lock_delay_ms,
                    ..Enqueue::exclusive(QueueKind::Lock, Vec::new())
                };
                self.node.acquire_queue(name, session, ask, options)
            };
            Ok(grant_of(name, self.retrying(None, acquire).await?))
        })
    }

    fn release<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            checked(name)?;
            let release = || self.node.release_queue(QueueKind::Lock, name, session);
            self.retrying(Some(()), release).await
        })
    }

    fn lock_state<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<LockState>> {
        Box::pin(async move {
            checked(name)?;
            let read = || self.node.lock(name, Consistency::Linearizable);
            crate::http::wire::lock_state(self.retrying(None, read).await?)
        })
    }

    fn fencing_check<'a>(
        &'a self,
        name: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<FencingCheck>> {
        Box::pin(async move {
            checked(name)?;
            let read = || self.node.check_fencing(name, token);
            Ok(crate::http::wire::fencing(self.retrying(None, read).await?))
        })
    }

    fn campaign<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(async move {
            checked(name)?;
            let options = checked_poll(poll)?;
            let campaign = || {
                let ask = Enqueue::exclusive(QueueKind::Election, value.as_bytes().to_vec());
                self.node.acquire_queue(name, session, ask, options)
            };
            Ok(grant_of(name, self.retrying(None, campaign).await?))
        })
    }

    fn proclaim<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            checked(name)?;
            let proclaim = || self.node.proclaim(name, session, value.as_bytes().to_vec());
            self.retrying(None, proclaim).await
        })
    }

    fn resign<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            checked(name)?;
            let resign = || self.node.release_queue(QueueKind::Election, name, session);
            self.retrying(Some(()), resign).await
        })
    }

    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>>> {
        Box::pin(async move {
            checked(name)?;
            read_leader(self, name, Consistency::Linearizable).await
        })
    }

    fn acquire_shared<'a>(
        &'a self,
        name: &'a str,
        mode: Mode,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(async move {
            checked(name)?;
            let options = checked_poll(poll)?;
            let kind = crate::primitives::shared_kind(mode)?;
            let acquire = || {
                let ask = Enqueue {
                    kind,
                    mode,
                    data: Vec::new(),
                    lock_delay_ms: None,
                };
                self.node.acquire_queue(name, session, ask, options)
            };
            Ok(grant_of(name, self.retrying(None, acquire).await?))
        })
    }

    fn release_shared<'a>(
        &'a self,
        name: &'a str,
        kind: QueueKind,
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            checked(name)?;
            crate::primitives::check_shared(kind)?;
            let release = || self.node.release_queue(kind, name, session);
            self.retrying(Some(()), release).await
        })
    }

    fn acquire_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Vec<Grant>>> {
        Box::pin(async move {
            raftlock_core::validate_lock_set(locks).map_err(ClientError::from)?;
            let options = checked_poll(poll)?;
            let acquire = || self.node.acquire_multi(locks, session, options);
            let grant = self.retrying(None, acquire).await?;
            Ok(grant
                .locks
                .into_iter()
                .map(|(name, g)| grant_of(&name, g))
                .collect())
        })
    }

    fn release_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            raftlock_core::validate_lock_set(locks).map_err(ClientError::from)?;
            let release = || self.node.release_multi(locks, session);
            self.retrying(Some(()), release).await
        })
    }

    fn observe(&self, name: &str) -> LeaderStream {
        let client = self.clone();
        let name = name.to_string();
        let first = async move {
            checked(&name)?;
            let start = || client.node.observe_election(&name);
            let (first, changes) = client.retrying(None, start).await?;
            Ok::<_, ClientError>((crate::http::wire::leader(first)?, changes))
        };
        Box::pin(stream::once(first).flat_map(|started| match started {
            Err(e) => stream::once(async move { Err(e) }).boxed(),
            Ok((first, changes)) => {
                let tail = stream::unfold(Some(changes), |changes| async move {
                    let mut changes = changes?;
                    match changes.next().await {
                        Some(election) => {
                            Some((crate::http::wire::leader(election), Some(changes)))
                        }
                        // The node stopped: say so once, then end.
                        None => Some((Err(ClientError::ShuttingDown), None)),
                    }
                });
                stream::once(async move { Ok(first) }).chain(tail).boxed()
            }
        }))
    }

    fn put_node<'a>(
        &'a self,
        path: &'a str,
        data: &'a [u8],
        guard: Option<&'a HolderGuard>,
    ) -> BoxFuture<'a, Result<NodeWritten>> {
        Box::pin(async move {
            checked_path(path)?;
            if let Some(g) = guard {
                checked(&g.lock)?;
            }
            let put = || {
                self.node.put_node(raftlock_node::PutNode {
                    path: path.to_string(),
                    data: data.to_vec(),
                    session: None,
                    sequential: false,
                    expected_version: None,
                    guard: guard.cloned(),
                })
            };
            Ok(written(self.write_once(put).await?))
        })
    }

    fn txn<'a>(&'a self, txn: &'a Txn) -> BoxFuture<'a, Result<TxnOutcome>> {
        Box::pin(async move {
            for c in &txn.compare {
                match c {
                    raftlock_core::Compare::Version { path, .. }
                    | raftlock_core::Compare::Value { path, .. } => {
                        raftlock_core::path::validate_node_path(path)
                            .map_err(|e| ClientError::BadRequest(e.to_string()))?;
                    }
                    raftlock_core::Compare::Holder(g) => {
                        checked(&g.lock)?;
                    }
                }
            }
            for op in txn.success.iter().chain(&txn.failure) {
                checked_path(op.path())?;
            }
            let run = || {
                self.node.txn(
                    txn.compare.clone(),
                    txn.success.clone(),
                    txn.failure.clone(),
                )
            };
            let outcome = self.write_once(run).await?;
            Ok(TxnOutcome {
                succeeded: outcome.succeeded,
                responses: outcome
                    .answers
                    .into_iter()
                    .map(|answer| match answer {
                        TxnAnswer::Put(w) => TxnOpResult::Put(written(w)),
                        TxnAnswer::Deleted(path) => TxnOpResult::Delete(path),
                    })
                    .collect(),
            })
        })
    }

    fn read_node<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<(NodeData, u64)>> {
        Box::pin(watch::read_node(self, path))
    }

    fn watch(&self, path: &str, since_revision: Option<u64>) -> NodeWatch {
        watch::watch(self, path, since_revision)
    }
}

async fn read_leader(
    client: &EmbeddedClient,
    name: &str,
    consistency: Consistency,
) -> Result<Option<Leader>> {
    let read = || client.node.election(name, consistency);
    crate::http::wire::leader(client.retrying(None, read).await?)
}
