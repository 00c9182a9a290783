//! Mutual TLS on the Raft port, with `[tls]` in the config: this member
//! serves its internal routes only to peers presenting a certificate
//! signed by the cluster CA (refused at the handshake otherwise), and
//! dials its peers with its own certificate. The rustls configs come
//! from raftlock-tls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use raftlock_tls::rustls::{ClientConfig, ServerConfig};
use raftlock_tls::{TlsConnection, TlsError, TlsIncoming};
use tokio::net::TcpListener;

use crate::config::NodeConfig;

/// A peer gets this long to finish its handshake: peers are on the same
/// network and handshake in milliseconds; a stalled one only holds a task.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Both sides of this member's mutual TLS.
pub(crate) struct MemberTls {
    /// The Raft port: a CA-signed peer certificate required.
    pub server: Arc<ServerConfig>,
    /// Dialing peers: trust the CA, present this member's certificate.
    pub client: ClientConfig,
}

impl MemberTls {
    /// The configs for `config.tls`, or `None` without `[tls]`. Loads and
    /// checks every PEM file now, so a bad one stops the start.
    pub(crate) fn load(config: &NodeConfig) -> Result<Option<MemberTls>, TlsError> {
        let Some(settings) = &config.tls else {
            return Ok(None);
        };
        Ok(Some(MemberTls {
            server: raftlock_tls::member_server_config(settings)?,
            client: raftlock_tls::member_client_config(settings)?,
        }))
    }
}

/// The Raft port's listener for `axum::serve`: yields connections whose
/// mutual-TLS handshake succeeded.
pub(crate) struct MemberListener(TlsIncoming);

impl MemberListener {
    pub(crate) fn new(
        listener: TcpListener,
        server: Arc<ServerConfig>,
    ) -> std::io::Result<MemberListener> {
        TlsIncoming::new(listener, server, HANDSHAKE_TIMEOUT, "raft").map(MemberListener)
    }
}

impl axum::serve::Listener for MemberListener {
    type Io = TlsConnection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.0.accept().await
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.0.local_addr())
    }
}
