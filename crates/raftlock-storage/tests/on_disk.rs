//! What the store does with bytes it did not expect. Every record of the
//! log's segment files and every sled value carries a checksum and is
//! checked at open: a damaged member refuses to start with a message naming
//! the file and offset (or the sled tree), never serves what it read; a
//! torn or damaged tail that was never acknowledged is cut; state sled lost
//! (its recovery silently stops at the first damaged record of its `db`
//! file) is detected through the watermark record; an interrupted purge is
//! finished at open.
//!
//! These tests edit the files directly, so they name the on-disk layout
//! (segment records, sled tree names, sealed bincode values) on purpose.

mod common;

use std::path::{Path, PathBuf};

use common::{edit, log_id, put_entry, TestConfig};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use raftlock_storage::{Durability, SledLogConfig, SledLogStore};
use tempfile::TempDir;

type Store = SledLogStore<TestConfig>;

fn try_open(dir: &Path) -> Result<Store, raftlock_storage::StoreError> {
    Store::open(&SledLogConfig::new(dir).with_durability(Durability::Fsync))
}

/// The refusal's message; panics if the store opened.
fn refusal(dir: &Path) -> String {
    match try_open(dir) {
        Ok(_) => panic!("the store opened"),
        Err(e) => e.to_string(),
    }
}

