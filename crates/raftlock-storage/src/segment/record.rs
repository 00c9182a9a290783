//! The record codec of a segment file: framing, checksum, alignment.
//!
//! A record is `len` (u32 LE, payload bytes), `crc` (u32 LE), `kind` (u8),
//! seven zero bytes, `index` (u64 LE), the payload, then zero padding to a
//! multiple of [`ALIGN`]. The CRC32 (`crc32fast`, as every other checksum
//! of this crate) covers `len` and everything after `crc` up to the end of
//! the payload, so a damaged length is caught as surely as a damaged body.
//!
//! Records start at multiples of [`ALIGN`], and the unused part of a segment
//! is zero: an all-zero header is the end of the written data, and the scan
//! at open can look for valid records *after* a damaged one by trying each
//! aligned offset (see `recovery.rs`). The seven reserved zero bytes and the
//! kind make a false start in random bytes about 2^-59 likely before the
//! CRC is even computed.

/// Records start at multiples of this many bytes.
pub(crate) const ALIGN: usize = 8;
/// Bytes of a record before its payload.
pub(crate) const HEADER_LEN: usize = 24;

/// A place in the log's files: segment sequence number, byte offset. The
/// order of positions is the order records were written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub(crate) seq: u64,
    pub(crate) offset: u64,
}

/// Payload of a [`Kind::Mark`] record: the claim (every record ending at
/// or before `claim` was covered by a completed durability barrier before
/// this mark was written), then the bincode of the committed log id as the
/// store was told it (may be empty: unknown).
pub(crate) fn mark_payload(claim: Pos, committed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + committed.len());
    out.extend_from_slice(&claim.seq.to_le_bytes());
    out.extend_from_slice(&claim.offset.to_le_bytes());
    out.extend_from_slice(committed);
    out
}

/// The claim and committed bytes of a mark payload.
pub(crate) fn read_mark(payload: &[u8]) -> Option<(Pos, &[u8])> {
    let (seq, rest) = payload.split_first_chunk::<8>()?;
    let (offset, committed) = rest.split_first_chunk::<8>()?;
    Some((
        Pos {
            seq: u64::from_le_bytes(*seq),
            offset: u64::from_le_bytes(*offset),
        },
        committed,
    ))
}

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One log entry: `index` is its log index, the payload its bincode.
    Entry = 1,
    /// Entries from `index` on are removed (a Raft truncation).
    Truncate = 2,
    /// The durability claim and the committed log id (see `mark.rs`).
    Mark = 3,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Entry),
            2 => Some(Self::Truncate),
            3 => Some(Self::Mark),
            _ => None,
        }
    }
}

/// Total bytes a record with `payload_len` payload bytes takes.
pub(crate) fn framed_len(payload_len: usize) -> usize {
    (HEADER_LEN + payload_len).next_multiple_of(ALIGN)
}

fn crc(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[0..4]);
    h.update(&header[8..HEADER_LEN]);
    h.update(payload);
    h.finalize()
}

/// Appends one framed record to `out`. Fails only for a payload over 4 GiB.
pub(crate) fn encode(out: &mut Vec<u8>, kind: Kind, index: u64, payload: &[u8]) -> Option<()> {
    let len = u32::try_from(payload.len()).ok()?;
    let start = out.len();
    let mut header = [0u8; HEADER_LEN];
    header[0..4].copy_from_slice(&len.to_le_bytes());
    header[8] = kind as u8;
    header[16..24].copy_from_slice(&index.to_le_bytes());
    let sum = crc(&header, payload);
    header[4..8].copy_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
    out.resize(start + framed_len(payload.len()), 0);
    Some(())
}

/// A record read back, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) kind: Kind,
    pub(crate) index: u64,
    pub(crate) payload: &'a [u8],
    /// Bytes the framed record takes (the next one starts this far on).
    pub(crate) framed: usize,
}

/// What is found at one offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed<'a> {
    /// A record whose checksum holds.
    Valid(Record<'a>),
    /// An all-zero header: nothing was written here.
    Zero,
    /// Anything else, and why.
    Invalid(String),
}

/// Reads the record at the start of `bytes` (which may run past it).
pub(crate) fn parse(bytes: &[u8]) -> Parsed<'_> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return if bytes.iter().all(|b| *b == 0) {
            Parsed::Zero
        } else {
            Parsed::Invalid("a record header cut short by the end of the file".into())
        };
    };
    if header.iter().all(|b| *b == 0) {
        return Parsed::Zero;
    }
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let len = word(0) as usize;
    let stored = word(4);
    let Some(kind) = Kind::from_byte(header[8]) else {
        return Parsed::Invalid(format!("unknown record kind {}", header[8]));
    };
    if header[9..16].iter().any(|b| *b != 0) {
        return Parsed::Invalid("reserved header bytes are not zero".into());
    }
    let Some(payload) = bytes.get(HEADER_LEN..HEADER_LEN.saturating_add(len)) else {
        return Parsed::Invalid(format!(
            "record of {len} bytes runs past the end of the file"
        ));
    };
    let computed = crc(header, payload);
    if computed != stored {
        return Parsed::Invalid(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let mut index = [0u8; 8];
    index.copy_from_slice(&header[16..24]);
    Parsed::Valid(Record {
        kind,
        index: u64::from_le_bytes(index),
        payload,
        framed: framed_len(len),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_aligned_and_every_flipped_bit_is_caught() {
        let mut out = Vec::new();
        encode(&mut out, Kind::Entry, 42, b"hello").expect("encode");
        assert_eq!(out.len() % ALIGN, 0);
        match parse(&out) {
            Parsed::Valid(r) => {
                assert_eq!(
                    (r.kind, r.index, r.payload, r.framed),
                    (Kind::Entry, 42, &b"hello"[..], out.len())
                );
            }
            other => panic!("{other:?}"),
        }
        // Every bit of header and payload (not the padding) is covered.
        for bit in 0..(HEADER_LEN + 5) * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(matches!(parse(&bad), Parsed::Invalid(_)), "bit {bit}");
        }
    }

    #[test]
    fn zeros_are_the_end_and_short_input_is_not_a_record() {
        assert_eq!(parse(&[0u8; 40]), Parsed::Zero);
        assert_eq!(parse(&[0u8; 3]), Parsed::Zero);
        let mut out = Vec::new();
        encode(&mut out, Kind::Mark, 1, &[7u8; 100]).expect("encode");
        assert!(matches!(parse(&out[..50]), Parsed::Invalid(_)));
        assert!(matches!(parse(&out[..10]), Parsed::Invalid(_)));
    }
}
