//! One ZooKeeper session over one TCP connection, pipelined: callers write
//! their request under a short lock and wait on a oneshot; one reader task
//! per session routes replies by xid and watch events by path; a pinger
//! keeps an idle session alive (every third of the negotiated timeout, as
//! the Java client does). When the connection drops, every call and watch
//! in flight fails with `ConnectionLoss` (the recipe re-checks), and the
//! reader reconnects to the next server with the same session id and
//! password until the session is back or expired.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::wire::{self, code, op, Dec, Malformed};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The connection dropped (or a call outlived the session timeout):
    /// the request may or may not have been applied.
    ConnectionLoss,
    SessionExpired,
    Closed,
    /// A server error code (`wire::code`).
    Code(i32),
    Protocol(String),
}

impl Error {
    /// Worth retrying on the same session.
    pub fn transient(&self) -> bool {
        matches!(self, Error::ConnectionLoss)
            || matches!(self, Error::Code(c) if *c == code::CONNECTION_LOSS || *c == code::OPERATION_TIMEOUT)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::ConnectionLoss => write!(f, "connection loss"),
            Error::SessionExpired => write!(f, "session expired"),
            Error::Closed => write!(f, "session closed"),
            Error::Code(code::NO_NODE) => write!(f, "no node"),
            Error::Code(code::NODE_EXISTS) => write!(f, "node exists"),
            Error::Code(c) => write!(f, "ZooKeeper error {c}"),
            Error::Protocol(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Malformed> for Error {
    fn from(m: Malformed) -> Self {
        Error::Protocol(m.to_string())
    }
}

type Reply = Result<Vec<u8>, Error>;

#[derive(Default)]
struct Pending {
    calls: HashMap<i32, oneshot::Sender<Reply>>,
    watches: HashMap<String, Vec<oneshot::Sender<()>>>,
}

struct Session {
    id: i64,
    passwd: Vec<u8>,
    timeout: Duration,
    /// Index into `servers` of the current (or last) connection.
    server: usize,
}

struct Inner {
    servers: Vec<String>,
    requested_timeout: Duration,
    writer: tokio::sync::Mutex<Option<OwnedWriteHalf>>,
    pending: Mutex<Pending>,
    session: Mutex<Session>,
    next_xid: AtomicI32,
    last_zxid: AtomicU64,
    /// Milliseconds since `epoch` of the last packet sent (pings skip busy sessions).
    last_send_ms: AtomicU64,
    epoch: Instant,
    expired: AtomicBool,
    closed: AtomicBool,
}

/// A session; dropping it closes the session on the server (best effort).
pub struct Client {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

/// A request to send: op code, body, and the path to watch if any.
pub struct Req {
    pub op: i32,
    pub body: Vec<u8>,
    pub watch: Option<String>,
}

impl Req {
    pub fn new(op: i32, body: Vec<u8>) -> Self {
        Req {
            op,
            body,
            watch: None,
        }
    }
}

/// Fires once when a watched path changes or the connection drops.
pub type Watch = oneshot::Receiver<()>;

impl Client {
    /// Opens a session on `servers[first]`, or the next one that answers.
    pub async fn connect(
        servers: Vec<String>,
        first: usize,
        timeout: Duration,
        give_up_after: Duration,
    ) -> Result<Client, Error> {
        let inner = Arc::new(Inner {
            servers,
            requested_timeout: timeout,
            writer: tokio::sync::Mutex::new(None),
            pending: Mutex::new(Pending::default()),
            session: Mutex::new(Session {
                id: 0,
                passwd: vec![0; 16],
                timeout,
                server: first,
            }),
            next_xid: AtomicI32::new(1),
            last_zxid: AtomicU64::new(0),
            last_send_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            expired: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let deadline = Instant::now() + give_up_after;
        let reader = inner.establish(Some(first), deadline).await?;
        let tasks = vec![
            tokio::spawn(read_loop(inner.clone(), reader)),
            tokio::spawn(ping_loop(inner.clone())),
        ];
        Ok(Client { inner, tasks })
    }

    /// Sends `reqs` back to back in one write (ZooKeeper answers a
    /// session's requests in order) and returns a receiver per request.
    pub async fn send(
        &self,
        reqs: Vec<Req>,
    ) -> Result<Vec<(oneshot::Receiver<Reply>, Option<Watch>)>, Error> {
        self.inner.check()?;
        self.send_anyway(reqs).await
    }

    async fn send_anyway(
        &self,
        reqs: Vec<Req>,
    ) -> Result<Vec<(oneshot::Receiver<Reply>, Option<Watch>)>, Error> {
        let mut out = Vec::with_capacity(reqs.len());
        let mut xids = Vec::with_capacity(reqs.len());
        let mut frame = Vec::new();
        let mut guard = self.inner.writer.lock().await;
        let Some(w) = guard.as_mut() else {
            return Err(Error::ConnectionLoss);
        };
        {
            let mut p = lock(&self.inner.pending);
            for r in reqs {
                let xid = self.inner.next_xid.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                p.calls.insert(xid, tx);
                let watch = r.watch.map(|path| {
                    let (wtx, wrx) = oneshot::channel();
                    p.watches.entry(path).or_default().push(wtx);
                    wrx
                });
                frame.extend_from_slice(&wire::request(xid, r.op, &r.body));
                xids.push(xid);
                out.push((rx, watch));
            }
        }
        self.inner.touch();
        if w.write_all(&frame).await.is_err() {
            {
                let mut p = lock(&self.inner.pending);
                for xid in xids {
                    p.calls.remove(&xid);
                }
            }
            let _ = w.shutdown().await;
            *guard = None;
            return Err(Error::ConnectionLoss);
        }
        Ok(out)
    }

    /// Waits for one reply, bounded by the session timeout (a server that
    /// stopped answering is as good as a lost connection).
    pub async fn reply(&self, rx: oneshot::Receiver<Reply>) -> Reply {
        let limit = lock(&self.inner.session).timeout;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) | Err(_) => Err(Error::ConnectionLoss),
        }
    }

    /// One request, one reply.
    pub async fn call(&self, op: i32, body: Vec<u8>) -> Reply {
        let mut v = self.send(vec![Req::new(op, body)]).await?;
        let (rx, _) = v.pop().ok_or(Error::ConnectionLoss)?;
        self.reply(rx).await
    }

    pub async fn create(&self, path: &str, data: &[u8], flags: i32) -> Result<String, Error> {
        let b = self
            .call(op::CREATE, wire::create(path, data, flags))
            .await?;
        Ok(Dec::new(&b).string()?)
    }

    pub async fn delete(&self, path: &str) -> Result<(), Error> {
        self.call(op::DELETE, wire::delete(path)).await.map(drop)
    }

    pub async fn set_data(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        self.call(op::SET_DATA, wire::set_data(path, data))
            .await
            .map(drop)
    }

    pub async fn children(&self, path: &str) -> Result<Vec<String>, Error> {
        let b = self
            .call(op::GET_CHILDREN, wire::path_watch(path, false))
            .await?;
        Ok(Dec::new(&b).strings()?)
    }

    /// Exists with a watch: `Ok(Some(watch))` if the node is there (the
    /// watch fires when it changes or goes), `Ok(None)` if it is not.
    pub async fn exists_watch(&self, path: &str) -> Result<Option<Watch>, Error> {
        let req = Req {
            op: op::EXISTS,
            body: wire::path_watch(path, true),
            watch: Some(path.to_string()),
        };
        let mut v = self.send(vec![req]).await?;
        let (rx, watch) = v.pop().ok_or(Error::ConnectionLoss)?;
        match self.reply(rx).await {
            Ok(_) => Ok(watch),
            // The server keeps an exists-watch on a missing node (it would
            // fire on creation); our side simply forgets it.
            Err(Error::Code(code::NO_NODE)) => {
                drop(watch);
                self.inner.forget_closed_watches(path);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    pub async fn multi_create(&self, ops: &[(String, i32)]) -> Result<(), Error> {
        let b = self.call(op::MULTI, wire::multi_create(ops)).await?;
        match wire::multi_error(&b)? {
            0 => Ok(()),
            c => Err(Error::Code(c)),
        }
    }

    /// Ends the session on the server (its ephemeral nodes go at once).
    pub async fn close(mut self) {
        self.close_now().await;
    }

    async fn close_now(&mut self) {
        // Closed first, so the reader does not reconnect when the server
        // hangs up after answering.
        if self.inner.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        let r = self
            .send_anyway(vec![Req::new(op::CLOSE_SESSION, Vec::new())])
            .await;
        if let Ok(mut v) = r {
            if let Some((rx, _)) = v.pop() {
                let _ = tokio::time::timeout(Duration::from_secs(2), rx).await;
            }
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if self.inner.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        // Best effort: tell the server now rather than let the session time out.
        let inner = self.inner.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut guard = inner.writer.lock().await;
                if let Some(w) = guard.as_mut() {
                    let xid = inner.next_xid.fetch_add(1, Ordering::Relaxed);
                    let _ = w
                        .write_all(&wire::request(xid, op::CLOSE_SESSION, &[]))
                        .await;
                    let _ = w.shutdown().await;
                }
                *guard = None;
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    fn check(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Relaxed) {
            Err(Error::Closed)
        } else if self.expired.load(Ordering::Relaxed) {
            Err(Error::SessionExpired)
        } else {
            Ok(())
        }
    }

    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_send_ms.store(ms, Ordering::Relaxed);
    }

    fn forget_closed_watches(&self, path: &str) {
        let mut p = lock(&self.pending);
        if let Some(v) = p.watches.get_mut(path) {
            v.retain(|w| !w.is_closed());
            if v.is_empty() {
                p.watches.remove(path);
            }
        }
    }

    /// Fails everything in flight: the connection is gone.
    fn fail_all(&self) {
        let mut p = lock(&self.pending);
        for (_, tx) in p.calls.drain() {
            let _ = tx.send(Err(Error::ConnectionLoss));
        }
        // Dropping the senders wakes every watcher.
        p.watches.clear();
    }

    /// Connects and handshakes (a new session, or the existing one),
    /// trying servers in turn from `first` (default: the one after the
    /// last) until `deadline`; installs the writer, returns the reader.
    async fn establish(
        &self,
        first: Option<usize>,
        deadline: Instant,
    ) -> Result<BufReader<OwnedReadHalf>, Error> {
        let n = self.servers.len().max(1);
        let mut i = first.unwrap_or_else(|| lock(&self.session).server + 1) % n;
        loop {
            self.check()?;
            let (id, passwd) = {
                let s = lock(&self.session);
                (s.id, s.passwd.clone())
            };
            let addr = &self.servers[i];
            let answer = tokio::time::timeout(CONNECT_TIMEOUT, self.handshake(addr, id, &passwd));
            if let Ok(Ok((resp, reader, writer))) = answer.await {
                if resp.timeout_ms <= 0 {
                    self.expired.store(true, Ordering::Relaxed);
                    return Err(Error::SessionExpired);
                }
                {
                    let mut s = lock(&self.session);
                    s.id = resp.session_id;
                    s.passwd = resp.passwd;
                    s.timeout = Duration::from_millis(resp.timeout_ms as u64);
                    s.server = i;
                }
                *self.writer.lock().await = Some(writer);
                self.touch();
                return Ok(reader);
            }
            if Instant::now() > deadline {
                if id != 0 {
                    self.expired.store(true, Ordering::Relaxed);
                    return Err(Error::SessionExpired);
                }
                return Err(Error::Protocol(format!(
                    "no ZooKeeper server accepted a session ({})",
                    self.servers.join(",")
                )));
            }
            i = (i + 1) % n;
            tokio::time::sleep(RECONNECT_PAUSE).await;
        }
    }

    async fn handshake(
        &self,
        addr: &str,
        id: i64,
        passwd: &[u8],
    ) -> Result<
        (
            wire::ConnectResponse,
            BufReader<OwnedReadHalf>,
            OwnedWriteHalf,
        ),
        Error,
    > {
        let io = |_| Error::ConnectionLoss;
        let stream = TcpStream::connect(addr).await.map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (r, mut w) = stream.into_split();
        let mut r = BufReader::with_capacity(64 * 1024, r);
        let last = self.last_zxid.load(Ordering::Relaxed) as i64;
        let ms = self.requested_timeout.as_millis() as i32;
        w.write_all(&wire::connect_request(last, ms, id, passwd))
            .await
            .map_err(io)?;
        let payload = read_packet(&mut r).await?;
        let resp = wire::connect_response(&payload)?;
        Ok((resp, r, w))
    }

    fn deliver(&self, payload: &[u8]) -> Result<(), Error> {
        let mut d = Dec::new(payload);
        let h = wire::reply_header(&mut d)?;
        if h.zxid > 0 {
            self.last_zxid.fetch_max(h.zxid as u64, Ordering::Relaxed);
        }
        match h.xid {
            wire::XID_PING => {}
            wire::XID_WATCH_EVENT => {
                let path = wire::watcher_event_path(&mut d)?;
                let fired = lock(&self.pending).watches.remove(&path);
                for w in fired.into_iter().flatten() {
                    let _ = w.send(());
                }
            }
            xid => {
                let tx = lock(&self.pending).calls.remove(&xid);
                if let Some(tx) = tx {
                    let body = if h.err == 0 {
                        Ok(payload[16..].to_vec())
                    } else {
                        Err(Error::Code(h.err))
                    };
                    let _ = tx.send(body);
                }
            }
        }
        Ok(())
    }
}

async fn read_packet(r: &mut BufReader<OwnedReadHalf>) -> Result<Vec<u8>, Error> {
    let len = r.read_i32().await.map_err(|_| Error::ConnectionLoss)?;
    if len < 0 || len as usize > wire::MAX_PACKET {
        return Err(Error::Protocol(format!("packet length {len}")));
    }
    let mut buf = vec![0; len as usize];
    r.read_exact(&mut buf)
        .await
        .map_err(|_| Error::ConnectionLoss)?;
    Ok(buf)
}

/// Reads replies until the connection fails, then reconnects; ends when
/// the session is closed or expired.
async fn read_loop(inner: Arc<Inner>, mut reader: BufReader<OwnedReadHalf>) {
    loop {
        // Two thirds of the session timeout without a packet (pings come
        // every third): the server is gone even if the socket is not.
        let silence = lock(&inner.session).timeout * 2 / 3;
        while let Ok(Ok(p)) = tokio::time::timeout(silence, read_packet(&mut reader)).await {
            if inner.deliver(&p).is_err() {
                break;
            }
        }
        if let Some(mut w) = inner.writer.lock().await.take() {
            let _ = w.shutdown().await;
        }
        inner.fail_all();
        if inner.check().is_err() {
            return;
        }
        let give_up = Instant::now() + lock(&inner.session).timeout;
        match inner.establish(None, give_up).await {
            Ok(r) => reader = r,
            Err(_) => {
                inner.fail_all();
                return;
            }
        }
    }
}

async fn ping_loop(inner: Arc<Inner>) {
    loop {
        let every = lock(&inner.session).timeout / 3;
        // Checked twice per period, so the longest quiet stretch is 1.5
        // periods: half the timeout, under the reader's two thirds.
        tokio::time::sleep(every / 2).await;
        if inner.check().is_err() {
            return;
        }
        let idle_ms = (inner.epoch.elapsed().as_millis() as u64)
            .saturating_sub(inner.last_send_ms.load(Ordering::Relaxed));
        if idle_ms < every.as_millis() as u64 {
            continue;
        }
        let mut guard = inner.writer.lock().await;
        if let Some(w) = guard.as_mut() {
            if w.write_all(&wire::request(wire::XID_PING, op::PING, &[]))
                .await
                .is_ok()
            {
                inner.touch();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Reads one framed packet from the fake server's side.
    async fn packet(s: &mut TcpStream) -> Vec<u8> {
        let len = s.read_i32().await.unwrap_or(0);
        let mut buf = vec![0; len.max(0) as usize];
        let _ = s.read_exact(&mut buf).await;
        buf
    }

    /// The connect request's session id and password.
    fn session_of(connect: &[u8]) -> (i64, Vec<u8>) {
        let mut d = Dec::new(connect);
        let _protocol = d.i32();
        let _zxid = d.i64();
        let _timeout = d.i32();
        let id = d.i64().unwrap_or(-1);
        let passwd = d.buf().map(<[u8]>::to_vec).unwrap_or_default();
        (id, passwd)
    }

    async fn accept_session(l: &TcpListener, id: i64) -> (TcpStream, (i64, Vec<u8>)) {
        let (mut s, _) = l.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
        let asked = session_of(&packet(&mut s).await);
        let mut e = wire::Enc::new();
        e.i32(0).i32(4000).i64(id).buf(&[7; 16]).bool(false);
        let _ = s.write_all(&e.finish()).await;
        (s, asked)
    }

    fn reply(xid: i32, body: &[u8]) -> Vec<u8> {
        let mut e = wire::Enc::new();
        e.i32(xid).i64(1).i32(0);
        let mut f = e.finish();
        f.extend_from_slice(body);
        let len = (f.len() - 4) as i32;
        f[..4].copy_from_slice(&len.to_be_bytes());
        f
    }

    /// Against a fake server on a real socket: two requests sent together
    /// are answered in order by xid, and after the server drops the
    /// connection the client comes back with the same session id and
    /// password (not a new session), failing what was in flight.
    #[tokio::test]
    async fn pipelines_and_resumes_the_session() {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let server = async {
            let (mut s, asked) = accept_session(&l, 42).await;
            assert_eq!(asked.0, 0, "a new session asks for id 0");
            let mut xids = Vec::new();
            for want in [op::CREATE, op::GET_CHILDREN] {
                let p = packet(&mut s).await;
                let mut d = Dec::new(&p);
                xids.push(d.i32().unwrap_or(0));
                assert_eq!(d.i32(), Ok(want));
            }
            assert!(xids[0] < xids[1]);
            let mut created = wire::Enc::new();
            created.str("/l/n-0000000001");
            let mut listed = wire::Enc::new();
            listed.i32(1).str("n-0000000001");
            let _ = s.write_all(&reply(xids[0], &created.finish()[4..])).await;
            let _ = s.write_all(&reply(xids[1], &listed.finish()[4..])).await;
            // A request the server never answers: the connection drops.
            let _ = packet(&mut s).await;
            drop(s);
            accept_session(&l, 42).await
        };
        let client = async {
            let c = Client::connect(
                vec![addr],
                0,
                Duration::from_secs(4),
                Duration::from_secs(5),
            )
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
            let sent = c
                .send(vec![
                    Req::new(
                        op::CREATE,
                        wire::create("/l/n-", &[], wire::EPHEMERAL_SEQUENTIAL),
                    ),
                    Req::new(op::GET_CHILDREN, wire::path_watch("/l", false)),
                ])
                .await
                .unwrap_or_default();
            let mut answers = Vec::new();
            for (rx, _) in sent {
                answers.push(c.reply(rx).await);
            }
            let created = answers[0].as_ref().map(|b| Dec::new(b).string());
            assert_eq!(created, Ok(Ok("/l/n-0000000001".to_string())));
            let listed = answers[1].as_ref().map(|b| Dec::new(b).strings());
            assert_eq!(listed, Ok(Ok(vec!["n-0000000001".to_string()])));
            assert_eq!(
                c.delete("/l/n-0000000001").await,
                Err(Error::ConnectionLoss)
            );
            c
        };
        let ((_s, asked), c) = tokio::join!(server, client);
        assert_eq!(
            asked,
            (42, vec![7; 16]),
            "the reconnect resumes the session"
        );
        drop(c);
    }
}
