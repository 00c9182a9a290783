//! One client connection: the handshake, then requests answered one at a
//! time in the order they came (ZooKeeper's FIFO promise), with the watch
//! events due before each answer sent first. A frame that cannot be
//! delimited or read closes the connection with a log line; so does a
//! client silent for its session timeout, as ZooKeeper's server does.
//!
//! Every packet renews the session, as ZooKeeper's server touches a
//! session on each request: a ping through the node's keepalive before
//! its answer, any other request through the same keepalive in the
//! background, coalesced (one renewal in flight per connection, and none
//! sooner than a third of the timeout after the last began), so a busy
//! client does not turn each read into a Raft round.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use raftlock_core::{CoreError, SessionId};
use raftlock_node::{Consistency, Node, NodeError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::access::Access;
use super::session::{from_credentials, password, zk_session_id};
use super::watches::Watches;
use super::DoorConfig;
use crate::wire::{
    ConnectRequest, ConnectResponse, ErrorCode, Incoming, OpRequest, Reply, ReplyBody, ReplyHeader,
    ServerCodec, ServerPacket, WireError,
};

/// A connection's byte stream: plain TCP, or TLS over it.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

type Wire<S> = Framed<S, ServerCodec>;

/// What a connection knows between requests.
pub(crate) struct Conn {
    pub node: Node,
    pub session: SessionId,
    /// The negotiated timeout, ms: the session's TTL.
    pub timeout_ms: u64,
    pub watches: Watches,
    /// What this connection has authenticated as (access.rs).
    pub access: Access,
    /// The `digest` ids its `addauth`s gave it, in order, each once:
    /// what an ACL's `auth` entry becomes (acl.rs).
    pub auth_ids: Vec<String>,
    /// Every change at or below this revision has fired its watches.
    pub cursor: u64,
    /// The largest zxid answered, so zxids never go back.
    pub last_zxid: i64,
    /// Packets to send, in order.
    pub out: Vec<ServerPacket>,
    /// When the newest renewal of the session began (a ping's keepalive,
    /// a request's, or the handshake's).
    pub renewed: Instant,
}

/// Whether the connection goes on.
pub(crate) enum Step {
    Continue,
    Close(String),
}

pub(crate) async fn serve<S: Stream>(
    node: Node,
    stream: S,
    peer: SocketAddr,
    config: Arc<DoorConfig>,
) {
    let mut wire = Framed::new(stream, ServerCodec::new(config.max_frame));
    let handshake = Duration::from_millis(config.handshake_timeout_ms);
    let connect = match tokio::time::timeout(handshake, wire.next()).await {
        Ok(Some(Ok(Incoming::Connect(connect)))) => connect,
        Ok(Some(Err(error))) => {
            tracing::info!(%peer, %error, "zookeeper door: bad handshake, closing");
            return;
        }
        Ok(_) => return,
        Err(_) => {
            tracing::info!(%peer, "zookeeper door: no handshake in time, closing");
            return;
        }
    };
    let Some(mut conn) = connect_session(&node, &config, connect, &mut wire, peer).await else {
        return;
    };
    let reason = run(&mut conn, &mut wire, &config).await;
    tracing::debug!(%peer, session = %conn.session, %reason, "zookeeper door: connection closed");
}

/// Answers the handshake; the connection's state if a session is served.
async fn connect_session<S: Stream>(
    node: &Node,
    config: &DoorConfig,
    connect: ConnectRequest,
    wire: &mut Wire<S>,
    peer: SocketAddr,
) -> Option<Conn> {
    let revision = match node.revision(Consistency::Linearizable).await {
        Ok(revision) => revision,
        Err(error) => {
            tracing::info!(%peer, %error, "zookeeper door: cannot serve a session now, closing");
            return None;
        }
    };
    if connect.last_zxid_seen > i64::try_from(revision).unwrap_or(i64::MAX) {
        // ZooKeeper's answer to a client that saw more than this server:
        // no session here, try another server.
        tracing::info!(%peer, client_zxid = connect.last_zxid_seen, revision,
            "zookeeper door: client has seen a later zxid than this member, closing");
        return None;
    }
    let read_only = connect.read_only.map(|_| false);
    let opened = if connect.session_id == 0 {
        let ttl = config.negotiate(node, connect.time_out);
        node.open_session(&format!("zookeeper {peer}"), Duration::from_millis(ttl))
            .await
            .map(|s| Some((s.id, s.ttl_ms)))
    } else {
        match from_credentials(connect.session_id, &connect.passwd) {
            None => Ok(None),
            Some(id) => match node.keepalive(id).await {
                Ok(ttl) => Ok(Some((
                    id,
                    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
                ))),
                Err(NodeError::Core(CoreError::SessionNotFound(_))) => Ok(None),
                Err(error) => Err(error),
            },
        }
    };
    let (session, ttl_ms) = match opened {
        Ok(Some(opened)) => opened,
        Ok(None) => {
            // Unknown or expired: timeout 0 makes the client raise
            // SESSIONEXPIRED (ZooKeeper answers the same).
            let expired = ConnectResponse {
                protocol_version: 0,
                time_out: 0,
                session_id: 0,
                passwd: vec![0; 16],
                read_only,
            };
            let _ = wire.send(ServerPacket::Connect(expired)).await;
            return None;
        }
        Err(error) => {
            tracing::info!(%peer, %error, "zookeeper door: cannot open or resume the session, closing");
            return None;
        }
    };
    let answer = ConnectResponse {
        protocol_version: 0,
        time_out: i32::try_from(ttl_ms).unwrap_or(i32::MAX),
        session_id: zk_session_id(session),
        passwd: password(session),
        read_only,
    };
    if wire.send(ServerPacket::Connect(answer)).await.is_err() {
        return None;
    }
    Some(Conn {
        node: node.clone(),
        session,
        timeout_ms: ttl_ms,
        watches: Watches::default(),
        access: Access::at_connect(&config.auth),
        auth_ids: Vec::new(),
        cursor: revision,
        last_zxid: i64::try_from(revision).unwrap_or(i64::MAX),
        out: Vec::new(),
        renewed: Instant::now(),
    })
}

async fn run<S: Stream>(conn: &mut Conn, wire: &mut Wire<S>, config: &DoorConfig) -> String {
    let mut latest = conn.node.subscribe_node_changes();
    let node = conn.node.clone();
    let mut heard = Instant::now();
    // A request's renewal under way (at most one).
    let mut renewal: Option<JoinHandle<Result<Duration, NodeError>>> = None;
    loop {
        let silent_until = heard + Duration::from_millis(conn.timeout_ms);
        let step = tokio::select! {
            frame = wire.next() => {
                heard = Instant::now();
                if let Some(Ok(Incoming::Request(request))) = &frame {
                    if request.op == OpRequest::Ping {
                        // The ping renews before it is answered; one
                        // renewal at a time, so a request's goes first.
                        if let Some(under_way) = renewal.take() {
                            let _ = under_way.await;
                        }
                    } else if renewal.is_none() {
                        renewal = conn.renew_if_due();
                    }
                }
                match frame {
                    None => return "closed by the client".into(),
                    Some(Err(error)) => {
                        tracing::info!(session = %conn.session, %error,
                            "zookeeper door: bad frame, closing the connection");
                        return format!("bad frame: {error}");
                    }
                    Some(Ok(Incoming::Request(request))) => {
                        conn.serve_request(&config.auth, request).await
                    }
                    Some(Ok(Incoming::Undecodable(bad))) => match (bad.xid, &bad.error) {
                        // ZooKeeper answers an opcode it does not know.
                        (Some(xid), WireError::UnknownOpcode(_)) => {
                            conn.fail(xid, ErrorCode::Unimplemented);
                            Step::Continue
                        }
                        // And a create whose flags name no mode.
                        (Some(xid), WireError::UnknownCreateMode(_)) => {
                            conn.fail(xid, ErrorCode::BadArguments);
                            Step::Continue
                        }
                        _ => {
                            tracing::info!(session = %conn.session, error = %bad,
                                "zookeeper door: undecodable request, closing the connection");
                            Step::Close(format!("undecodable request: {bad}"))
                        }
                    },
                    Some(Ok(Incoming::Connect(_))) => Step::Close("a second handshake".into()),
                }
            }
            renewed = async {
                match renewal.as_mut() {
                    Some(under_way) => under_way.await,
                    None => std::future::pending().await,
                }
            } => {
                renewal = None;
                match renewed {
                    Ok(Ok(_)) => Step::Continue,
                    Ok(Err(error)) => renewal_failed(conn.session, &error),
                    Err(error) => Step::Close(format!("keepalive failed: {error}")),
                }
            }
            changed = latest.changed() => match changed {
                Ok(()) => {
                    let revision = *latest.borrow_and_update();
                    conn.advance(revision).await;
                    Step::Continue
                }
                Err(_) => Step::Close("the member stopped".into()),
            },
            () = tokio::time::sleep_until(silent_until) => {
                Step::Close("nothing heard within the session timeout".into())
            }
            () = node.stopped() => Step::Close("the member is shutting down".into()),
        };
        for packet in conn.out.drain(..) {
            if let Err(error) = wire.feed(packet).await {
                return format!("write failed: {error}");
            }
        }
        if let Err(error) = wire.flush().await {
            return format!("write failed: {error}");
        }
        if let Step::Close(reason) = step {
            return reason;
        }
    }
}

/// What a failed keepalive (a ping's or a request's) does: the
/// connection ends, saying whether the session is gone.
pub(crate) fn renewal_failed(session: SessionId, error: &NodeError) -> Step {
    if let NodeError::Core(CoreError::SessionNotFound(_)) = error {
        return Step::Close("the session expired".into());
    }
    tracing::info!(%session, %error,
        "zookeeper door: keepalive failed, closing the connection");
    Step::Close(format!("keepalive failed: {error}"))
}

impl Conn {
    /// A request came: the session's renewal, started in the background
    /// if a third of the timeout has passed since the last began.
    fn renew_if_due(&mut self) -> Option<JoinHandle<Result<Duration, NodeError>>> {
        let now = Instant::now();
        if now < self.renewed + Duration::from_millis(self.timeout_ms / 3) {
            return None;
        }
        self.renewed = now;
        let (node, session) = (self.node.clone(), self.session);
        Some(tokio::spawn(async move { node.keepalive(session).await }))
    }

    /// Queues the answer `body` to `xid`, after the watch events of every
    /// change up to `revision`.
    pub async fn reply(&mut self, xid: i32, revision: u64, body: ReplyBody) {
        // A write committed through the leader may not be applied here
        // yet: catch up (a read index), so its events precede this answer.
        let local = self.node.revision(Consistency::Stale).await.unwrap_or(0);
        if local < revision {
            let _ = self.node.revision(Consistency::Linearizable).await;
        }
        self.advance(revision).await;
        let zxid = i64::try_from(revision).unwrap_or(i64::MAX);
        self.last_zxid = self.last_zxid.max(zxid);
        self.push(xid, ErrorCode::Ok, body);
    }

    /// Queues an error answer to `xid`.
    pub fn fail(&mut self, xid: i32, err: ErrorCode) {
        self.push(xid, err, ReplyBody::Empty);
    }

    fn push(&mut self, xid: i32, err: ErrorCode, body: ReplyBody) {
        self.out.push(ServerPacket::Reply(Reply {
            header: ReplyHeader {
                xid,
                zxid: self.last_zxid,
                err,
            },
            body,
        }));
    }
}
