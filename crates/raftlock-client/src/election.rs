//! `Election`: leader election over a queue, as in etcd's concurrency
//! package. The first candidate in line leads; its value (an address, an
//! id) is what followers read or observe.

use std::sync::Arc;
use std::time::Duration;

use crate::client::LeaderStream;
use crate::error::Result;
use crate::queue::{self, Kind, Pending, Wait};
use crate::session::{Session, Shared};
use crate::types::{Grant, Leader};

/// A named election, joined through a session. Leadership lasts until
/// [`resign`](Election::resign) or the session's end; the session's
/// [`lost`](Session::lost) says when it may be over.
///
/// ```no_run
/// # async fn demo(session: raftlock_client::Session) -> Result<(), raftlock_client::ClientError> {
/// use futures::StreamExt;
/// use raftlock_client::Election;
/// let election = Election::new(&session, "scheduler");
/// let won = election.campaign("host-a:8080").await?; // waits until leader
/// println!("leading with token {}", won.fencing_token);
/// let mut changes = election.observe();
/// while let Some(leader) = changes.next().await {
///     println!("leader now {:?}", leader?.map(|l| l.value));
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    session: Arc<Shared>,
    name: String,
    /// Serializes this handle's campaigns and their background cleanup.
    local: Arc<tokio::sync::Mutex<()>>,
}

impl Election {
    /// The election `name` for `session`. Sends nothing.
    pub fn new(session: &Session, name: impl Into<String>) -> Election {
        Election {
            session: session.shared().clone(),
            name: name.into(),
            local: Arc::default(),
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Joins as a candidate with `value` and waits until elected; the
    /// grant's fencing token increases with every new leader. Campaigning
    /// again while leading returns the same grant. Cancel-safe: dropping
    /// the future withdraws the candidacy.
    pub async fn campaign(&self, value: &str) -> Result<Grant> {
        self.run(value, Wait::Forever).await
    }

    /// Like [`campaign`](Election::campaign), giving up after `timeout`
    /// (the candidacy is withdrawn).
    pub async fn campaign_timeout(&self, value: &str, timeout: Duration) -> Result<Grant> {
        self.run(value, Wait::timeout(timeout)).await
    }

    async fn run(&self, value: &str, wait: Wait) -> Result<Grant> {
        let local = queue::local_turn(&self.local, wait).await?;
        let mut pending = Pending::new(self.session.clone(), &self.name, true, local);
        let kind = Kind::Election { value };
        let result =
            queue::wait_for_grant(&self.session, &self.name, kind, wait, &mut pending).await;
        // Leadership is not a local turn: resign and observe stay free.
        drop(pending.finish(&result));
        result
    }

    /// Changes the value followers see; `NotLeader` unless leading.
    pub async fn proclaim(&self, value: &str) -> Result<()> {
        let client = &self.session.client;
        let result = client.proclaim(&self.name, self.session.id, value).await;
        self.session.note(result)
    }

    /// Steps down (or withdraws a candidacy still waiting, which ends that
    /// `campaign` with `Withdrawn`). `NotFound` when not a candidate.
    pub async fn resign(&self) -> Result<()> {
        let client = &self.session.client;
        let result = client.resign(&self.name, self.session.id).await;
        self.session.note(result)
    }

    /// The current leader, if any.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        self.session.client.leader(&self.name).await
    }

    /// The current leader, then every change of leader or value. Over
    /// HTTP this is the SSE `observe` route; embedded, the node's applied
    /// changes. Needs no candidacy: observers may call
    /// [`LockClient::observe`](crate::LockClient::observe) without a
    /// session at all.
    pub fn observe(&self) -> LeaderStream {
        self.session.client.observe(&self.name)
    }
}