/// A value as the store seals it in sled under `key`: CRC32 of key and
/// payload.
fn sealed(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(payload);
    let mut out = h.finalize().to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// The first segment file.
fn segment(dir: &Path) -> PathBuf {
    dir.join("segment-0000000000000001.log")
}

/// Bytes of a segment file's header.
const FILE_HEADER: usize = 32;
/// Bytes of a record's header; records are padded to 8 bytes.
const RECORD_HEADER: usize = 24;

/// A record as the segment files frame it: `len`, CRC32 of `len` and
/// everything after the CRC, kind, 7 zero bytes, index, payload, padding.
fn record(kind: u8, index: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; RECORD_HEADER];
    out[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    out[8] = kind;
    out[16..24].copy_from_slice(&index.to_le_bytes());
    out.extend_from_slice(payload);
    let mut h = crc32fast::Hasher::new();
    h.update(&out[0..4]);
    h.update(&out[8..]);
    let crc = h.finalize();
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

/// `(offset, kind, index)` of every record of a segment file, and where
/// they end.
fn records(path: &Path) -> (Vec<(usize, u8, u64)>, usize) {
    let bytes = std::fs::read(path).expect("read segment");
    let mut at = FILE_HEADER;
    let mut out = Vec::new();
    while at + RECORD_HEADER <= bytes.len() && bytes[at..at + RECORD_HEADER] != [0; 24] {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4")) as usize;
        let index = u64::from_le_bytes(bytes[at + 16..at + 24].try_into().expect("8"));
        out.push((at, bytes[at + 8], index));
        at += (RECORD_HEADER + len).next_multiple_of(8);
    }
    (out, at)
}

/// Offset of the record of entry `index`.
fn entry_offset(dir: &Path, index: u64) -> usize {
    records(&segment(dir))
        .0
        .iter()
        .rev()
        .find(|(_, kind, i)| *kind == 1 && *i == index)
        .expect("entry record")
        .0
}

fn flip_at(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).expect("write");
}

/// Writes `bytes` at the end of the records of the first segment, as an
/// append would that crashed before its barrier.
fn write_after_the_records(dir: &Path, bytes: &[u8]) {
    let path = segment(dir);
    let (_, end) = records(&path);
    let mut file = std::fs::read(&path).expect("read");
    file[end..end + bytes.len()].copy_from_slice(bytes);
    std::fs::write(&path, file).expect("write");
}

/// Creates a store with entries 1..=5 (all acknowledged) and a vote, then
/// closes it.
async fn store_with_five_entries(dir: &Path) -> anyhow::Result<()> {
    let mut store = try_open(dir)?;
    store
        .blocking_append((1..=5).map(|i| put_entry(1, i, 16)))
        .await?;
    store.save_vote(&Vote::new(1, 0)).await?;
    Ok(())
}

fn indexes(entries: &[openraft::Entry<TestConfig>]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

#[tokio::test]
async fn a_corrupt_acknowledged_entry_refuses_the_start() -> anyhow::Result<()> {
    for index in [3, 5] {
        let dir = TempDir::new()?;
        store_with_five_entries(dir.path()).await?;
        let at = entry_offset(dir.path(), index);
        flip_at(&segment(dir.path()), at + RECORD_HEADER + 10);
        let msg = refusal(dir.path());
        assert!(msg.contains("refusing to start from"), "{msg}");
        // The last entry too: the mark written at close claims it.
        assert!(
            msg.contains(&format!("segment-0000000000000001.log, offset {at}")),
            "{msg}"
        );
        assert!(msg.contains("checksum mismatch"), "{msg}");
        assert!(
            msg.contains("acknowledged log entries are damaged"),
            "{msg}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_torn_or_corrupt_unacknowledged_tail_is_cut() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    // Entries 6 and 7 were written but no barrier covered them (no mark
    // claims them); the first is damaged, the second intact.
    let mut tail = Vec::new();
    for i in [6u64, 7] {
        let mut r = record(1, i, &bincode::serialize(&put_entry(1, i, 16))?);
        if i == 6 {
            r[RECORD_HEADER + 3] ^= 0x01;
        }
        tail.extend(r);
    }
    write_after_the_records(dir.path(), &tail);
    let mut store = try_open(dir.path())?;
    let state = store.get_log_state().await?;
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    assert_eq!(
        indexes(&store.try_get_log_entries(..).await?),
        vec![1, 2, 3, 4, 5]
    );
    // The cut is durable, and the log goes on from there.
    store.blocking_append([put_entry(2, 6, 16)]).await?;
    drop(store);
    let mut store = try_open(dir.path())?;
    assert_eq!(store.get_log_state().await?.last_log_id, Some(log_id(2, 6)));

    // A record cut short by a crash (its last bytes never written).
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let r = record(1, 6, &bincode::serialize(&put_entry(1, 6, 64))?);
    write_after_the_records(dir.path(), &r[..r.len() - 20]);
    let mut store = try_open(dir.path())?;
    assert_eq!(store.get_log_state().await?.last_log_id, Some(log_id(1, 5)));
    Ok(())
}

#[tokio::test]
async fn a_record_holding_another_entry_refuses_the_start() -> anyhow::Result<()> {
    // A record for index 6 whose checksum holds but whose entry is 2.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let r = record(1, 6, &bincode::serialize(&put_entry(1, 2, 16))?);
    write_after_the_records(dir.path(), &r);
    let msg = refusal(dir.path());
    assert!(msg.contains("record of index 6 holds log entry 2"), "{msg}");
    // A payload that does not decode as an entry.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    write_after_the_records(dir.path(), &record(1, 6, &[0xff; 16]));
    let msg = refusal(dir.path());
    assert!(msg.contains("log entry 6 does not decode"), "{msg}");
    Ok(())
}

#[tokio::test]
async fn a_corrupt_vote_or_pointer_refuses_the_start() -> anyhow::Result<()> {
    for tree in ["raft_vote", "raft_purged"] {
        let dir = TempDir::new()?;
        store_with_five_entries(dir.path()).await?;
        edit(dir.path(), tree, |t| {
            t.insert(b"value", &[1u8, 2, 3, 4, 5, 6][..]).map(drop)
        })?;
        let msg = refusal(dir.path());
        assert!(msg.contains(&format!("sled tree `{tree}`")), "{msg}");
        assert!(msg.contains("checksum mismatch"), "{msg}");
    }
    Ok(())
}

#[tokio::test]
async fn state_sled_lost_is_detected() -> anyhow::Result<()> {
    // The vote gone, or older than the one recorded.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_vote", |t| t.remove(b"value").map(drop))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("sled lost the vote"), "{msg}");

    // The purge pointer gone.
    let dir = TempDir::new()?;
    {
        store_with_five_entries(dir.path()).await?;
        let mut store = try_open(dir.path())?;
        store.purge(log_id(1, 3)).await?;
    }
    edit(dir.path(), "raft_purged", |t| t.remove(b"value").map(drop))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("sled lost the purge pointer"), "{msg}");

    // Everything gone: sled's files replaced by an empty database.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    for entry in std::fs::read_dir(dir.path())? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let ours = name.is_some_and(|n| n == "raftlock.watermark" || n.starts_with("segment-"));
        if !ours {
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
    }
    let msg = refusal(dir.path());
    assert!(msg.contains("sled lost everything"), "{msg}");
    Ok(())
}

#[tokio::test]
async fn a_damaged_watermark_record_or_old_format_refuses_the_start() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    std::fs::write(dir.path().join("raftlock.watermark"), [0u8; 512])?;
    let msg = refusal(dir.path());
    assert!(msg.contains("raftlock.watermark: no valid record"), "{msg}");
    std::fs::remove_file(dir.path().join("raftlock.watermark"))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("raftlock.watermark is missing"), "{msg}");

    // A data directory of the format before checksums.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raftlock_format", |t| t.clear())?;
    std::fs::remove_file(dir.path().join("raftlock.watermark"))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("written by an older raftlock"), "{msg}");
    Ok(())
}

