//! The frames on a peer pipe. Each is a little-endian `u32` length, then
//! that many bytes:
//!
//! - a request: the bincode [`Head`] (kind and the sender's identity
//!   claims), then the bincode body the HTTP route would carry;
//! - an answer: one status byte, then the bincode answer (`OK`) or a
//!   message (`REFUSED`: the identity check refused it before anything
//!   ran; `FAILED`: what the HTTP route would answer with an error status).

use std::io;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{Kind, MAX_FRAME};
use crate::transport::peer_guard::Claims;
use crate::transport::routes::Failure;

const OK: u8 = 0;
const REFUSED: u8 = 1;
const FAILED: u8 = 2;

/// What precedes a request's body.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Head {
    pub kind: Kind,
    /// `None` from a member without an identity guard (nothing to check).
    pub claims: Option<Claims>,
}

/// A request frame, length included, ready to write in one go.
pub(crate) fn request<T: Serialize>(head: &Head, body: &T) -> bincode::Result<Vec<u8>> {
    let mut frame = Vec::with_capacity(128);
    frame.extend_from_slice(&[0; 4]);
    bincode::serialize_into(&mut frame, head)?;
    bincode::serialize_into(&mut frame, body)?;
    seal(frame).map_err(|e| Box::new(bincode::ErrorKind::Io(e)))
}

/// Splits a request frame (without its length) into head and body.
pub(crate) fn split_request(mut frame: &[u8]) -> Result<(Head, &[u8]), String> {
    let head: Head = bincode::deserialize_from(&mut frame)
        .map_err(|e| format!("undecodable frame head: {e}"))?;
    Ok((head, frame))
}

/// An answer frame, length included.
pub(crate) fn answer(answer: Result<Vec<u8>, Failure>) -> io::Result<Vec<u8>> {
    let (status, payload) = match answer {
        Ok(bytes) => (OK, bytes),
        Err((StatusCode::CONFLICT, message)) => (REFUSED, message.into_bytes()),
        Err((status, message)) => (FAILED, format!("{status}: {message}").into_bytes()),
    };
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.extend_from_slice(&[0; 4]);
    frame.push(status);
    frame.extend_from_slice(&payload);
    seal(frame)
}

/// How a peer answered a request frame.
#[derive(Debug)]
pub(crate) enum Answered<'a> {
    /// The bincode answer.
    Ok(&'a [u8]),
    /// Refused by its identity check: nothing ran.
    Refused(String),
    /// An error, as the HTTP route would have answered it.
    Failed(String),
}

/// Reads an answer frame (without its length).
pub(crate) fn read_answer(frame: &[u8]) -> Answered<'_> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match frame.split_first() {
        Some((&OK, body)) => Answered::Ok(body),
        Some((&REFUSED, message)) => Answered::Refused(text(message)),
        Some((&FAILED, message)) => Answered::Failed(text(message)),
        Some((status, _)) => Answered::Failed(format!("unknown answer status {status}")),
        None => Answered::Failed("empty answer frame".to_string()),
    }
}

/// Writes the length of what follows the first four bytes into them.
fn seal(mut frame: Vec<u8>) -> io::Result<Vec<u8>> {
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {len} bytes is over the {MAX_FRAME}-byte limit"),
        ));
    }
    frame[..4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(frame)
}

/// The next frame's bytes (without its length); `None` if the stream
/// ended cleanly between frames.
pub(crate) async fn read<R: AsyncRead + Unpin>(reader: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let first = reader.read(&mut len).await?;
    if first == 0 {
        return Ok(None);
    }
    reader.read_exact(&mut len[first..]).await?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is over the {MAX_FRAME}-byte limit"),
        ));
    }
    let mut frame = vec![0; len];
    reader.read_exact(&mut frame).await?;
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused() {
        let claims = Claims {
            from: 2,
            from_incarnation: 7,
            cluster: Some(9),
            to_incarnation: None,
        };
        let head = Head {
            kind: Kind::Leader,
            claims: Some(claims),
        };
        let bytes = request(&head, &"body".to_string()).expect("encode");
        let mut stream = &bytes[..];
        let frame = read(&mut stream).await.expect("read").expect("a frame");
        let (got, body) = split_request(&frame).expect("split");
        assert_eq!(got.kind, Kind::Leader);
        assert_eq!(got.claims, Some(claims));
        let body: String = bincode::deserialize(body).expect("body");
        assert_eq!(body, "body");
        assert!(read(&mut stream).await.expect("end").is_none());

        let refused = answer(Err((StatusCode::CONFLICT, "other_cluster: x".into()))).expect("a");
        let mut stream = &refused[..];
        let frame = read(&mut stream).await.expect("read").expect("a frame");
        assert!(matches!(read_answer(&frame), Answered::Refused(m) if m == "other_cluster: x"));

        let mut huge = &((MAX_FRAME as u32) + 1).to_le_bytes()[..];
        assert!(read(&mut huge).await.is_err());
        let mut torn = &[5u8, 0, 0, 0, 1][..];
        assert!(
            read(&mut torn).await.is_err(),
            "a frame cut short is an error"
        );
    }
}
