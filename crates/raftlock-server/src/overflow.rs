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
//! Refusing costs little too: at most [`REFUSING`] refusals are in flight,
//! each for at most [`REFUSE_WITHIN`]; past that, extra connections are
//! closed without an answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
    refusing: Arc<Semaphore>,
    max: usize,
}

/// What to do with a connection just accepted.
pub(crate) enum Admit {
    /// Serve it; the slot is released when the permit is dropped.
    Serve(OwnedSemaphorePermit),
    /// Answer 503 and close; the permit bounds refusals in flight.
    Refuse(OwnedSemaphorePermit),
    /// Close at once: too many refusals in flight already.
    Drop,
}

impl Slots {
    /// `max` open connections (at least one).
    pub(crate) fn new(max: usize) -> Slots {
        let max = max.max(1);
        Slots {
            open: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(REFUSING)),
            max,
        }
    }

    /// Takes a slot for a new connection, if one is free.
    pub(crate) fn admit(&self) -> Admit {
        if let Ok(permit) = Arc::clone(&self.open).try_acquire_owned() {
            return Admit::Serve(permit);
        }
        match Arc::clone(&self.refusing).try_acquire_owned() {
            Ok(permit) => Admit::Refuse(permit),
            Err(_) => Admit::Drop,
        }
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

/// The whole 503 answer, as bytes: the connection is refused below hyper,
/// so the response is written by hand (the API's error shape,
/// docs/api.md).
pub(crate) fn answer(max: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "error": crate::error::ErrorCode::Overloaded.as_str(),
        "message": format!(
            "this member serves {max} connections, its limit (api.max_connections); \
             retry later or on another member"
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

/// Reads the request's head (or as much of it as comes within the time),
/// writes `answer`, stops writing, and reads (and drops) what the client
/// sends until it closes, all within [`REFUSE_WITHIN`]; then the connection
/// is closed. Runs in its own task.
///
/// The answer waits for the request because an HTTP/1 client that gets an
/// answer before it sent anything takes it for a broken connection
/// (hyper's `UnexpectedMessage`) instead of a 503 it can act on.
pub(crate) async fn refuse<S>(mut stream: S, answer: Arc<Vec<u8>>, _permit: OwnedSemaphorePermit)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let refusal = async {
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        // At most 16 KiB: a head longer than that is answered anyway.
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&chunk[..n]);
        }
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
    let _ = tokio::time::timeout(REFUSE_WITHIN, refusal).await;
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
        let refusals: Vec<Admit> = (0..REFUSING).map(|_| slots.admit()).collect();
        assert!(refusals.iter().all(|r| matches!(r, Admit::Refuse(_))));
        assert!(matches!(slots.admit(), Admit::Drop));
        drop(a);
        assert!(matches!(slots.admit(), Admit::Serve(_)));
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
