//! The connection cap of a member's API (`api.max_connections`): each open
//! client connection holds a slot; a connection accepted while every slot
//! is taken is answered `503 overloaded` with `Retry-After: 1` and closed,
//! before any of its request is read (so nothing it asked was done, and a
//! client may send it to another member at once).
//!
//! Why a cap: every open connection costs a task, its buffers and a file
//! descriptor for as long as the client keeps it, and the header deadline
//! (`header_read_timeout_ms`) only bounds how long a *silent* one stays.
//! The cap makes the member's memory for connections a fixed bound,
//! measured in docs/overload.md, instead of whatever clients open.
//!
//! Refusing costs little too: at most [`READING`] connections past the
//! cap have their request head read, and at most [`REFUSING`] are being
//! answered, each for at most [`REFUSE_WITHIN`]; past either, extra
//! connections are closed without an answer. The two are apart because
//! answering waits for the client to close, which a slow client makes
//! long: with one bound for both, a storm of slow clients took every
//! place, and a holder's keepalive past the cap was closed unread
//! (docs/adr/0009-no-separate-runtime-for-client-connections.md).
//!
//! One request is not refused: a keepalive of a session that owns nodes
//! (holds or waits for a lock; `admission.rs` has the same lane for
//! requests in flight). Its client may have lost its connection to a
//! timeout and come back while the member is full; refusing it would let
//! the session expire and its locks go to others because of load alone.
//! It is served on a connection of its own that closes after the answer,
//! and counts among the refusals in flight while it lasts.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use raftlock_core::SessionId;
use raftlock_node::Node;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::overload::shedding::Shedding;

/// Connections past the cap whose request head is being read, at most.
pub(crate) const READING: usize = 1024;
/// Refusals (503 answers) in flight at most.
pub(crate) const REFUSING: usize = 256;
/// How long one refusal may take: writing the answer, then draining what
/// the client already sent (closing a socket with unread input resets
/// it, and the client could lose the answer).
pub(crate) const REFUSE_WITHIN: Duration = Duration::from_secs(1);

/// The slots of one listener.
#[derive(Clone)]
pub(crate) struct Slots {
    open: Arc<Semaphore>,
    reading: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    max: usize,
    /// The limit below the cap while the member falls behind.
    shedding: Arc<Shedding>,
    /// Whose sessions own nodes (the holders' keepalives are served).
    node: Option<Node>,
}

/// What to do with a connection just accepted.
pub(crate) enum Admit {
    /// Serve it; the slot is released when the permit is dropped.
    Serve(OwnedSemaphorePermit),
    /// Read its head: a holder's keepalive is served, anything else
    /// answered 503 and closed; the permit bounds the heads being read.
    Refuse(OwnedSemaphorePermit),
    /// Close at once: too many heads past the cap being read already.
    Drop,
}

impl Slots {
    /// `max` open connections (at least one).
    pub(crate) fn new(max: usize) -> Slots {
        let max = max.max(1);
        let open = Arc::new(Semaphore::new(max));
        Slots {
            shedding: Shedding::new(max, open.clone()),
            open,
            reading: Arc::new(Semaphore::new(READING)),
            refusing: Arc::new(Semaphore::new(REFUSING)),
            max,
            node: None,
        }
    }

    /// Serves keepalives of sessions that own nodes in `node`'s replica
    /// past the cap.
    pub(crate) fn with_holders(mut self, node: Node) -> Slots {
        self.node = Some(node);
        self
    }

    /// True when `head` is a keepalive of a session that owns nodes.
    async fn is_holders_keepalive(&self, head: &[u8]) -> bool {
        let (Some(node), Some(id)) = (&self.node, keepalive_in(head)) else {
            return false;
        };
        crate::overload::admission::owns_nodes(node, id).await
    }

