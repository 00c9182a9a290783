//! The dialing side of peer pipes: a small pool of upgraded connections
//! per peer, one call at a time on each.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use raftlock_tls::rustls::pki_types::ServerName;
use raftlock_tls::rustls::ClientConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::frame::{self, Answered, Head};
use super::PROTOCOL;
use crate::raft::typ::NodeId;
use crate::transport::network::{route, CallError};

/// As for HTTP (`network::PeerClient`): a peer that does not accept a
/// connection within this is down or cut off.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Idle connections kept per peer, as many as the HTTP pool keeps. A
/// leader keeps one busy per follower for replication; a follower a few
/// for forwarded writes and keepalives (each limited in flight, see
/// `proposer`), and one per concurrent read index.
const MAX_IDLE: usize = 64;
/// An idle connection older than this is closed rather than reused: well
/// inside the serving side's idle close (`server::IDLE_CLOSE`), so a frame
/// is never written to a connection the peer is closing.
pub(crate) const IDLE_REUSE: Duration = Duration::from_secs(60);
/// A peer that refused the upgrade (an older member) is called over HTTP
/// for this long before the upgrade is tried again.
const PLAIN_HTTP_FOR: Duration = Duration::from_secs(30);
/// Bounds on the upgrade answer's header.
const MAX_HEAD_LINES: usize = 64;

/// A byte stream to a peer: plain TCP or mutual TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One upgraded connection.
struct Pipe {
    io: BufReader<Box<dyn Io>>,
    /// A duplicate of the TCP socket's descriptor, to ask the kernel
    /// whether the peer closed it (see `is_closed`).
    probe: OwnedFd,
}

impl Pipe {
    /// Whether the peer closed this idle connection (or sent something
    /// unasked, which the protocol never does). Polls once without
    /// waiting: an idle connection has nothing to read.
    fn is_closed(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if !matches!(Pin::new(&mut self.io).poll_fill_buf(&mut cx), Poll::Pending) {
            return true;
        }
        // tokio answers from the readiness its reactor last recorded, so
        // a close that arrived since (under load the reactor lags) looks
        // idle. The kernel knows: a peek that reads end-of-stream, or an
        // error, is a closed connection. Bytes waiting (a TLS record not
        // yet decrypted) leave the answer to the poll above.
        let mut byte = [MaybeUninit::<u8>::uninit(); 1];
        match socket2::SockRef::from(&self.probe).peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }

    /// Writes `request` and reads the answer frame.
    async fn exchange(&mut self, request: &[u8]) -> std::io::Result<Vec<u8>> {
        self.io.write_all(request).await?;
        self.io.flush().await?;
        frame::read(&mut self.io).await?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before the answer",
            )
        })
    }
}

/// Why a call did not go over a pipe.
#[derive(Debug)]
pub(crate) enum PipeError {
    /// The peer does not serve pipes (an older member): use HTTP.
    Unsupported,
    /// The call failed, as an HTTP call would have.
    Call(CallError),
}

/// Why a dial did not give a pipe.
enum DialError {
    /// The peer answered the upgrade with something else.
    Unsupported(String),
    /// No connection, no handshake, or no answer to the upgrade.
    Failed(String),
}

/// The pipes of one peer.
#[derive(Default)]
struct PeerPipes {
    /// The address the pooled connections were dialed at.
    addr: String,
    /// Idle connections, with when each went idle; the newest last.
    idle: Vec<(Pipe, Instant)>,
    /// Set when the peer refused the upgrade: HTTP until then.
    plain_http_until: Option<Instant>,
}

/// What the pool had for a call.
enum Checkout {
    Idle(Pipe),
    Dial,
    PlainHttp,
}

/// Every peer's pipes; shared by all Raft connections and forwarding.
pub(crate) struct Pipes {
    /// With `[tls]`: trust the cluster CA, present this member's certificate.
    tls: Option<TlsConnector>,
    peers: Mutex<HashMap<NodeId, PeerPipes>>,
}

impl Pipes {
    pub(crate) fn new(tls: Option<ClientConfig>) -> Pipes {
        Pipes {
            tls: tls.map(|config| TlsConnector::from(Arc::new(config))),
            peers: Mutex::default(),
        }
    }

