//! A three-member in-process cluster with a ZooKeeper door on each
//! member, and a blocking ZooKeeper client over the codec. Client code
//! runs on a blocking thread (`Cluster::client`) while the members run on
//! the test's runtime.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use raftlock_node::{ClusterSettings, LocalCluster};
use raftlock_zookeeper::door::{Door, DoorConfig};
use raftlock_zookeeper::wire::*;
use tokio_util::codec::{Decoder, Encoder};

pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// Clusters in one test binary run one at a time: several three-member
/// clusters on a small machine starve each other's elections.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Cluster {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    pub inner: LocalCluster,
    pub doors: Vec<Door>,
    _dir: tempfile::TempDir,
}

pub fn settings() -> ClusterSettings {
    ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        session_ttl_min_ms: 200,
        ..ClusterSettings::default()
    }
}

/// Door settings for tests: short session timeouts allowed.
pub fn door_config() -> DoorConfig {
    DoorConfig {
        min_session_timeout_ms: 200,
        ..DoorConfig::default()
    }
}

impl Cluster {
    pub async fn start(config: DoorConfig) -> Cluster {
        Self::start_with(config, None).await
    }

    /// Doors serving TLS with `tls`, as `raftlock serve` with `[tls]`.
    pub async fn start_tls(
        config: DoorConfig,
        tls: std::sync::Arc<raftlock_tls::rustls::ServerConfig>,
    ) -> Cluster {
        Self::start_with(config, Some(tls)).await
    }

    async fn start_with(
        config: DoorConfig,
        tls: Option<std::sync::Arc<raftlock_tls::rustls::ServerConfig>>,
    ) -> Cluster {
        let serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = LocalCluster::start(dir.path(), 3, settings())
            .await
            .expect("cluster starts");
        inner
            .leader(Duration::from_secs(20))
            .await
            .expect("a leader");
        let mut doors = Vec::new();
        for node in inner.running() {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a door");
            let door = match &tls {
                Some(tls) => Door::spawn_tls(node.clone(), listener, config.clone(), tls.clone()),
                None => Door::spawn(node.clone(), listener, config.clone()),
            };
            doors.push(door.expect("door"));
        }
        Cluster {
            _serial: serial,
            inner,
            doors,
            _dir: dir,
        }
    }

    /// Member `id`'s door address.
    pub fn addr(&self, id: usize) -> SocketAddr {
        self.doors[id - 1].local_addr()
    }

    /// Every door's address, member 1 first.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.doors.iter().map(Door::local_addr).collect()
    }
}

/// Runs blocking client code beside the cluster.
pub async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("client code")
}

/// One client connection through [`ClientCodec`].
pub struct Conn {
    pub stream: TcpStream,
    codec: ClientCodec,
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
    pub fn handshake(addr: SocketAddr, connect: ConnectRequest) -> (Self, Option<ConnectResponse>) {
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
                    assert!(r.header.zxid >= self.last_zxid, "zxids never go back");
                    self.last_zxid = r.header.zxid;
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

    /// The queued notifications, as (type, path).
    pub fn take_events(&mut self) -> Vec<(EventType, String)> {
        self.events
            .drain(..)
            .map(|e| (e.event_type, e.path))
            .collect()
    }
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
