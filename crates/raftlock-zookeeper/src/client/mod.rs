//! An async ZooKeeper client over [`crate::wire`]: one session over one
//! TCP connection at a time, with what raftlock's tools need (the bench's
//! ZooKeeper rows and the Jepsen harness's `zk-mutex` clients): connect or
//! resume a session, create/create2, delete, setData, getChildren,
//! exists/getData with watches, multi, ping, close.
//!
//! Requests are pipelined: [`Client::send`] writes several back to back
//! in one write and hands back one [`Pending`] per request. ZooKeeper
//! answers a session's requests in order, so replies are matched against
//! the queue of requests in flight, oldest first, by xid; a reply out of
//! order is a protocol error that drops the connection (as the Java
//! client does). Watches are registered per path and kind (data or
//! children) and fire once, with the event's type; a watch whose
//! connection drops fires with a closed channel (the caller re-checks).
//!
//! The session is kept alive by pings every third of the negotiated
//! timeout, whatever else is sent (a server renews a session on any
//! packet, but an idle client sends none but these), unless the caller
//! pings itself ([`Config::auto_ping`] off: the Jepsen harness pauses a
//! client's pings with its nemesis). When the connection drops, or a
//! write on it fails, the reader alone fails everything in flight, in
//! order, each call once, with [`Error::ConnectionLoss`]; the state turns
//! [`State::Disconnected`], and
//! with [`Config::reconnect`] the client resumes the session (same id and
//! password) on the next server until it is back or expired.

mod conn;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinHandle;

use crate::wire::{
    write_frame, xid, Acl, CreateMode, CreateRequest, DeleteRequest, ErrorCode, EventType, MultiOp,
    MultiRequest, OpCode, OpRequest, OpResult, PathWatchRequest, ReplyBody, Request,
    SetDataRequest, Stat, DEFAULT_MAX_FRAME,
};

/// How long a close waits for the server's answer.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A call's failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The connection dropped, or the answer outlived the session
    /// timeout: the request may or may not have been applied.
    #[error("connection loss")]
    ConnectionLoss,
    #[error("session expired")]
    SessionExpired,
    #[error("session closed")]
    Closed,
    /// The server's error code for this request.
    #[error("ZooKeeper error {0:?}")]
    Code(ErrorCode),
    /// No server accepted a session, or an answer did not decode.
    #[error("{0}")]
    Protocol(String),
}

impl Error {
    /// Worth retrying on the same session (the outcome is unknown).
    pub fn transient(&self) -> bool {
        matches!(
            self,
            Error::ConnectionLoss
                | Error::Code(ErrorCode::ConnectionLoss | ErrorCode::OperationTimeout)
        )
    }
}

/// The session as this client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// A connection serves the session.
    Connected,
    /// The connection dropped; the session may still live on the server
    /// (and is being resumed when [`Config::reconnect`] is on).
    Disconnected,
    /// The server said the session is gone (final).
    Expired,
    /// Closed by this client (final).
    Closed,
}

/// How to open a session.
#[derive(Debug, Clone)]
pub struct Config {
    /// `host:port` of every server.
    pub servers: Vec<String>,
    /// Index into `servers` to try first.
    pub first: usize,
    /// The session timeout asked for (the server may negotiate another).
    pub session_timeout: Duration,
    /// How long [`Client::connect`] keeps trying servers.
    pub connect_for: Duration,
    /// Ping every third of the timeout from a background task.
    pub auto_ping: bool,
    /// Resume the session on another connection when one drops.
    pub reconnect: bool,
}

impl Config {
    /// A session on `servers`, pinged and resumed by the client.
    pub fn new(servers: Vec<String>, session_timeout: Duration) -> Config {
        Config {
            servers,
            first: 0,
            session_timeout,
            connect_for: session_timeout,
            auto_ping: true,
            reconnect: true,
        }
    }
}

/// An answer: the reply's body, or why there is none.
pub type Answer = Result<ReplyBody, Error>;

/// Fires once with the event's type when a watched node changes; the
/// channel closes instead when the connection drops.
pub type Watch = oneshot::Receiver<EventType>;

/// A request to send, and the watch to register with it.
#[derive(Debug, Clone)]
pub struct Call {
    pub op: OpRequest,
    pub watch: Option<(WatchKind, String)>,
}

