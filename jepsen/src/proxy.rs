//! A fault-injecting TCP proxy for one directed link between two nodes.
//!
//! Node *i* dials node *j*'s Raft port through the proxy for link i→j
//! (`raftlock serve --peer j=<proxy addr>`), so the harness decides, per
//! link and independently, whether bytes flow, flow late, or not at all.
//! Follower→leader forwarding uses the same port, so a cut link really
//! cuts everything node *i* sends to node *j* (and the answers on those
//! connections).
//!
//! Each accepted connection gets its own task that copies bytes both ways
//! and watches the link state:
//! - [`LinkState::Up`]: bytes are forwarded, each chunk after `delay`;
//! - [`LinkState::Drop`]: a partition as a network sees it. Nothing is
//!   forwarded and nothing is read any more (the sender's buffers fill up,
//!   its requests time out); new connections are accepted and then
//!   ignored. When the link heals, every connection that lost bytes is
//!   closed, since the byte stream on it is no longer whole.
//! - [`LinkState::Refuse`]: open connections are closed at once and new
//!   ones are closed as soon as they are accepted (the peer sees a reset
//!   or an early EOF instead of a timeout).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long the proxy waits for the upstream node to accept a connection.
/// A dead node refuses at once; a paused one never answers.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a link does with the bytes sent over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Forwarded, each chunk after `delay` (zero for a healthy link).
    Up {
        /// Added latency per chunk, per direction.
        delay: Duration,
    },
    /// Partitioned: nothing forwarded, connections left hanging.
    Drop,
    /// Partitioned: connections closed, new ones closed on accept.
    Refuse,
}

impl LinkState {
    /// A healthy link.
    pub const HEALTHY: LinkState = LinkState::Up {
        delay: Duration::ZERO,
    };

    fn is_up(self) -> bool {
        matches!(self, LinkState::Up { .. })
    }
}

/// A running proxy: a listener on a free loopback port forwarding to one
/// upstream address. Dropping it stops the listener and closes every
/// connection through it.
#[derive(Debug)]
pub struct LinkProxy {
    /// Where the downstream node dials.
    addr: SocketAddr,
    /// Current state; every connection task watches it.
    state: watch::Sender<LinkState>,
    /// The accept loop, aborted on drop.
    accept: JoinHandle<()>,
}

impl LinkProxy {
    /// Binds `127.0.0.1:0` and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<LinkProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (state, _) = watch::channel(LinkState::HEALTHY);
        let watcher = state.subscribe();
        let accept = tokio::spawn(accept_loop(listener, upstream, watcher));
        Ok(LinkProxy {
            addr,
            state,
            accept,
        })
    }

    /// The proxy's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Changes what the link does, for open and new connections alike.
    pub fn set(&self, state: LinkState) {
        self.state.send_replace(state);
    }

    /// What the link does now.
    pub fn state(&self) -> LinkState {
        *self.state.borrow()
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        // Connection tasks end when they see the sender gone.
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    state: watch::Receiver<LinkState>,
) {
    loop {
        match listener.accept().await {
            Ok((inbound, _)) => {
                tokio::spawn(connection(inbound, upstream, state.clone()));
            }
            // Out of descriptors or similar: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Why a copy loop stopped.
enum End {
    /// A side closed or failed: the connection is over.
    Closed,
    /// The link was cut while bytes were in flight or awaited.
    Cut,
}

async fn connection(
    inbound: TcpStream,
    upstream: SocketAddr,
    mut state: watch::Receiver<LinkState>,
) {
    let initial = *state.borrow_and_update();
    match initial {
        LinkState::Refuse => return,
        LinkState::Drop => {
            // Hold the connection silently until the partition ends.
            let _ = state.wait_for(|s| *s != LinkState::Drop).await;
            return;
        }
        LinkState::Up { .. } => {}
    }
    let outbound = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(stream)) => stream,
        _ => return,
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let end = tokio::select! {
        end = pump(&mut in_read, &mut out_write, state.clone()) => end,
        end = pump(&mut out_read, &mut in_write, state.clone()) => end,
    };
    if let End::Cut = end {
        if *state.borrow() == LinkState::Drop {
            // Keep both sockets open (and unread) until the link heals.
            let _ = state.wait_for(|s| *s != LinkState::Drop).await;
        }
    }
    // Dropping the halves closes both connections.
}

/// Copies `from` → `to` while the link is up.
async fn pump(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    mut state: watch::Receiver<LinkState>,
) -> End {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return End::Closed,
                Ok(n) => n,
            },
            changed = state.changed() => {
                if changed.is_err() {
                    return End::Closed;
                }
                if !state.borrow_and_update().is_up() {
                    return End::Cut;
                }
                continue;
            }
        };
        let now = *state.borrow_and_update();
        match now {
            LinkState::Up { delay } => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                    // The link may have been cut while the bytes waited.
                    if !state.borrow_and_update().is_up() {
                        return End::Cut;
                    }
                }
                if to.write_all(&buf[..n]).await.is_err() {
                    return End::Closed;
                }
            }
            LinkState::Drop | LinkState::Refuse => return End::Cut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo server on a free port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> io::Result<Vec<u8>> {
        s.write_all(msg).await?;
        let mut buf = vec![0u8; msg.len()];
        s.read_exact(&mut buf).await?;
        Ok(buf)
    }

    #[tokio::test]
    async fn forwards_cuts_and_heals() {
        let proxy = LinkProxy::start(echo().await).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut a, b"hello").await.unwrap(), b"hello");

        // Drop: the open connection goes silent.
        proxy.set(LinkState::Drop);
        let silent =
            tokio::time::timeout(Duration::from_millis(300), round_trip(&mut a, b"x")).await;
        assert!(silent.is_err(), "bytes crossed a dropped link");
        // A new connection is accepted but never answered either.
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        let silent =
            tokio::time::timeout(Duration::from_millis(300), round_trip(&mut b, b"y")).await;
        assert!(silent.is_err());

        // Healing closes the connections that lost bytes; new ones work.
        proxy.set(LinkState::HEALTHY);
        let mut rest = Vec::new();
        let closed = a.read_to_end(&mut rest).await;
        assert!(closed.is_err() || rest.is_empty());
        let mut c = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut c, b"again").await.unwrap(), b"again");

        // Refuse: open connections are closed at once.
        proxy.set(LinkState::Refuse);
        let mut rest = Vec::new();
        let n = c.read_to_end(&mut rest).await.unwrap_or(0);
        assert_eq!(n, 0);
        let mut d = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut d, b"z").await.is_err());
    }

    #[tokio::test]
    async fn delays_each_direction() {
        let proxy = LinkProxy::start(echo().await).await.unwrap();
        proxy.set(LinkState::Up {
            delay: Duration::from_millis(100),
        });
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        let start = std::time::Instant::now();
        assert_eq!(round_trip(&mut a, b"slow").await.unwrap(), b"slow");
        assert!(start.elapsed() >= Duration::from_millis(200));
    }
}
