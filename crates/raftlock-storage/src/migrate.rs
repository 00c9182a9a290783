//! Converts a format-1 store (log entries in sled's `raft_log` tree, the
//! committed id in `raft_committed`, a watermark record of the greatest
//! acknowledged index) to format 2 (entries in segment files), once, at
//! open.
//!
//! The old store is checked as format 1 checked it (every entry after the
//! purge pointer decodes under its own index; a bad entry at or below the
//! recorded acknowledged index, a log ending below it, or a vote older
//! than the record's refuse; a bad entry above it is a tail that was never
//! acknowledged and is left behind). Then, each step durable before the
//! next: the entries are written to fresh segment files; the watermark
//! record is rewritten in format 2 (into its other slot, so the format-1
//! record stays readable); sled's old trees are dropped and its format set
//! to 2. A crash before the last step leaves format 1 in sled and the
//! conversion runs again from the start (any segment files are replaced).

use std::path::Path;

use openraft::{LogId, RaftLogId, RaftTypeConfig, Vote};

use crate::cell::Cell;
use crate::codec::{decode, decode_raw, encode, encode_sealed, unseal};
use crate::config::SledLogConfig;
use crate::error::StoreError;
use crate::segment::{is_segment_file, SegmentLog};
use crate::sled_dirty::SledDirty;
use crate::store::{trees, FORMAT_KEY};
use crate::watermark::{self, Mark, WatermarkFile};

/// Entries written per append while converting.
const BATCH: usize = 1024;

/// Runs the conversion. `Ok(Err(reason))`: the old store is damaged, refuse.
pub(crate) fn format_1_to_2<C: RaftTypeConfig>(
    db: &sled::Db,
    config: &SledLogConfig,
) -> Result<Result<(), String>, StoreError> {
    let dir = &config.path;
    let mark_path = dir.join(watermark::FILE);
    let recorded = match watermark::read_format(&mark_path, 1)? {
        Ok(found) => found,
        // Both slots already rewritten by an interrupted conversion, which
        // checked the entries against the acknowledged index then.
        Err(_) => match watermark::read_format(&mark_path, watermark::FORMAT)? {
            Ok(found) => found.map(|(seq, m)| (seq, Mark { purged: 0, ..m })),
            Err(reason) => return Ok(Err(format!("{}: {reason}", mark_path.display()))),
        },
    };
    let Some((seq, recorded)) = recorded else {
        return Ok(Err(format!(
            "{} is missing, so sled's state cannot be checked for lost writes",
            mark_path.display()
        )));
    };
    let acked = recorded.purged;

    let dirty = SledDirty::default();
    let purged: Cell<LogId<C::NodeId>> =
        Cell::open(db, trees::PURGED, "last purged log id", &dirty)?;
    let vote: Cell<Vote<C::NodeId>> = Cell::open(db, trees::VOTE, "vote", &dirty)?;
    let committed: Cell<Option<LogId<C::NodeId>>> =
        Cell::open(db, trees::COMMITTED, "committed log id", &dirty)?;
    let in_tree = |tree: &str, e: StoreError| format!("sled tree `{tree}`: {e}");
    let purged = match purged.get() {
        Ok(p) => p,
        Err(e) => return Ok(Err(in_tree(trees::PURGED, e))),
    };
    let stored_vote = match vote.get() {
        Ok(v) => v,
        Err(e) => return Ok(Err(in_tree(trees::VOTE, e))),
    };
    let committed = match committed.get() {
        Ok(c) => c.flatten(),
        Err(e) => return Ok(Err(in_tree(trees::COMMITTED, e))),
    };
    if let Some(bytes) = &recorded.vote {
        let was: Vote<C::NodeId> = match decode(watermark::FILE, bytes) {
            Ok(v) => v,
            Err(e) => return Ok(Err(format!("{}: vote: {e}", mark_path.display()))),
        };
        let kept = stored_vote
            .as_ref()
            .is_some_and(|now| now.partial_cmp(&was).is_some_and(|o| o.is_ge()));
        if !kept {
            return Ok(Err(format!(
                "sled tree `{}` lost the vote {was} that {} records",
                trees::VOTE,
                mark_path.display()
            )));
        }
    }

    let purged_index = purged.as_ref().map(|p| p.index);
    let from = purged_index.map_or(0, |p| p.saturating_add(1));
    let mut entries: Vec<C::Entry> = Vec::new();
    for kv in db.open_tree(trees::LOG)?.range(from.to_be_bytes()..) {
        let (key, value) = kv?;
        let Ok(index) = <[u8; 8]>::try_from(key.as_ref()).map(u64::from_be_bytes) else {
            return Ok(Err(format!(
                "sled tree `{}`: a key of {} bytes",
                trees::LOG,
                key.len()
            )));
        };
        let entry = unseal(&key, &value)
            .map_err(|seal| seal.to_string())
            .and_then(|payload| decode_raw::<C::Entry>(payload).map_err(|e| e.to_string()))
            .and_then(|e| match e.get_log_id().index {
                i if i == index => Ok(e),
                i => Err(format!("holds entry {i}")),
            });
        match entry {
            Ok(e) => entries.push(e),
            Err(e) if index <= acked => {
                return Ok(Err(format!(
                "sled tree `{}`, index {index} (acknowledged: the watermark is at {acked}): {e}",
                trees::LOG
            )))
            }
            Err(e) => {
                tracing::warn!(index, error = %e, "a never-acknowledged, damaged tail of the format-1 log is left behind");
                break;
            }
        }
    }
    let last = entries
        .last()
        .map(|e| e.get_log_id().index)
        .max(purged_index);
    if last.unwrap_or(0) < acked {
        return Ok(Err(format!(
            "sled tree `{}` ends at index {}, but {} records entries through index {acked} \
             as acknowledged: sled lost acknowledged log entries",
            trees::LOG,
            last.unwrap_or(0),
            mark_path.display()
        )));
    }

    // Fresh segments: an interrupted conversion's are replaced.
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if is_segment_file(&entry.file_name()) {
            std::fs::remove_file(entry.path())?;
        }
    }
    let log =
        match SegmentLog::<C::NodeId>::open::<C::Entry>(dir, config.segment_bytes, purged_index)? {
            Ok((log, _)) => log,
            Err(reason) => return Ok(Err(reason)),
        };
    log.set_committed(encode("committed log id", &committed)?);
    let count = entries.len();
    let mut entries = entries.into_iter().peekable();
    while entries.peek().is_some() {
        log.append(entries.by_ref().take(BATCH))?;
    }
    log.close(false)?;
    let ticket = log.begin_sync()?;
    ticket.sync()?;
    log.finish_sync(&ticket);

    WatermarkFile::open(&mark_path, seq, true)?.write(&Mark {
        purged: purged_index.unwrap_or(0),
        vote: vote.get_raw()?,
    })?;

    db.drop_tree(trees::LOG)?;
    db.drop_tree(trees::COMMITTED)?;
    db.open_tree(trees::FORMAT)?.insert(
        FORMAT_KEY,
        encode_sealed("storage format", FORMAT_KEY, &watermark::FORMAT)?,
    )?;
    db.flush()?;
    sync_sled(dir)?;
    tracing::info!(
        entries = count,
        path = %dir.display(),
        "converted the log store from format 1 (entries in sled) to format 2 (segment files)"
    );
    Ok(Ok(()))
}

/// `fsync` sled's data file: sled's own flush does not reach the device
/// (see `barrier.rs`).
fn sync_sled(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir.join("db"))?.sync_all()
}