impl Call {
    pub fn new(op: OpRequest) -> Call {
        Call { op, watch: None }
    }
}

/// Which events a watch waits for, as ZooKeeper's server keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Set by exists and getData: creation, deletion, data change.
    Data,
    /// Set by getChildren: a child added or removed, or deletion.
    Children,
}

impl WatchKind {
    fn fires_on(self, event: EventType) -> bool {
        match self {
            WatchKind::Data => matches!(
                event,
                EventType::NodeCreated | EventType::NodeDeleted | EventType::NodeDataChanged
            ),
            WatchKind::Children => {
                matches!(
                    event,
                    EventType::NodeChildrenChanged | EventType::NodeDeleted
                )
            }
        }
    }
}

/// A sent request's answer to come, and its watch.
#[derive(Debug)]
pub struct Pending {
    answer: oneshot::Receiver<Answer>,
    pub watch: Option<Watch>,
}

/// One request in flight.
struct InFlight {
    xid: i32,
    op: OpCode,
    answer: oneshot::Sender<Answer>,
}

/// A ping in flight: when it was sent, and who waits for its answer.
struct PingInFlight {
    sent: Instant,
    answer: Option<oneshot::Sender<()>>,
}

/// What the reader and the callers share about the current connection.
#[derive(Default)]
struct Outstanding {
    /// Requests in send order (ZooKeeper answers them in this order).
    calls: VecDeque<InFlight>,
    /// Pings in send order (their answers all carry xid -2).
    pings: VecDeque<PingInFlight>,
    watches: HashMap<(WatchKind, String), Vec<oneshot::Sender<EventType>>>,
}

/// The session's identity, as the last handshake gave it.
struct SessionId {
    id: i64,
    passwd: Vec<u8>,
    timeout: Duration,
    /// Index into `servers` of the current (or last) connection.
    server: usize,
}

/// The write half of the current connection.
struct Writer {
    half: OwnedWriteHalf,
    /// Wakes this connection's reader when a write fails, so the reader
    /// (which alone fails what is in flight) hears of it even while the
    /// socket's read side still looks open.
    broken: Arc<Notify>,
}

struct Inner {
    config: Config,
    writer: tokio::sync::Mutex<Option<Writer>>,
    outstanding: Mutex<Outstanding>,
    session: Mutex<SessionId>,
    state: watch::Sender<State>,
    next_xid: AtomicI32,
    last_zxid: AtomicU64,
    /// When the newest answered ping was sent (a renewal the server
    /// confirmed: the session lives at least a timeout past it).
    renewed: Mutex<Instant>,
}

/// A ZooKeeper session. Dropping it closes the session (best effort).
pub struct Client {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A create of `path` with the open ACL.
pub fn create_request(path: &str, data: &[u8], mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: path.to_string(),
        data: Some(data.to_vec()),
        acl: vec![Acl::open_unsafe()],
        mode,
    }
}

fn unexpected(what: &str, body: ReplyBody) -> Error {
    Error::Protocol(format!("{what}: unexpected answer {body:?}"))
}

impl Client {
    /// Opens a session on `config.servers[config.first]`, or the next one
    /// that answers, within `config.connect_for`.
    pub async fn connect(config: Config) -> Result<Client, Error> {
        let first = config.first;
        let inner = Arc::new(Inner {
            session: Mutex::new(SessionId {
                id: 0,
                passwd: vec![0; 16],
                timeout: config.session_timeout,
                server: first,
            }),
            config,
            writer: tokio::sync::Mutex::new(None),
            outstanding: Mutex::new(Outstanding::default()),
            state: watch::channel(State::Disconnected).0,
            next_xid: AtomicI32::new(1),
            last_zxid: AtomicU64::new(0),
            renewed: Mutex::new(Instant::now()),
        });
        let deadline = Instant::now() + inner.config.connect_for;
        let reader = inner.establish(Some(first), deadline).await?;
        let mut tasks = vec![tokio::spawn(conn::read_loop(inner.clone(), reader))];
        if inner.config.auto_ping {
            tasks.push(tokio::spawn(conn::ping_loop(inner.clone())));
        }
        Ok(Client { inner, tasks })
    }