    /// Sends a `head` + `body` frame to `peer` at `addr` and decodes its
    /// answer, all within `timeout`. A failure before the frame is written
    /// is [`CallError::NotSent`]; after, [`CallError::NoAnswer`].
    pub(crate) async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        peer: NodeId,
        addr: &str,
        head: &Head,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, PipeError> {
        let request = frame::request(head, body)
            .map_err(|e| PipeError::Call(CallError::NotSent(e.to_string())))?;
        let deadline = Instant::now() + timeout;
        let mut pipe = match self.checkout(peer, addr) {
            Checkout::Idle(pipe) => pipe,
            Checkout::PlainHttp => return Err(PipeError::Unsupported),
            Checkout::Dial => match tokio::time::timeout_at(deadline, self.dial(addr)).await {
                Ok(Ok(pipe)) => pipe,
                Ok(Err(DialError::Unsupported(answer))) => {
                    tracing::info!(
                        peer,
                        "node {peer} does not serve peer pipes ({answer}): calling it over HTTP"
                    );
                    self.use_plain_http(peer, addr);
                    return Err(PipeError::Unsupported);
                }
                Ok(Err(DialError::Failed(why))) => {
                    return Err(PipeError::Call(CallError::NotSent(why)))
                }
                Err(_) => {
                    return Err(PipeError::Call(CallError::NotSent(format!(
                        "no pipe to node {peer} at {addr} within {timeout:?}"
                    ))))
                }
            },
        };
        // From here on the frame may reach the peer: any failure is an
        // unknown outcome, and the connection is dropped (never reused).
        let answer = match tokio::time::timeout_at(deadline, pipe.exchange(&request)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                return Err(PipeError::Call(CallError::NoAnswer(format!(
                    "pipe to node {peer}: {e}"
                ))))
            }
            Err(_) => {
                return Err(PipeError::Call(CallError::NoAnswer(format!(
                    "node {peer} did not answer within {timeout:?}"
                ))))
            }
        };
        self.checkin(peer, addr, pipe);
        match frame::read_answer(&answer) {
            Answered::Ok(body) => bincode::deserialize(body)
                .map_err(|e| PipeError::Call(CallError::NoAnswer(format!("bad answer: {e}")))),
            Answered::Refused(why) => Err(PipeError::Call(CallError::NotSent(format!(
                "refused by node {peer}: {why}"
            )))),
            Answered::Failed(why) => Err(PipeError::Call(CallError::NoAnswer(why))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, PeerPipes>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A live idle connection to `peer` at `addr`, if one is pooled.
    fn checkout(&self, peer: NodeId, addr: &str) -> Checkout {
        let mut peers = self.lock();
        let Some(pipes) = peers.get_mut(&peer) else {
            return Checkout::Dial;
        };
        if pipes.addr != addr {
            // Another address (a proxy put on the link, a member re-added
            // elsewhere): what was learnt about the old one is void.
            *pipes = PeerPipes::default();
            return Checkout::Dial;
        }
        if let Some(until) = pipes.plain_http_until {
            if Instant::now() < until {
                return Checkout::PlainHttp;
            }
            pipes.plain_http_until = None;
        }
        while let Some((mut pipe, since)) = pipes.idle.pop() {
            if since.elapsed() < IDLE_REUSE && !pipe.is_closed() {
                return Checkout::Idle(pipe);
            }
        }
        Checkout::Dial
    }

    /// Pools a connection whose last call completed.
    fn checkin(&self, peer: NodeId, addr: &str, pipe: Pipe) {
        let mut peers = self.lock();
        let pipes = peers.entry(peer).or_default();
        if pipes.addr != addr {
            *pipes = PeerPipes {
                addr: addr.to_string(),
                ..PeerPipes::default()
            };
        }
        if pipes.idle.len() < MAX_IDLE {
            pipes.idle.push((pipe, Instant::now()));
        }
    }

    fn use_plain_http(&self, peer: NodeId, addr: &str) {
        let mut peers = self.lock();
        let pipes = peers.entry(peer).or_default();
        *pipes = PeerPipes {
            addr: addr.to_string(),
            idle: Vec::new(),
            plain_http_until: Some(Instant::now() + PLAIN_HTTP_FOR),
        };
    }

    /// Connects to `addr` (TLS with `[tls]`) and upgrades to a pipe.
    async fn dial(&self, addr: &str) -> Result<Pipe, DialError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            DialError::Failed(format!("{what} {addr}: {e}"))
        };
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|e| failed("connecting to", &e))?
            .map_err(|e| failed("connecting to", &e))?;
        // Frames are written whole; an answer must not wait for an ACK.
        let _ = tcp.set_nodelay(true);
        let probe = tcp
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| failed("duplicating the socket to", &e))?;
        let io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(connector) => {
                let name = server_name(addr).map_err(DialError::Failed)?;
                let tls = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| failed("TLS handshake with", &e))?;
                Box::new(tls)
            }
        };
        let mut io = BufReader::new(io);
        let ask = format!(
            "GET {} HTTP/1.1\r\nhost: {addr}\r\nconnection: upgrade\r\nupgrade: {PROTOCOL}\r\n\r\n",
            route::PIPE
        );
        io.write_all(ask.as_bytes())
            .await
            .map_err(|e| failed("upgrading", &e))?;
        io.flush().await.map_err(|e| failed("upgrading", &e))?;
        let status = read_head(&mut io)
            .await
            .map_err(|e| failed("upgrade answer from", &e))?;
        if !status.starts_with("HTTP/1.1 101") {
            return Err(DialError::Unsupported(status));
        }
        Ok(Pipe { io, probe })
    }
}