    /// Takes a slot for a new connection, if one is free and the member
    /// is not shedding connections (`shedding.rs`).
    pub(crate) fn admit(&self) -> Admit {
        if self.shedding.open() < self.shedding.limit() {
            if let Ok(permit) = Arc::clone(&self.open).try_acquire_owned() {
                self.shedding.admitted();
                return Admit::Serve(permit);
            }
        }
        match Arc::clone(&self.reading).try_acquire_owned() {
            Ok(permit) => Admit::Refuse(permit),
            Err(_) => Admit::Drop,
        }
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// The limit below the cap, which `serve` keeps measuring.
    pub(crate) fn shedding(&self) -> Arc<Shedding> {
        self.shedding.clone()
    }
}

/// The whole 503 answer, as bytes: the connection is refused below hyper,
/// so the response is written by hand (the API's error shape,
/// docs/api.md).
pub(crate) fn answer(max: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "error": crate::error::ErrorCode::Overloaded.as_str(),
        "message": format!(
            "this member serves all the connections it takes now (api.max_connections \
             is {max}, fewer while it falls behind its load); retry later or on another member"
        ),
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The session of a request head `POST /v1/sessions/{id}/keepalive …`.
fn keepalive_in(head: &[u8]) -> Option<SessionId> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_ascii_whitespace();
    if parts.next()? != "POST" {
        return None;
    }
    let id = parts
        .next()?
        .strip_prefix("/v1/sessions/")?
        .strip_suffix("/keepalive")?;
    id.parse().ok()
}

/// Reads the request's head (or as much of it as comes within the time,
/// holding `permit`, one of [`READING`]); a holder's keepalive is handed
/// to `serve` (with the bytes already read), anything else is answered
/// `answer` if one of [`REFUSING`] is free (closed unanswered if not): it
/// writes it, stops writing, and reads (and drops) what the client sends
/// until it closes, all within [`REFUSE_WITHIN`]; then the connection is
/// closed. Runs in its own task.
///
/// The answer waits for the request because an HTTP/1 client that gets an
/// answer before it sent anything takes it for a broken connection
/// (hyper's `UnexpectedMessage`) instead of a 503 it can act on.
pub(crate) async fn refuse<S, F, Fut>(
    mut stream: S,
    answer: Arc<Vec<u8>>,
    permit: OwnedSemaphorePermit,
    slots: Slots,
    serve: F,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(Prefixed<S>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut head = Vec::with_capacity(1024);
    let read_head = async {
        let mut chunk = [0u8; 1024];
        // At most 16 KiB: a head longer than that is answered anyway.
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(false);
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok::<bool, io::Error>(true)
    };
    let deadline = tokio::time::Instant::now() + REFUSE_WITHIN;
    match tokio::time::timeout_at(deadline, read_head).await {
        Ok(Ok(true)) => {}
        // Closed, failed or too slow: nothing to answer.
        _ => return,
    }
    if slots.is_holders_keepalive(&head).await {
        // Served with the reading permit: the lane is bounded with the
        // heads being read.
        serve(Prefixed::new(head, stream)).await;
        drop(permit);
        return;
    }
    drop(permit);
    let Ok(permit) = Arc::clone(&slots.refusing).try_acquire_owned() else {
        // Too many answers in flight: closed unanswered.
        return;
    };
    let refusal = async {
        stream.write_all(&answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        // Bounded: at most 64 KiB is drained, then the socket is closed.
        for _ in 0..64 {
            if stream.read(&mut sink).await? == 0 {
                break;
            }
        }
        Ok::<(), std::io::Error>(())
    };
    // A client that does not read its answer in time loses it: fine.
    let _ = tokio::time::timeout_at(deadline, refusal).await;
    drop(permit);
}

/// A stream whose first bytes were already read: they are read again
/// first (hyper parses the request head the refusal path looked at).
pub(crate) struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.prefix.len() {
            let rest = &this.prefix[this.at..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_listener_refuses_then_drops() {
        let slots = Slots::new(2);
        let a = slots.admit();
        let b = slots.admit();
        assert!(matches!(a, Admit::Serve(_)) && matches!(b, Admit::Serve(_)));
        let refusals: Vec<Admit> = (0..READING).map(|_| slots.admit()).collect();
        assert!(refusals.iter().all(|r| matches!(r, Admit::Refuse(_))));
        assert!(matches!(slots.admit(), Admit::Drop));
        drop(a);
        assert!(matches!(slots.admit(), Admit::Serve(_)));
    }

    #[test]
    fn a_keepalive_head_names_its_session() {
        let id = "0123456789abcdef0123456789abcdef";
        let head = format!("POST /v1/sessions/{id}/keepalive HTTP/1.1\r\nhost: x\r\n\r\n");
        assert!(keepalive_in(head.as_bytes()).is_some());
        let get = head.replacen("POST", "GET", 1);
        assert!(keepalive_in(get.as_bytes()).is_none());
        assert!(keepalive_in(b"POST /v1/sessions HTTP/1.1\r\n\r\n").is_none());
        assert!(keepalive_in(b"POST /v1/sessions/zz/keepalive HTTP/1.1\r\n\r\n").is_none());
        assert!(keepalive_in(b"\xff\xfe").is_none());
    }

    #[tokio::test]
    async fn a_prefixed_stream_reads_its_prefix_first() {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(b" world").await.expect("write");
        drop(client);
        let mut stream = Prefixed::new(b"hello".to_vec(), server);
        let mut all = String::new();
        stream.read_to_string(&mut all).await.expect("read");
        assert_eq!(all, "hello world");
    }

    #[test]
    fn the_answer_is_a_complete_503_with_retry_after() {
        let text = String::from_utf8(answer(7)).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nretry-after: 1"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).expect("json body");
        assert_eq!(json["error"], "overloaded");
    }
}