    /// The session's id (0 before the first handshake).
    pub fn session_id(&self) -> i64 {
        lock(&self.inner.session).id
    }

    /// The negotiated session timeout.
    pub fn session_timeout(&self) -> Duration {
        lock(&self.inner.session).timeout
    }

    /// The server (index into `Config::servers`) of the current or last
    /// connection.
    pub fn server(&self) -> usize {
        lock(&self.inner.session).server
    }

    /// The session's state now, and its changes.
    pub fn state(&self) -> watch::Receiver<State> {
        self.inner.state.subscribe()
    }

    /// When the newest answered ping was sent (or the session opened).
    pub fn renewed(&self) -> Instant {
        *lock(&self.inner.renewed)
    }

    /// The highest zxid the server has reported.
    pub fn last_zxid(&self) -> i64 {
        self.inner.last_zxid.load(Ordering::Relaxed) as i64
    }

    /// Sends `calls` back to back in one write; one [`Pending`] each, in
    /// order. `Err` only when nothing was queued (no connection, a call
    /// too large): once queued, a call's answer, even to a write that
    /// failed, comes through its [`Pending`].
    pub async fn send(&self, calls: Vec<Call>) -> Result<Vec<Pending>, Error> {
        self.inner.check()?;
        self.inner.send(calls).await
    }