/// Reads an HTTP answer's head; returns its status line.
async fn read_head<R: AsyncBufRead + Unpin>(io: &mut R) -> std::io::Result<String> {
    let mut status = String::new();
    let mut line = String::new();
    for _ in 0..MAX_HEAD_LINES {
        line.clear();
        if io.read_line(&mut line).await? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before the answer's head ended",
            ));
        }
        if line == "\r\n" {
            return Ok(status);
        }
        if status.is_empty() {
            status = line.trim_end().to_string();
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "answer head too long",
    ))
}

/// The TLS server name of `host:port` (a DNS name or an IP address), as
/// an HTTPS client would check the peer's certificate against it.
fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host)
        .map(|name| name.to_owned())
        .map_err(|e| format!("bad host {host:?} in address {addr:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;
    use crate::transport::pipe::Kind;

    /// A member of an older version answers the upgrade 404 (no such
    /// route): the call says so (the caller then uses HTTP), and the peer
    /// is not dialed again for pipes for a while.
    #[tokio::test]
    async fn a_peer_without_pipes_is_called_over_http() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut head = vec![0u8; 1024];
                let _ = socket.read(&mut head).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let pipes = Pipes::new(None);
        let head = Head {
            kind: Kind::Vote,
            claims: None,
        };
        for _ in 0..3 {
            let answer: Result<u64, PipeError> = pipes
                .call(2, &addr, &head, &0u64, Duration::from_secs(5))
                .await;
            assert!(matches!(answer, Err(PipeError::Unsupported)), "{answer:?}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "asked once, then HTTP");
    }

    /// A pooled pipe whose peer has closed is seen closed even when the
    /// runtime has not yet processed the close: here the test never
    /// yields between the close and the check, so tokio's reactor cannot
    /// have recorded it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_close_the_runtime_has_not_seen_yet_is_seen() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let (peer, _) = listener.accept().expect("accept");
        let probe = tcp.as_fd().try_clone_to_owned().expect("dup");
        let mut pipe = Pipe {
            io: BufReader::new(Box::new(tcp)),
            probe,
        };
        assert!(!pipe.is_closed(), "an open, idle pipe");
        drop(peer);
        assert!(pipe.is_closed(), "the peer closed it");
    }

    #[test]
    fn server_names_come_from_the_host() {
        assert!(matches!(
            server_name("127.0.0.1:7001"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:7001"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("node-1.example:7001"),
            Ok(ServerName::DnsName(_))
        ));
    }
}
