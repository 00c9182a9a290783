//! The ZooKeeper door: a TCP listener per member that serves ZooKeeper's
//! client protocol over a [`raftlock_node::Node`] (docs/zookeeper.md,
//! ADR 0018). The door owns framing, the connection's watches and the
//! error mapping; every znode is a node of raftlock's tree and every
//! ZooKeeper session a raftlock session, reached only through the node's
//! typed tree and session operations.
//!
//! - `access`: with bearer tokens, `addauth digest` and the NOAUTH
//!   answers, from the same grants as the HTTP API;
//! - `acl`: ACLs checked as ZooKeeper checks them, stored, not enforced;
//! - [`session`]: ZooKeeper session ids and passwords from raftlock
//!   sessions, and the connect handshake;
//! - `conn`: one connection: requests answered in order, pings,
//!   watch events sent before the answer that shows their change;
//! - `ops`: each opcode dispatched, the writes translated onto the node's
//!   strict tree operations; `reads`: the reads; `events`: watch events,
//!   `setWatches(2)` and the watch opcodes (`addWatch`, `checkWatches`,
//!   `removeWatches`);
//! - `watches`: one-shot data, exist and child watches and persistent
//!   (recursive) ones, fired from the member's change history;
//! - `errors`: raftlock errors as ZooKeeper error codes;
//! - [`member`]: a member's door bound and started from the cluster file.

mod access;
mod acl;
mod conn;
mod errors;
mod events;
pub mod member;
mod ops;
mod reads;
pub mod session;
mod watches;

use std::net::SocketAddr;
use std::sync::Arc;

use raftlock_api::auth::AuthConfig;
use raftlock_node::Node;
use raftlock_tls::TlsIncoming;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// How a door serves; defaults are ZooKeeper's where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorConfig {
    /// Largest frame either way (ZooKeeper's `jute.maxbuffer`, 1 MiB): a
    /// bigger one closes the connection.
    pub max_frame: usize,
    /// Connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// Bounds of a negotiated session timeout, ms (ZooKeeper's 2 and 20
    /// ticks of 2 s), further clamped to the cluster's session TTL bounds.
    pub min_session_timeout_ms: u64,
    /// See `min_session_timeout_ms`.
    pub max_session_timeout_ms: u64,
    /// How long a new connection may take to send its handshake (and
    /// finish TLS's before it).
    pub handshake_timeout_ms: u64,
    /// The cluster's bearer tokens: with any, a client must `addauth
    /// digest <principal>:<token>` and stays within that token's grants
    /// (access.rs); with none, every client may do everything.
    pub auth: AuthConfig,
}

impl Default for DoorConfig {
    fn default() -> Self {
        DoorConfig {
            max_frame: crate::wire::DEFAULT_MAX_FRAME,
            max_connections: 1024,
            min_session_timeout_ms: 4_000,
            max_session_timeout_ms: 40_000,
            handshake_timeout_ms: 10_000,
            auth: AuthConfig::default(),
        }
    }
}

impl DoorConfig {
    /// The timeout granted for a requested one, within both the door's and
    /// the cluster's bounds.
    pub(crate) fn negotiate(&self, node: &Node, requested: i32) -> u64 {
        let settings = &node.config().settings;
        let lo = self.min_session_timeout_ms.max(settings.session_ttl_min_ms);
        let hi = self
            .max_session_timeout_ms
            .min(settings.session_ttl_max_ms)
            .max(lo);
        u64::try_from(requested).unwrap_or(0).clamp(lo, hi)
    }
}

/// A running door; dropping it leaves it running, [`Door::stop`] ends it.
pub struct Door {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Door {
    /// Serves ZooKeeper clients on `listener` over `node` until stopped or
    /// the node shuts down.
    pub fn spawn(node: Node, listener: TcpListener, config: DoorConfig) -> std::io::Result<Door> {
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(node, Incoming::Plain(listener), Arc::new(config)));
        Ok(Door { addr, task })
    }

    /// The same over TLS (ZooKeeper's secure client port: TLS from the
    /// first byte), with `tls` as the server config (the member's `[tls]`
    /// table, as for the HTTP API).
    pub fn spawn_tls(
        node: Node,
        listener: TcpListener,
        config: DoorConfig,
        tls: Arc<rustls::ServerConfig>,
    ) -> std::io::Result<Door> {
        let addr = listener.local_addr()?;
        let handshake = std::time::Duration::from_millis(config.handshake_timeout_ms);
        let incoming = TlsIncoming::new(listener, tls, handshake, "zookeeper")?;
        let task = tokio::spawn(serve(node, Incoming::Tls(incoming), Arc::new(config)));
        Ok(Door { addr, task })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting; open connections end with the node or their
    /// client.
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// Where connections come from.
enum Incoming {
    Plain(TcpListener),
    /// Handshaken in their own tasks, so a slow client stalls no other.
    Tls(TlsIncoming),
}

async fn serve(node: Node, mut incoming: Incoming, config: Arc<DoorConfig>) {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    loop {
        let accepted = match &mut incoming {
            Incoming::Plain(listener) => tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        Some((Box::new(stream) as Box<dyn conn::Stream>, peer))
                    }
                    Err(error) => {
                        // Out of descriptors, say: pauses instead of spinning.
                        raftlock_tls::accept_failed(error).await;
                        None
                    }
                },
                () = node.stopped() => return,
            },
            Incoming::Tls(tls) => tokio::select! {
                (stream, peer) = tls.accept() => Some((Box::new(stream) as Box<dyn conn::Stream>, peer)),
                () = node.stopped() => return,
            },
        };
        let Some((stream, peer)) = accepted else {
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = config.max_connections,
                "zookeeper door: connection limit reached, closing");
            continue;
        };
        let (node, config) = (node.clone(), config.clone());
        tokio::spawn(async move {
            conn::serve(node, stream, peer, config).await;
            drop(slot);
        });
    }
}