    /// Waits for a sent request's answer, bounded by the session timeout
    /// (a server that stopped answering is as good as a lost connection).
    pub async fn answer(&self, pending: Pending) -> Answer {
        let limit = self.session_timeout();
        match tokio::time::timeout(limit, pending.answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) | Err(_) => Err(Error::ConnectionLoss),
        }
    }

    /// One request, one answer.
    pub async fn call(&self, op: OpRequest) -> Answer {
        let (answer, _) = self.call_watching(Call::new(op)).await?;
        answer
    }

    /// One request with its watch; the answer, and the watch.
    async fn call_watching(&self, call: Call) -> Result<(Answer, Option<Watch>), Error> {
        let mut sent = self.send(vec![call]).await?;
        let mut pending = sent.pop().ok_or(Error::ConnectionLoss)?;
        let watch = pending.watch.take();
        Ok((self.answer(pending).await, watch))
    }

    /// create: the path created (with a sequential mode, its suffix).
    pub async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String, Error> {
        match self
            .call(OpRequest::Create(create_request(path, data, mode)))
            .await?
        {
            ReplyBody::Create { path } => Ok(path),
            other => Err(unexpected("create", other)),
        }
    }

    /// create2: the path created and the node's stat (its `czxid` is the
    /// creating transaction's zxid).
    pub async fn create2(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), Error> {
        match self
            .call(OpRequest::Create2(create_request(path, data, mode)))
            .await?
        {
            ReplyBody::Create2 { path, stat } => Ok((path, stat)),
            other => Err(unexpected("create2", other)),
        }
    }

    /// delete of any version.
    pub async fn delete(&self, path: &str) -> Result<(), Error> {
        self.call(OpRequest::Delete(DeleteRequest {
            path: path.to_string(),
            version: -1,
        }))
        .await
        .map(drop)
    }

    /// setData of any version: the node's new stat.
    pub async fn set_data(&self, path: &str, data: &[u8]) -> Result<Stat, Error> {
        match self
            .call(OpRequest::SetData(SetDataRequest {
                path: path.to_string(),
                data: Some(data.to_vec()),
                version: -1,
            }))
            .await?
        {
            ReplyBody::Stat(stat) => Ok(stat),
            other => Err(unexpected("setData", other)),
        }
    }

    /// getChildren without a watch: the children's names.
    pub async fn children(&self, path: &str) -> Result<Vec<String>, Error> {
        match self.call(children_request(path, false)).await? {
            ReplyBody::GetChildren { children } => Ok(children),
            other => Err(unexpected("getChildren", other)),
        }
    }

    /// exists without a watch: the node's stat if it is there.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        match self.call(exists_request(path, false)).await {
            Ok(ReplyBody::Stat(stat)) => Ok(Some(stat)),
            Ok(other) => Err(unexpected("exists", other)),
            Err(Error::Code(ErrorCode::NoNode)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// exists with a watch: `Some(watch)` if the node is there (the watch
    /// fires when it changes or goes), `None` if it is not (the server
    /// keeps a watch for its creation; this client forgets it).
    pub async fn exists_watch(&self, path: &str) -> Result<Option<Watch>, Error> {
        let call = Call {
            op: exists_request(path, true),
            watch: Some((WatchKind::Data, path.to_string())),
        };
        let (answer, watch) = self.call_watching(call).await?;
        match answer {
            Ok(_) => Ok(watch),
            Err(Error::Code(ErrorCode::NoNode)) => {
                drop(watch);
                self.inner.forget_closed_watches(WatchKind::Data, path);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// getData, with a watch if asked: the data, the stat, the watch.
    pub async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat, Option<Watch>), Error> {
        let call = Call {
            op: OpRequest::GetData(PathWatchRequest {
                path: path.to_string(),
                watch,
            }),
            watch: watch.then(|| (WatchKind::Data, path.to_string())),
        };
        let (answer, w) = self.call_watching(call).await?;
        match answer {
            Ok(ReplyBody::GetData { data, stat }) => Ok((data.unwrap_or_default(), stat, w)),
            Ok(other) => Err(unexpected("getData", other)),
            Err(e) => {
                drop(w);
                self.inner.forget_closed_watches(WatchKind::Data, path);
                Err(e)
            }
        }
    }

    /// multi: every result, or the failing operation's code.
    pub async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<OpResult>, Error> {
        match self.call(OpRequest::Multi(MultiRequest { ops })).await? {
            ReplyBody::Multi(m) => {
                let failed = m.results.iter().find_map(|r| match r {
                    OpResult::Error { err } if !err.is_ok() => Some(*err),
                    _ => None,
                });
                match failed {
                    Some(err) => Err(Error::Code(err)),
                    None => Ok(m.results),
                }
            }
            other => Err(unexpected("multi", other)),
        }
    }

    /// Sends a ping and waits for its answer (which renews the session
    /// on the server: see [`Client::renewed`]).
    pub async fn ping(&self) -> Result<(), Error> {
        self.pinger().ping().await
    }

    /// A handle that pings this session, for a task beside the owner.
    pub fn pinger(&self) -> Pinger {
        Pinger {
            inner: self.inner.clone(),
        }
    }

    /// Ends the session on the server (its ephemeral nodes go at once).
    pub async fn close(mut self) {
        self.close_now().await;
    }

    async fn close_now(&mut self) {
        let was = self.inner.state.send_replace(State::Closed);
        if was == State::Closed {
            return;
        }
        // Marked closed first, so the reader does not reconnect when the
        // server hangs up after answering.
        if was != State::Expired {
            if let Ok(mut sent) = self
                .inner
                .send(vec![Call::new(OpRequest::CloseSession)])
                .await
            {
                if let Some(p) = sent.pop() {
                    let _ = tokio::time::timeout(CLOSE_WAIT, p.answer).await;
                }
            }
        }
        for t in &self.tasks {
            t.abort();
        }
        self.inner.fail_all();
    }
}

/// Pings a session on behalf of its [`Client`] (which owns the session:
/// once it is closed or dropped, pings fail with [`Error::Closed`]).
#[derive(Clone)]
pub struct Pinger {
    inner: Arc<Inner>,
}

impl Pinger {
    /// Sends a ping and waits for its answer.
    pub async fn ping(&self) -> Result<(), Error> {
        self.inner.check()?;
        let (tx, rx) = oneshot::channel();
        self.inner.send_ping(Some(tx)).await?;
        let limit = lock(&self.inner.session).timeout;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Error::ConnectionLoss),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        let was = self.inner.state.send_replace(State::Closed);
        if matches!(was, State::Closed | State::Expired) {
            return;
        }
        // Best effort: tell the server now rather than let the session
        // time out.
        let inner = self.inner.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = inner.send(vec![Call::new(OpRequest::CloseSession)]).await;
                if let Some(mut w) = inner.writer.lock().await.take() {
                    let _ = w.half.shutdown().await;
                }
                inner.fail_all();
            });
        }
    }
}

fn children_request(path: &str, watch: bool) -> OpRequest {
    OpRequest::GetChildren(PathWatchRequest {
        path: path.to_string(),
        watch,
    })
}

