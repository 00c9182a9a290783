//! A blocking ZooKeeper client over the codec, for the tests that speak
//! the wire protocol to raftlock's door (`common/`) and to a real
//! ZooKeeper (`real_zookeeper.rs`): one connection, replies matched to
//! their xid, notifications queued while a reply is awaited.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::BytesMut;
use raftlock_zookeeper::wire::*;
use tokio_util::codec::{Decoder, Encoder};

/// How long a test waits for one answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// One client connection through [`ClientCodec`].
pub struct Conn {
    pub stream: TcpStream,
    pub codec: ClientCodec,
    buf: BytesMut,
    next_xid: i32,
    /// Notifications that arrived while waiting for a reply.
    pub events: VecDeque<WatcherEvent>,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub last_zxid: i64,
}

impl Conn {
    /// Opens the TCP connection and sends `connect`; the answer, or `None`
    /// when the server closed the connection instead.
    pub fn handshake(
        addr: impl ToSocketAddrs,
        connect: ConnectRequest,
    ) -> (Self, Option<ConnectResponse>) {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let mut conn = Self {
            stream,
            codec: ClientCodec::default(),
            buf: BytesMut::new(),
            next_xid: 1,
            events: VecDeque::new(),
            session_id: connect.session_id,
            passwd: connect.passwd.clone(),
            last_zxid: connect.last_zxid_seen,
        };
        conn.write(ClientPacket::Connect(connect));
        let rsp = match conn.read() {
            Some(ServerPacket::Connect(rsp)) => Some(rsp),
            None => None,
            other => panic!("expected a connect response, got {other:?}"),
        };
        if let Some(rsp) = &rsp {
            conn.session_id = rsp.session_id;
            conn.passwd = rsp.passwd.clone();
        }
        (conn, rsp)
    }

    /// A new session with the given timeout.
    pub fn connect(addr: SocketAddr, time_out: i32) -> Self {
        let (conn, rsp) = Self::handshake(
            addr,
            ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: Some(false),
            },
        );
        let rsp = rsp.expect("a session");
        assert!(rsp.time_out > 0, "{rsp:?}");
        conn
    }

    /// Resumes a session on `addr`; the answer, if any.
    pub fn resume(
        addr: SocketAddr,
        session_id: i64,
        passwd: Vec<u8>,
        last_zxid_seen: i64,
    ) -> (Self, Option<ConnectResponse>) {
        Self::handshake(
            addr,
            ConnectRequest {
                protocol_version: 0,
                last_zxid_seen,
                time_out: 10_000,
                session_id,
                passwd,
                read_only: None,
            },
        )
    }

    pub fn write(&mut self, packet: ClientPacket) {
        let mut out = BytesMut::new();
        self.codec.encode(packet, &mut out).expect("encode");
        self.stream.write_all(&out).expect("send");
    }

    /// The next packet, or `None` once the server closed the connection.
    pub fn read(&mut self) -> Option<ServerPacket> {
        loop {
            if let Some(packet) = self.codec.decode(&mut self.buf).expect("decode") {
                return Some(packet);
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// True once the server has closed the connection (reads EOF).
    pub fn is_closed(&mut self) -> bool {
        let mut chunk = [0u8; 64];
        matches!(self.stream.read(&mut chunk), Ok(0))
            || matches!(self.stream.read(&mut chunk), Err(e) if e.kind() == ErrorKind::ConnectionReset)
    }

    /// Sends `op` with `xid` and returns the reply to it, queueing the
    /// notifications that come first.
    pub fn call_xid(&mut self, xid: i32, op: OpRequest) -> Reply {
        self.write(ClientPacket::Request(Request { xid, op }));
        loop {
            match self.read() {
                Some(ServerPacket::Reply(r)) if r.header.xid == xid::NOTIFICATION => {
                    let ReplyBody::Notification(e) = r.body else {
                        panic!("notification without an event: {r:?}");
                    };
                    self.events.push_back(e);
                }
                Some(ServerPacket::Reply(r)) => {
                    assert_eq!(r.header.xid, xid, "replies come in order");
                    // A real ZooKeeper answers an auth packet with zxid 0,
                    // outside the order of the session's other replies.
                    if xid != xid::AUTH {
                        assert!(
                            r.header.zxid >= self.last_zxid,
                            "zxids never go back: {r:?} after zxid {}",
                            self.last_zxid
                        );
                        self.last_zxid = r.header.zxid;
                    }
                    return r;
                }
                other => panic!("expected a reply to {xid}, got {other:?}"),
            }
        }
    }

    pub fn call(&mut self, op: OpRequest) -> Reply {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.call_xid(xid, op)
    }

    /// Calls and expects success; returns the body.
    pub fn ok(&mut self, op: OpRequest) -> ReplyBody {
        let what = format!("{op:?}");
        let r = self.call(op);
        assert_eq!(r.header.err, ErrorCode::Ok, "{what}");
        r.body
    }

    /// Calls and expects `err` with a header-only answer.
    pub fn fails(&mut self, op: OpRequest, err: ErrorCode) {
        let what = format!("{op:?}");
        let r = self.call(op);
        assert_eq!(r.header.err, err, "{what}");
        assert_eq!(r.body, ReplyBody::Empty, "{what}");
    }

    pub fn ping(&mut self) {
        let r = self.call_xid(xid::PING, OpRequest::Ping);
        assert_eq!(r.header.err, ErrorCode::Ok);
    }

    /// The next notification (already queued, or read now).
    pub fn event(&mut self) -> WatcherEvent {
        if let Some(e) = self.events.pop_front() {
            return e;
        }
        match self.read() {
            Some(ServerPacket::Reply(Reply {
                header,
                body: ReplyBody::Notification(e),
            })) if header.xid == xid::NOTIFICATION => e,
            other => panic!("expected a notification, got {other:?}"),
        }
    }

    /// The queued notifications, as (type, path).
    pub fn take_events(&mut self) -> Vec<(EventType, String)> {
        self.events
            .drain(..)
            .map(|e| (e.event_type, e.path))
            .collect()
    }
}

pub fn path(path: &str) -> PathRequest {
    PathRequest { path: path.into() }
}

pub fn create(path: &str, data: &[u8], mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: vec![Acl::open_unsafe()],
        mode,
    }
}

pub fn pw(path: &str, watch: bool) -> PathWatchRequest {
    PathWatchRequest {
        path: path.into(),
        watch,
    }
}

pub fn stat_of(body: ReplyBody) -> Stat {
    match body {
        ReplyBody::Stat(s) => s,
        other => panic!("expected a stat, got {other:?}"),
    }
}

pub fn created(body: ReplyBody) -> String {
    match body {
        ReplyBody::Create { path } => path,
        other => panic!("expected a create answer, got {other:?}"),
    }
}