/// A data directory as format 1 wrote it: entries 1..=5 sealed in sled's
/// `raft_log` (entry `damaged` with a flipped bit), vote (1, 0),
/// committed (1, 4), and a format-1 watermark record saying entries
/// through `acked` were acknowledged.
fn format_1_dir(dir: &Path, acked: u64, damaged: Option<u64>) -> anyhow::Result<()> {
    let db = sled::open(dir)?;
    let log = db.open_tree("raft_log")?;
    for i in 1..=5u64 {
        let key = i.to_be_bytes();
        let mut value = sealed(&key, &bincode::serialize(&put_entry(1, i, 16))?);
        if damaged == Some(i) {
            value[10] ^= 0x01;
        }
        log.insert(key, value)?;
    }
    let vote = bincode::serialize(&Vote::<u64>::new(1, 0))?;
    db.open_tree("raft_vote")?
        .insert(b"value", sealed(b"value", &vote))?;
    let committed = bincode::serialize(&Some(log_id(1, 4)))?;
    db.open_tree("raft_committed")?
        .insert(b"value", sealed(b"value", &committed))?;
    db.open_tree("raftlock_format")?
        .insert(b"version", sealed(b"version", &1u32.to_le_bytes()))?;
    db.flush()?;
    drop(db);
    // The record's slot for sequence number 1 (the second of two).
    let mut slot = [0u8; 256];
    slot[..4].copy_from_slice(b"RLWM");
    slot[4..8].copy_from_slice(&1u32.to_le_bytes());
    slot[8..16].copy_from_slice(&1u64.to_le_bytes());
    slot[16..24].copy_from_slice(&acked.to_le_bytes());
    slot[24..26].copy_from_slice(&(vote.len() as u16).to_le_bytes());
    slot[26..26 + vote.len()].copy_from_slice(&vote);
    let crc = crc32fast::hash(&slot[..252]);
    slot[252..].copy_from_slice(&crc.to_le_bytes());
    let mut file = vec![0u8; 256];
    file.extend_from_slice(&slot);
    std::fs::write(dir.join("raftlock.watermark"), file)?;
    Ok(())
}

/// A format-1 directory (entries in sled) is converted once at open, its
/// entries, vote and committed id kept, and checked as format 1 checked
/// it: a damaged acknowledged entry refuses, a damaged tail above the
/// recorded index is left behind.
#[tokio::test]
async fn a_format_1_directory_is_converted_at_open() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    format_1_dir(dir.path(), 5, None)?;
    {
        let mut store = try_open(dir.path())?;
        assert_eq!(
            store.try_get_log_entries(..).await?,
            (1..=5).map(|i| put_entry(1, i, 16)).collect::<Vec<_>>()
        );
        assert_eq!(store.read_vote().await?, Some(Vote::new(1, 0)));
        assert_eq!(store.read_committed().await?, Some(log_id(1, 4)));
        store.blocking_append([put_entry(2, 6, 16)]).await?;
    }
    edit(dir.path(), "raft_log", |t| {
        assert!(t.is_empty(), "the old entries are gone from sled");
        Ok(())
    })?;
    assert!(segment(dir.path()).exists());
    let mut store = try_open(dir.path())?;
    assert_eq!(
        indexes(&store.try_get_log_entries(..).await?),
        vec![1, 2, 3, 4, 5, 6]
    );
    drop(store);

    let dir = TempDir::new()?;
    format_1_dir(dir.path(), 5, Some(3))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("converting the format-1 log store"), "{msg}");
    assert!(msg.contains("index 3 (acknowledged"), "{msg}");

    let dir = TempDir::new()?;
    format_1_dir(dir.path(), 4, Some(5))?;
    let mut store = try_open(dir.path())?;
    assert_eq!(
        indexes(&store.try_get_log_entries(..).await?),
        vec![1, 2, 3, 4]
    );
    Ok(())
}