fn exists_request(path: &str, watch: bool) -> OpRequest {
    OpRequest::Exists(PathWatchRequest {
        path: path.to_string(),
        watch,
    })
}

impl Inner {
    fn check(&self) -> Result<(), Error> {
        match *self.state.borrow() {
            State::Closed => Err(Error::Closed),
            State::Expired => Err(Error::SessionExpired),
            State::Connected | State::Disconnected => Ok(()),
        }
    }

    /// Writes `calls` in one write, queued as in flight in that order.
    async fn send(&self, calls: Vec<Call>) -> Result<Vec<Pending>, Error> {
        // Encoded before anything is queued: a request too large for a
        // frame fails alone, leaving the connection as it was.
        let mut frames = BytesMut::new();
        let mut requests = Vec::with_capacity(calls.len());
        for call in calls {
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            let op = call.op.opcode();
            let request = Request { xid, op: call.op };
            write_frame(&mut frames, DEFAULT_MAX_FRAME, |b| request.encode(b))
                .map_err(|e| Error::Protocol(e.to_string()))?;
            requests.push((xid, op, call.watch));
        }
        let mut out = Vec::with_capacity(requests.len());
        let mut guard = self.writer.lock().await;
        if guard.is_none() {
            return Err(Error::ConnectionLoss);
        }
        // Queued under the writer's lock, so queue order is wire order.
        {
            let mut o = lock(&self.outstanding);
            for (xid, op, watch) in requests {
                let (tx, rx) = oneshot::channel();
                o.calls.push_back(InFlight {
                    xid,
                    op,
                    answer: tx,
                });
                let watch = watch.map(|key| {
                    let (wtx, wrx) = oneshot::channel();
                    o.watches.entry(key).or_default().push(wtx);
                    wrx
                });
                out.push(Pending { answer: rx, watch });
            }
        }
        // A failed write leaves what it queued in flight: the reader fails
        // every call in flight, in order, once (see `write`).
        Self::write(&mut guard, &frames).await;
        Ok(out)
    }

    /// Writes one ping; `answer` hears its answer.
    async fn send_ping(&self, answer: Option<oneshot::Sender<()>>) -> Result<(), Error> {
        let mut frame = BytesMut::new();
        let ping = Request {
            xid: xid::PING,
            op: OpRequest::Ping,
        };
        write_frame(&mut frame, DEFAULT_MAX_FRAME, |b| ping.encode(b))
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let mut guard = self.writer.lock().await;
        if guard.is_none() {
            return Err(Error::ConnectionLoss);
        }
        lock(&self.outstanding).pings.push_back(PingInFlight {
            sent: Instant::now(),
            answer,
        });
        Self::write(&mut guard, &frame).await;
        Ok(())
    }

    /// Writes `bytes` on the connection in `writer`. When the write fails
    /// the connection is hung up and its reader woken; nothing is taken
    /// off the queues here. The reader alone fails what is in flight,
    /// all of it, in order, once: a writer that also removed its own
    /// calls could remove another caller's, or fail one twice.
    async fn write(writer: &mut Option<Writer>, bytes: &[u8]) {
        let Some(w) = writer.as_mut() else {
            return;
        };
        if w.half.write_all(bytes).await.is_err() {
            if let Some(mut w) = writer.take() {
                let _ = w.half.shutdown().await;
                w.broken.notify_one();
            }
        }
    }

    fn forget_closed_watches(&self, kind: WatchKind, path: &str) {
        let mut o = lock(&self.outstanding);
        let key = (kind, path.to_string());
        if let Some(v) = o.watches.get_mut(&key) {
            v.retain(|w| !w.is_closed());
            if v.is_empty() {
                o.watches.remove(&key);
            }
        }
    }

    /// Fails everything in flight: the connection is gone.
    fn fail_all(&self) {
        let mut o = lock(&self.outstanding);
        for call in o.calls.drain(..) {
            let _ = call.answer.send(Err(Error::ConnectionLoss));
        }
        // Dropping the senders wakes every ping waiter and watcher.
        o.pings.clear();
        o.watches.clear();
    }
}

#[cfg(test)]
mod tests;
