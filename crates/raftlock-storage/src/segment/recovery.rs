//! The scan at open: every record of every segment is read and its
//! checksum checked once, and damage is told apart from a torn tail.
//!
//! Acknowledged = covered by a durability barrier that completed (the only
//! thing that fires openraft's callback or advances `DurableIndex`). Each
//! append starts with a mark record (`record.rs`, [`Kind::Mark`]) when the
//! log became more durable since the last one, claiming the position up to
//! which a completed barrier covered the files; a clean close writes a last
//! mark. So for the first place where the records stop making sense (bytes
//! that are not a valid record, or zeros followed by valid records):
//! * some valid mark, anywhere (usually after the damage), claims a
//!   position past it: the damaged bytes were acknowledged, the log has
//!   lost acknowledged data, and open refuses, naming file and offset;
//! * no mark claims it: it was never acknowledged. A power loss during an
//!   append leaves exactly that (a record cut short, or, since the disk may
//!   write sectors in any order, zeros followed by a later record of the
//!   same unsynced batch). It and everything after it are dropped.
//!
//! What this cannot see: damage to the records of the very last barrier of
//! a process that crashed (no later mark claims them; a clean close writes
//! one), and the loss of whole segment files at the end of the log. See
//! docs/design.md, "Storage".

use std::path::{Path, PathBuf};

use super::file::{check_header, parse_name, HEADER};
use super::fs::SegmentFs;
use super::record::{parse, read_mark, Kind, Parsed, Pos, ALIGN};

/// A valid record found by the scan.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) pos: Pos,
    pub(crate) kind: Kind,
    pub(crate) index: u64,
    pub(crate) payload: Vec<u8>,
    pub(crate) framed: u64,
}

/// One segment file as found.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    pub(crate) seq: u64,
    pub(crate) path: PathBuf,
    /// File size.
    pub(crate) len: u64,
    /// Where the valid records end (the next record goes here).
    pub(crate) end: u64,
}

/// A torn tail to cut off before the log is used.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    /// Zero the file of this segment from `at.offset` on ...
    pub(crate) at: Pos,
    /// ... and delete these later segment files.
    pub(crate) drop: Vec<PathBuf>,
    /// What was found there, for the log line.
    pub(crate) reason: String,
}

/// The result of the scan.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// Segments kept, in order.
    pub(crate) segments: Vec<Segment>,
    /// Their valid records, in write order.
    pub(crate) records: Vec<Found>,
    /// The torn tail to cut, if any.
    pub(crate) cut: Option<Cut>,
}

/// The records of one file and where they stop making sense.
struct FileScan {
    records: Vec<Found>,
    /// First offset that is not a valid record, and why it is damage
    /// (`None`: zeros, the normal end of the written data).
    stop: Option<(u64, Option<String>)>,
    /// Valid records after `stop`.
    after: Vec<Found>,
}

/// Reads every record from `from` on; returns them and where they stop.
fn read_run(bytes: &[u8], seq: u64, from: u64) -> (Vec<Found>, Option<(u64, Option<String>)>) {
    let mut records = Vec::new();
    let mut at = from;
    loop {
        let Some(rest) = usize::try_from(at).ok().and_then(|a| bytes.get(a..)) else {
            return (records, None);
        };
        if rest.is_empty() {
            return (records, None);
        }
        match parse(rest) {
            Parsed::Valid(r) => {
                records.push(Found {
                    pos: Pos { seq, offset: at },
                    kind: r.kind,
                    index: r.index,
                    payload: r.payload.to_vec(),
                    framed: r.framed as u64,
                });
                at += r.framed as u64;
            }
            Parsed::Zero => return (records, Some((at, None))),
            Parsed::Invalid(why) => return (records, Some((at, Some(why)))),
        }
    }
}

fn scan_file(bytes: &[u8], seq: u64) -> FileScan {
    let (records, stop) = match check_header(bytes, seq) {
        Ok(()) => read_run(bytes, seq, HEADER),
        Err(why) => (Vec::new(), Some((0, Some(why)))),
    };
    let mut after = Vec::new();
    if let Some((stopped, _)) = stop {
        // Look for valid records at every aligned offset after the stop:
        // they decide whether the stop is damage or a torn tail.
        let mut at = (stopped + ALIGN as u64).max(HEADER);
        while at < bytes.len() as u64 {
            let (run, next) = read_run(bytes, seq, at);
            match run.last() {
                Some(last) => {
                    let resume = last.pos.offset + last.framed;
                    after.extend(run);
                    match next {
                        Some((n, _)) => at = n.max(resume) + ALIGN as u64,
                        None => break,
                    }
                }
                None => at += ALIGN as u64,
            }
        }
    }
    FileScan {
        records,
        stop,
        after,
    }
}

