//! TLS for the door without tonic's own TLS feature: connections come
//! handshaken from raftlock-tls's acceptor (a deadline per handshake, in
//! its own task), wrapped so tonic can serve them.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use raftlock_tls::{TlsConnection, TlsIncoming};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A handshaken TLS connection tonic can serve.
pub struct Conn(TlsConnection);

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// The handshaken connections of `listener`, with `server`'s settings
/// and HTTP/2 offered by ALPN.
pub fn incoming(
    listener: TcpListener,
    server: Arc<rustls::ServerConfig>,
) -> io::Result<impl futures::Stream<Item = io::Result<Conn>> + Send + 'static> {
    let mut config = (*server).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let accepted = TlsIncoming::new(listener, Arc::new(config), HANDSHAKE_TIMEOUT, "etcd")?;
    Ok(futures::stream::unfold(
        accepted,
        |mut accepted| async move {
            let (conn, _peer) = accepted.accept().await;
            Some((Ok(Conn(conn)), accepted))
        },
    ))
}
