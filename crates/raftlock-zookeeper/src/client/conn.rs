//! The connection side of a [`super::Client`]: the handshake (a new
//! session or a resumed one), the reader that matches answers and fires
//! watches, and the pinger.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use tokio::sync::Notify;

use super::{lock, Error, Inner, State, Writer};
use crate::wire::{
    from_bytes, split_frame, write_frame, xid, ConnectRequest, ConnectResponse, EventType,
    KeeperState, Record, Reply, ReplyBody, DEFAULT_MAX_FRAME,
};

/// Longest wait for one server's TCP connect and handshake answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two servers that did not answer.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

/// The read half of a connection and the bytes read but not yet framed.
pub(super) struct Reader {
    half: OwnedReadHalf,
    buf: BytesMut,
    /// Notified by the writer when a write on this connection failed.
    broken: Arc<Notify>,
}

impl Reader {
    /// The next whole frame; `Err` when the socket closed or failed.
    async fn frame(&mut self) -> Result<BytesMut, Error> {
        loop {
            match split_frame(&mut self.buf, DEFAULT_MAX_FRAME) {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => {}
                Err(e) => return Err(Error::Protocol(e.to_string())),
            }
            self.buf.reserve(64 * 1024);
            match self.half.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return Err(Error::ConnectionLoss),
                Ok(_) => {}
            }
        }
    }
}

