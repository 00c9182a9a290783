//! Accepting TLS connections without letting one client stall the rest:
//! each handshake runs in its own task with a deadline, and only finished
//! handshakes reach the server's accept loop. A client that connects and
//! never speaks costs one task until the deadline, not the listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Handshakes in flight at most; further connections wait in the
/// kernel's backlog until one finishes.
const MAX_HANDSHAKES: usize = 1024;

/// A connection whose TLS handshake completed.
pub type TlsConnection = TlsStream<TcpStream>;

/// A TCP listener whose connections come out TLS-wrapped and
/// handshaken. Dropping it closes the listener.
pub struct TlsIncoming {
    ready: mpsc::Receiver<(TlsConnection, SocketAddr)>,
    local_addr: SocketAddr,
    accepting: JoinHandle<()>,
}

impl TlsIncoming {
    /// Starts accepting on `listener`. `port` names the listener in logs
    /// ("api", "raft"); a handshake not done within `handshake_timeout`
    /// closes its connection.
    pub fn new(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        handshake_timeout: Duration,
        port: &'static str,
    ) -> std::io::Result<TlsIncoming> {
        let local_addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(
            listener,
            TlsAcceptor::from(config),
            handshake_timeout,
            port,
            tx,
        ));
        Ok(TlsIncoming {
            ready,
            local_addr,
            accepting,
        })
    }

    /// The next connection whose handshake succeeded.
    pub async fn accept(&mut self) -> (TlsConnection, SocketAddr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept loop only ends when this is dropped.
            None => std::future::pending().await,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for TlsIncoming {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
    port: &'static str,
    ready: mpsc::Sender<(TlsConnection, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    // The server stopped: nobody takes the connection.
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::info!(port, %peer, "TLS handshake refused: {e}"),
                Err(_) => tracing::info!(
                    port,
                    %peer,
                    "TLS handshake not done within {} ms; closed",
                    handshake_timeout.as_millis()
                ),
            }
        });
    }
}

/// An accept error either concerns one connection (skip it) or the
/// listener (out of file descriptors: pause instead of spinning), as
/// `axum::serve` does. Shared by every accept loop, plain or TLS.
pub async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!("cannot accept a connection: {error}; pausing 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