/// Scans the segment files in `dir`. `Err` is a refusal naming the file
/// and offset; an I/O error reading the files is `Ok(Err)` of the outer.
pub(crate) fn scan<F: SegmentFs>(fs: &F, dir: &Path) -> std::io::Result<Result<Scanned, String>> {
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    for name in fs.list(dir)? {
        if let Some(seq) = name.to_str().and_then(parse_name) {
            files.push((seq, dir.join(&name)));
        }
    }
    files.sort();
    for pair in files.windows(2) {
        if pair[1].0 != pair[0].0 + 1 {
            return Ok(Err(format!(
                "segment files {} and {} are not consecutive: the log between them is missing",
                pair[0].1.display(),
                pair[1].1.display()
            )));
        }
    }

    let mut scans = Vec::with_capacity(files.len());
    for (seq, path) in &files {
        let bytes = fs.read(path)?;
        let scan = scan_file(&bytes, *seq);
        scans.push((*seq, path.clone(), bytes.len() as u64, scan));
    }

    // The greatest claim any valid mark makes, wherever it is.
    let claim = scans
        .iter()
        .flat_map(|(_, _, _, s)| s.records.iter().chain(&s.after))
        .filter(|r| r.kind == Kind::Mark)
        .filter_map(|r| read_mark(&r.payload).map(|(pos, _)| pos))
        .max();

    let mut out = Scanned::default();
    for (i, (seq, path, len, scan)) in scans.iter().enumerate() {
        let end = scan.stop.as_ref().map_or(*len, |(at, _)| *at);
        out.records.extend(scan.records.iter().cloned());
        out.segments.push(Segment {
            seq: *seq,
            path: path.clone(),
            len: *len,
            end,
        });
        let damage = match &scan.stop {
            Some((at, Some(why))) => Some((*at, why.clone())),
            Some((at, None)) if !scan.after.is_empty() => Some((
                *at,
                format!(
                    "zeros where a record should be, followed by a valid record at offset {}",
                    scan.after[0].pos.offset
                ),
            )),
            _ => None,
        };
        let Some((at, why)) = damage else { continue };
        let at = Pos {
            seq: *seq,
            offset: at,
        };
        if let Some(claim) = claim.filter(|c| *c > at) {
            return Ok(Err(format!(
                "{}, offset {}: {why}; a later record says the log was durable through segment \
                 {} offset {}: acknowledged log entries are damaged",
                path.display(),
                at.offset,
                claim.seq,
                claim.offset
            )));
        }
        out.cut = Some(Cut {
            at,
            drop: scans[i + 1..]
                .iter()
                .map(|(_, p, _, _)| p.clone())
                .collect(),
            reason: format!("{}, offset {}: {why}", path.display(), at.offset),
        });
        return Ok(Ok(out));
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::super::file::{name, SegmentFile};
    use super::super::fs::StdFs;
    use super::super::record::{encode, mark_payload};
    use super::*;

    /// Writes a segment holding entries `indexes`, a mark claiming `claim`
    /// before entry `mark_before` (if any); returns each record's offset.
    fn segment(dir: &Path, seq: u64, records: &[(Kind, u64, Vec<u8>)]) -> Vec<u64> {
        let mut seg = SegmentFile::create(&StdFs, dir, seq).expect("create");
        let mut at = HEADER;
        let mut offsets = Vec::new();
        for (kind, index, payload) in records {
            let mut buf = Vec::new();
            encode(&mut buf, *kind, *index, payload).expect("encode");
            seg.write_at(&buf, at).expect("write");
            offsets.push(at);
            at += buf.len() as u64;
        }
        offsets
    }

    fn entry(i: u64) -> (Kind, u64, Vec<u8>) {
        (Kind::Entry, i, vec![i as u8; 40])
    }

    fn mark(seq: u64, offset: u64) -> (Kind, u64, Vec<u8>) {
        (Kind::Mark, 0, mark_payload(Pos { seq, offset }, &[]))
    }

    fn flip(path: &Path, at: u64) {
        let mut bytes = std::fs::read(path).expect("read");
        bytes[at as usize] ^= 0x20;
        std::fs::write(path, bytes).expect("write");
    }

    fn indexes(s: &Scanned) -> Vec<u64> {
        s.records
            .iter()
            .filter(|r| r.kind == Kind::Entry)
            .map(|r| r.index)
            .collect()
    }

    #[test]
    fn an_intact_log_scans_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        segment(dir.path(), 1, &[entry(1), entry(2)]);
        segment(dir.path(), 2, &[mark(1, 100), entry(3)]);
        let s = scan(&StdFs, dir.path()).expect("io").expect("ok");
        assert_eq!(indexes(&s), vec![1, 2, 3]);
        assert!(s.cut.is_none());
        assert_eq!(s.segments.len(), 2);
    }

    #[test]
    fn damage_nothing_claims_is_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offs = segment(
            dir.path(),
            1,
            &[entry(1), entry(2), mark(1, 0), entry(3), entry(4)],
        );
        flip(&dir.path().join(name(1)), offs[3] + 30);
        let s = scan(&StdFs, dir.path())
            .expect("io")
            .expect("a torn tail is not refused");
        assert_eq!(indexes(&s), vec![1, 2]);
        let cut = s.cut.expect("cut");
        assert_eq!(
            cut.at,
            Pos {
                seq: 1,
                offset: offs[3]
            }
        );
    }

    #[test]
    fn damage_a_later_mark_claims_refuses_naming_file_and_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offs = segment(dir.path(), 1, &[entry(1), entry(2), entry(3)]);
        let end = offs[2] + 64;
        segment(dir.path(), 2, &[mark(1, end), entry(4)]);
        flip(&dir.path().join(name(1)), offs[1] + 30);
        let err = scan(&StdFs, dir.path()).expect("io").expect_err("refused");
        assert!(
            err.contains(&format!("{}, offset {}", name(1), offs[1])),
            "{err}"
        );
        assert!(err.contains("checksum mismatch"), "{err}");
        // The same damage with the claim short of it: a torn tail, and the
        // later segment goes with it.
        let dir = tempfile::tempdir().expect("tempdir");
        let offs = segment(dir.path(), 1, &[entry(1), entry(2), entry(3)]);
        segment(dir.path(), 2, &[mark(1, offs[1]), entry(4)]);
        flip(&dir.path().join(name(1)), offs[1] + 30);
        let s = scan(&StdFs, dir.path()).expect("io").expect("torn");
        assert_eq!(indexes(&s), vec![1]);
        assert_eq!(s.cut.expect("cut").drop.len(), 1);
    }

    #[test]
    fn zeros_followed_by_a_valid_record_are_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offs = segment(dir.path(), 1, &[entry(1), entry(2), entry(3), mark(1, 0)]);
        // Entry 2's sectors never reached the disk.
        let path = dir.path().join(name(1));
        let mut bytes = std::fs::read(&path).expect("read");
        for b in &mut bytes[offs[1] as usize..offs[2] as usize] {
            *b = 0;
        }
        std::fs::write(&path, &bytes).expect("write");
        let s = scan(&StdFs, dir.path()).expect("io").expect("unclaimed");
        assert_eq!(indexes(&s), vec![1]);
        assert!(s
            .cut
            .expect("cut")
            .reason
            .contains("followed by a valid record"));
        // Claimed by the mark after it: refused.
        let dir = tempfile::tempdir().expect("tempdir");
        let offs = segment(dir.path(), 1, &[entry(1), entry(2), entry(3)]);
        let claim = offs[2];
        let offs2 = segment(dir.path(), 2, &[mark(1, claim)]);
        assert_eq!(offs2.len(), 1);
        let path = dir.path().join(name(1));
        let mut bytes = std::fs::read(&path).expect("read");
        for b in &mut bytes[offs[1] as usize..offs[2] as usize] {
            *b = 0;
        }
        std::fs::write(&path, &bytes).expect("write");
        assert!(scan(&StdFs, dir.path()).expect("io").is_err());
    }

    #[test]
    fn a_missing_middle_segment_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        segment(dir.path(), 1, &[entry(1)]);
        segment(dir.path(), 3, &[entry(3)]);
        let err = scan(&StdFs, dir.path()).expect("io").expect_err("refused");
        assert!(err.contains("not consecutive"), "{err}");
    }
}