impl Inner {
    /// Connects and handshakes (a new session, or the existing one),
    /// trying servers in turn from `first` (default: the one after the
    /// last) until `deadline`; installs the writer, returns the reader.
    pub(super) async fn establish(
        &self,
        first: Option<usize>,
        deadline: Instant,
    ) -> Result<Reader, Error> {
        let n = self.config.servers.len().max(1);
        let mut i = first.unwrap_or_else(|| lock(&self.session).server + 1) % n;
        loop {
            self.check()?;
            let (id, passwd) = {
                let s = lock(&self.session);
                (s.id, s.passwd.clone())
            };
            let Some(addr) = self.config.servers.get(i) else {
                return Err(Error::Protocol("no ZooKeeper server given".into()));
            };
            let sent = Instant::now();
            let answer = tokio::time::timeout(CONNECT_TIMEOUT, self.handshake(addr, id, &passwd));
            if let Ok(Ok((resp, reader, writer))) = answer.await {
                if resp.time_out <= 0 {
                    self.state.send_replace(State::Expired);
                    return Err(Error::SessionExpired);
                }
                {
                    let mut s = lock(&self.session);
                    s.id = resp.session_id;
                    s.passwd = resp.passwd;
                    s.timeout = Duration::from_millis(resp.time_out as u64);
                    s.server = i;
                }
                *lock(&self.renewed) = sent;
                *self.writer.lock().await = Some(writer);
                // Not over a close or an expiry that raced the handshake.
                self.state.send_if_modified(|s| {
                    let connect = *s == State::Disconnected;
                    if connect {
                        *s = State::Connected;
                    }
                    connect
                });
                return Ok(reader);
            }
            if Instant::now() > deadline {
                if id != 0 {
                    self.state.send_replace(State::Expired);
                    return Err(Error::SessionExpired);
                }
                return Err(Error::Protocol(format!(
                    "no ZooKeeper server accepted a session ({})",
                    self.config.servers.join(",")
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
    ) -> Result<(ConnectResponse, Reader, Writer), Error> {
        let io = |_| Error::ConnectionLoss;
        let stream = TcpStream::connect(addr).await.map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (r, mut w) = stream.into_split();
        let timeout = self.config.session_timeout.as_millis();
        let connect = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid.load(Ordering::Relaxed) as i64,
            time_out: i32::try_from(timeout).unwrap_or(i32::MAX),
            session_id: id,
            passwd: passwd.to_vec(),
            read_only: Some(false),
        };
        let mut frame = BytesMut::new();
        write_frame(&mut frame, DEFAULT_MAX_FRAME, |b| connect.write(b))
            .map_err(|e| Error::Protocol(e.to_string()))?;
        w.write_all(&frame).await.map_err(io)?;
        let broken = Arc::new(Notify::new());
        let mut reader = Reader {
            half: r,
            buf: BytesMut::with_capacity(64 * 1024),
            broken: broken.clone(),
        };
        let answer = reader.frame().await?;
        let resp = from_bytes::<ConnectResponse>(&answer)
            .map_err(|e| Error::Protocol(format!("connect answer: {e}")))?;
        Ok((resp, reader, Writer { half: w, broken }))
    }

    /// Routes one frame: an answer to the oldest request in flight, a
    /// ping's answer, or a watch event.
    fn deliver(&self, frame: &[u8]) -> Result<(), Error> {
        let mut o = lock(&self.outstanding);
        let front = o.calls.front().map(|c| (c.xid, c.op));
        let reply = Reply::decode(frame, |x| match front {
            Some((want, op)) if want == x => Some(op),
            _ => None,
        })
        .map_err(|e| Error::Protocol(format!("answer: {e}")))?;
        if reply.header.zxid > 0 {
            self.last_zxid
                .fetch_max(reply.header.zxid as u64, Ordering::Relaxed);
        }
        match (reply.header.xid, reply.body) {
            (xid::PING, _) => {
                let ping = o.pings.pop_front();
                drop(o);
                if let Some(ping) = ping {
                    let mut renewed = lock(&self.renewed);
                    *renewed = (*renewed).max(ping.sent);
                    if let Some(tx) = ping.answer {
                        let _ = tx.send(());
                    }
                }
            }
            (xid::NOTIFICATION, ReplyBody::Notification(event)) => {
                if event.event_type == EventType::None {
                    drop(o);
                    if event.state == KeeperState::Expired {
                        self.state.send_replace(State::Expired);
                    }
                    return Ok(());
                }
                let mut fired = Vec::new();
                o.watches.retain(|(kind, path), senders| {
                    let hit = *path == event.path && kind.fires_on(event.event_type);
                    if hit {
                        fired.append(senders);
                    }
                    !hit
                });
                drop(o);
                for w in fired {
                    let _ = w.send(event.event_type);
                }
            }
            (xid::AUTH | xid::SET_WATCHES, _) => {}
            (got, body) => {
                // `decode` only reads a body for the oldest request's xid.
                let Some(call) = o.calls.pop_front().filter(|c| c.xid == got) else {
                    return Err(Error::Protocol(format!(
                        "answer for xid {got} out of order (expected {:?})",
                        front.map(|f| f.0)
                    )));
                };
                drop(o);
                let answer = if reply.header.err.is_ok() {
                    Ok(body)
                } else {
                    Err(Error::Code(reply.header.err))
                };
                let _ = call.answer.send(answer);
            }
        }
        Ok(())
    }
}

/// Reads answers until the connection fails, then (with reconnect)
/// resumes the session; ends when it is closed, expired, or not resumed.
pub(super) async fn read_loop(inner: Arc<Inner>, mut reader: Reader) {
    loop {
        // Two thirds of the session timeout without a packet (pings go
        // every third): the server is gone even if the socket is not.
        let silence = lock(&inner.session).timeout * 2 / 3;
        let broken = reader.broken.clone();
        loop {
            let frame = tokio::select! {
                frame = tokio::time::timeout(silence, reader.frame()) => frame,
                // A write failed: the connection is gone whatever the
                // read side says.
                () = broken.notified() => break,
            };
            let Ok(Ok(frame)) = frame else { break };
            if inner.deliver(&frame).is_err() {
                break;
            }
        }
        if let Some(mut w) = inner.writer.lock().await.take() {
            let _ = w.half.shutdown().await;
        }
        inner.state.send_if_modified(|s| {
            let drop = *s == State::Connected;
            if drop {
                *s = State::Disconnected;
            }
            drop
        });
        inner.fail_all();
        if inner.check().is_err() || !inner.config.reconnect {
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

/// Pings every third of the session timeout, whatever else is sent.
pub(super) async fn ping_loop(inner: Arc<Inner>) {
    loop {
        let every = lock(&inner.session).timeout / 3;
        tokio::time::sleep(every).await;
        if inner.check().is_err() {
            return;
        }
        // A failed write is the reader's to notice.
        let _ = inner.send_ping(None).await;
    }
}
