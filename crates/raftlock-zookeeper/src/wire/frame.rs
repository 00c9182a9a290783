//! Framing: every packet, both ways, is a 4-byte big-endian length and
//! that many bytes. The length is checked against a maximum before any
//! buffer grows for it.

use bytes::{Buf, BufMut, BytesMut};

use super::error::WireError;

/// ZooKeeper's default `jute.maxbuffer`: the largest node data, and the
/// largest packet a server accepts.
pub const JUTE_MAX_BUFFER: usize = 0xfffff;

/// Room for a request's header and fields around the largest data.
pub const HEADER_SLACK: usize = 1024;

/// The default frame limit: `jute.maxbuffer` plus the header slack.
pub const DEFAULT_MAX_FRAME: usize = JUTE_MAX_BUFFER + HEADER_SLACK;

/// The frame length a prefix announces, if it is within `max`.
pub fn frame_length(prefix: [u8; 4], max: usize) -> Result<usize, WireError> {
    let len = i32::from_be_bytes(prefix);
    if len < 0 {
        return Err(WireError::NegativeLength(len));
    }
    let len = len as usize;
    if len > max {
        return Err(WireError::FrameTooLarge { len, max });
    }
    Ok(len)
}

/// Splits one whole frame (without its prefix) off the front of `buf`:
/// `Ok(None)` while it is still arriving. Reserves room for the rest of
/// the frame only once its length has passed the check.
pub fn split_frame(buf: &mut BytesMut, max: usize) -> Result<Option<BytesMut>, WireError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(prefix);
    let len = frame_length(bytes, max)?;
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len)))
}

/// Appends one frame: the length prefix, then what `body` writes. Fails,
/// leaving `dst` as it was, if the body exceeds `max`.
pub fn write_frame(
    dst: &mut BytesMut,
    max: usize,
    body: impl FnOnce(&mut BytesMut),
) -> Result<(), WireError> {
    let start = dst.len();
    dst.put_i32(0);
    body(dst);
    let len = dst.len() - start - 4;
    if len > max {
        dst.truncate(start);
        return Err(WireError::FrameTooLarge { len, max });
    }
    // `len <= max`, and every sensible `max` fits an i32.
    let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    dst[start..start + 4].copy_from_slice(&prefix);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_once_whole() {
        let mut buf = BytesMut::new();
        write_frame(&mut buf, 16, |w| w.put_slice(b"hello")).unwrap();
        write_frame(&mut buf, 16, |w| w.put_slice(b"")).unwrap();
        assert_eq!(&buf[..4], &[0, 0, 0, 5]);
        let mut partial = BytesMut::from(&buf[..6]);
        assert_eq!(split_frame(&mut partial, 16), Ok(None));
        assert_eq!(partial.len(), 6, "a partial frame stays buffered");
        assert_eq!(
            split_frame(&mut buf, 16).unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(
            split_frame(&mut buf, 16).unwrap().as_deref(),
            Some(&b""[..])
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_and_negative_prefixes_are_errors_before_any_allocation() {
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff, 0][..]);
        assert_eq!(
            split_frame(&mut buf, DEFAULT_MAX_FRAME),
            Err(WireError::FrameTooLarge {
                len: i32::MAX as usize,
                max: DEFAULT_MAX_FRAME
            })
        );
        assert!(
            buf.capacity() < 1024,
            "no room reserved for a refused frame"
        );
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xf0][..]);
        assert_eq!(
            split_frame(&mut buf, DEFAULT_MAX_FRAME),
            Err(WireError::NegativeLength(-16))
        );
        let mut buf = BytesMut::new();
        assert_eq!(
            write_frame(&mut buf, 3, |w| w.put_slice(b"four")),
            Err(WireError::FrameTooLarge { len: 4, max: 3 })
        );
        assert!(buf.is_empty());
    }
}