#[tokio::test]
async fn a_truncation_reopens_cleanly() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let mut store = try_open(dir.path())?;
    store.truncate(log_id(1, 3)).await?;
    drop(store);
    let mut store = try_open(dir.path())?;
    assert_eq!(indexes(&store.try_get_log_entries(..).await?), vec![1, 2]);
    store.blocking_append([put_entry(2, 3, 8)]).await?;
    drop(store);
    let mut store = try_open(dir.path())?;
    assert_eq!(
        store.try_get_log_entries(..).await?,
        vec![put_entry(1, 1, 16), put_entry(1, 2, 16), put_entry(2, 3, 8)]
    );
    Ok(())
}

/// 200 one-entry appends, each with its barrier, and a vote; then 200
/// bytes flipped in the middle of the log's records, or of sled's file, of
/// the stopped store. The store must refuse, or open with everything
/// intact (damage sled's recovery no longer reads); never open with the
/// vote or acknowledged entries missing.
#[tokio::test]
async fn bytes_flipped_in_the_middle_of_a_file_never_go_unnoticed() -> anyhow::Result<()> {
    for file in ["segment", "db"] {
        for offset_per_mille in [300usize, 500, 700] {
            let dir = TempDir::new()?;
            {
                let mut store = try_open(dir.path())?;
                for i in 1..=200u64 {
                    store.blocking_append([put_entry(1, i, 64)]).await?;
                    if i == 150 {
                        store.save_vote(&Vote::new(2, 0)).await?;
                    }
                }
            }
            let (path, len) = match file {
                "segment" => (segment(dir.path()), records(&segment(dir.path())).1),
                _ => {
                    let path = dir.path().join("db");
                    let len = std::fs::metadata(&path)?.len() as usize;
                    (path, len)
                }
            };
            let mut bytes = std::fs::read(&path)?;
            let at = len * offset_per_mille / 1000;
            for b in &mut bytes[at..at + 200] {
                *b ^= 0xa5;
            }
            std::fs::write(&path, &bytes)?;
            match try_open(dir.path()) {
                Err(e) => eprintln!("{file} {offset_per_mille}‰: refused: {e}"),
                Ok(mut store) => {
                    assert_ne!(file, "segment", "damaged records were accepted");
                    let state = store.get_log_state().await?;
                    assert_eq!(state.last_log_id, Some(log_id(1, 200)));
                    assert_eq!(store.read_vote().await?, Some(Vote::new(2, 0)));
                    assert_eq!(store.try_get_log_entries(..).await?.len(), 200);
                }
            }
        }
    }
    Ok(())
}

/// `purge` writes the pointer, then (after a barrier) deletes segments;
/// entries at or below a pointer found at open are dropped.
#[tokio::test]
async fn interrupted_purge_is_completed_at_open() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let pointer = sealed(b"value", &bincode::serialize(&log_id(1, 2))?);
    edit(dir.path(), "raft_purged", |t| {
        t.insert(b"value", pointer).map(drop)
    })?;

    let mut store = try_open(dir.path())?;
    let state = store.get_log_state().await?;
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    assert_eq!(
        indexes(&store.try_get_log_entries(..).await?),
        vec![3, 4, 5]
    );
    Ok(())
}

/// The committed log id is written with the log (no sled write, no extra
/// sync) and survives a reopen; one naming an entry the log lost is not
/// reported.
#[tokio::test]
async fn the_committed_id_survives_and_never_outruns_the_log() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        let mut store = try_open(dir.path())?;
        store
            .blocking_append((1..=5).map(|i| put_entry(1, i, 16)))
            .await?;
        store.save_committed(Some(log_id(1, 4))).await?;
    }
    let mut store = try_open(dir.path())?;
    assert_eq!(store.read_committed().await?, Some(log_id(1, 4)));
    store.save_committed(Some(log_id(1, 9))).await?;
    drop(store);
    // Index 9 is not in the log (as after a torn tail was cut).
    let mut store = try_open(dir.path())?;
    assert_eq!(store.read_committed().await?, None);
    Ok(())
}
