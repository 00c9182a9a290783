//! The client over an in-process [`raftlock_node::Node`]: the same
//! operations as over HTTP, with no network hop of our own (writes still
//! reach the Raft leader through the node).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream;
use raftlock_core::{Effects, QueueEntryView, QueueKind};
use raftlock_node::{AcquireOptions, Consistency, Node, NodeError};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::client::{LeaderStream, LockClient, DEFAULT_MAX_WAIT};
use crate::error::{ClientError, Result};
use crate::retry::RetryPolicy;
use crate::types::{
    checked, FencingCheck, Grant, Holder, Leader, Lease, LockState, Poll, SessionId, Waiter,
};

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

fn leader_of(entry: QueueEntryView) -> Leader {
    Leader {
        session: Some(entry.session),
        principal: entry.principal,
        value: String::from_utf8_lossy(&entry.data).into_owned(),
        node: entry.node,
        fencing_token: entry.fencing_token,
    }
}

fn grant_of(name: &str, grant: raftlock_node::Grant) -> Grant {
    Grant {
        name: name.to_string(),
        node: grant.node,
        fencing_token: grant.fencing_token,
        session: grant.session,
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
            let acquire = || {
                let kind = QueueKind::Lock;
                self.node
                    .acquire_with(kind, name, session, Vec::new(), options)
            };
            Ok(grant_of(name, self.retrying(None, acquire).await?))
        })
    }

    fn release<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            checked(name)?;
            let release = || self.node.release(QueueKind::Lock, name, session);
            self.retrying(Some(()), release).await
        })
    }

    fn lock_state<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<LockState>> {
        Box::pin(async move {
            checked(name)?;
            let read = || {
                let view = |sm: &raftlock_core::StateMachine| sm.queue(QueueKind::Lock, name);
                self.node.read(Consistency::Linearizable, view)
            };
            let view = self.retrying(None, read).await?;
            Ok(LockState {
                name: name.to_string(),
                holder: view.holder.map(|h| Holder {
                    session: Some(h.session),
                    principal: h.principal,
                    owner: h.owner,
                    node: h.node,
                    fencing_token: h.fencing_token,
                    since_revision: h.granted_revision.unwrap_or(h.fencing_token),
                }),
                waiters: view
                    .waiters
                    .into_iter()
                    .map(|w| Waiter {
                        session: Some(w.session),
                        principal: w.principal,
                        owner: w.owner,
                        node: w.node,
                    })
                    .collect(),
            })
        })
    }

    fn fencing_check<'a>(
        &'a self,
        name: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<FencingCheck>> {
        Box::pin(async move {
            checked(name)?;
            let read = || {
                let check = |sm: &raftlock_core::StateMachine| sm.fencing_check(name, token);
                self.node.read(Consistency::Linearizable, check)
            };
            let (valid, current_token) = self.retrying(None, read).await?;
            Ok(FencingCheck {
                valid,
                current_token,
            })
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
                let data = value.as_bytes().to_vec();
                self.node
                    .acquire_with(QueueKind::Election, name, session, data, options)
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
            let resign = || self.node.release(QueueKind::Election, name, session);
            self.retrying(Some(()), resign).await
        })
    }

    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>>> {
        Box::pin(async move {
            checked(name)?;
            read_leader(self, name, Consistency::Linearizable).await
        })
    }

    fn observe(&self, name: &str) -> LeaderStream {
        if let Err(e) = checked(name) {
            return Box::pin(stream::once(async move { Err(e) }));
        }
        let state = Observer {
            client: self.clone(),
            prefix: format!("{}/", QueueKind::Election.queue_path(name)),
            name: name.to_string(),
            changes: None,
            resync: None,
            last: None,
        };
        Box::pin(stream::unfold(Some(state), |state| async move {
            let mut st = state?;
            match st.next().await {
                Ok(leader) => Some((Ok(leader), Some(st))),
                Err(e) => Some((Err(e), None)),
            }
        }))
    }
}

async fn read_leader(
    client: &EmbeddedClient,
    name: &str,
    consistency: Consistency,
) -> Result<Option<Leader>> {
    let read = || {
        let holder =
            |sm: &raftlock_core::StateMachine| sm.holder(QueueKind::Election, name).map(leader_of);
        client.node.read(consistency, holder)
    };
    client.retrying(None, read).await
}

/// The embedded observe stream: this replica's applied effects, filtered
/// to the election's queue, each followed by a local read.
struct Observer {
    client: EmbeddedClient,
    name: String,
    /// `/elections/{name}/`: a change of a child may change the leader.
    prefix: String,
    changes: Option<broadcast::Receiver<Arc<Effects>>>,
    /// Re-reads now and then: a snapshot install publishes no effects.
    resync: Option<tokio::time::Interval>,
    last: Option<Option<Leader>>,
}

/// How often an observer re-reads without being told to (as the server's
/// SSE observer does).
const RESYNC: Duration = Duration::from_secs(5);

/// Did these effects touch a direct child of `prefix`? The queue's nodes
/// are its direct children; election `a/b`'s nodes are not `a`'s.
fn touches(prefix: &str, effects: &Effects) -> bool {
    let mine = |path: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|child| !child.contains('/'))
    };
    effects.deleted.iter().any(|d| mine(&d.path))
        || effects.granted.iter().any(|p| mine(p))
        || effects.written.iter().any(|p| mine(p))
}

impl Observer {
    async fn next(&mut self) -> Result<Option<Leader>> {
        loop {
            let consistency = match self.changes.as_mut() {
                // Subscribe before the first read so no change falls between.
                None => {
                    self.changes = Some(self.client.node.subscribe());
                    Consistency::Linearizable
                }
                Some(changes) => {
                    let resync = self.resync.get_or_insert_with(|| {
                        let start = tokio::time::Instant::now() + RESYNC;
                        tokio::time::interval_at(start, RESYNC)
                    });
                    tokio::select! {
                        received = changes.recv() => match received {
                            Ok(effects) if !touches(&self.prefix, &effects) => continue,
                            // Our replica applied it: its own state shows it.
                            Ok(_) | Err(RecvError::Lagged(_)) => Consistency::Stale,
                            Err(RecvError::Closed) => return Err(ClientError::ShuttingDown),
                        },
                        _ = resync.tick() => Consistency::Stale,
                    }
                }
            };
            let leader = read_leader(&self.client, &self.name, consistency).await?;
            if self.last.as_ref() != Some(&leader) {
                self.last = Some(leader.clone());
                return Ok(leader);
            }
        }
    }
}
