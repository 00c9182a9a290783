//! What the store does with bytes it did not expect. Every stored value
//! carries a checksum and every record is checked at open: a damaged member
//! refuses to start with a message naming the sled tree (or file) and the
//! index, never serves what it read; a corrupt tail that was never
//! acknowledged is dropped; state sled lost (its recovery silently stops at
//! the first damaged record of its `db` file) is detected through the
//! watermark record; an interrupted purge is finished at open.
//!
//! These tests edit the sled database directly, so they name the on-disk
//! layout (tree names, big-endian keys, sealed bincode values) on purpose.

mod common;

use std::path::Path;

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

/// A value as the store seals it under `key`: CRC32 of key and payload.
fn sealed(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(payload);
    let mut out = h.finalize().to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
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

/// Flips one bit of the stored value of entry `index`.
fn flip_entry(dir: &Path, index: u64) -> anyhow::Result<()> {
    edit(dir, "raft_log", |t| {
        let key = index.to_be_bytes();
        let mut value = t.get(key)?.expect("entry present").to_vec();
        let at = value.len() / 2;
        value[at] ^= 0x10;
        t.insert(key, value).map(drop)
    })
}

fn indexes(entries: &[openraft::Entry<TestConfig>]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

#[tokio::test]
async fn a_corrupt_acknowledged_entry_refuses_the_start() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    flip_entry(dir.path(), 3)?;
    let msg = refusal(dir.path());
    assert!(msg.contains("refusing to start from"), "{msg}");
    assert!(msg.contains("sled tree `raft_log`, index 3"), "{msg}");
    assert!(msg.contains("checksum mismatch"), "{msg}");
    // The tail is acknowledged too: no repair there either.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    flip_entry(dir.path(), 5)?;
    let msg = refusal(dir.path());
    assert!(msg.contains("index 5 (acknowledged"), "{msg}");
    Ok(())
}

#[tokio::test]
async fn a_corrupt_unacknowledged_tail_is_truncated() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    // Entries 6 and 7 reached sled but no barrier covered them (the
    // watermark record says 5): the first is damaged.
    edit(dir.path(), "raft_log", |t| {
        for i in [6u64, 7] {
            let key = i.to_be_bytes();
            let mut value = sealed(&key, &bincode::serialize(&put_entry(1, i, 16)).unwrap());
            if i == 6 {
                value[9] ^= 0x01;
            }
            t.insert(key, value)?;
        }
        Ok(())
    })?;
    let mut store = try_open(dir.path())?;
    let state = store.get_log_state().await?;
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    assert_eq!(
        indexes(&store.try_get_log_entries(..).await?),
        vec![1, 2, 3, 4, 5]
    );
    // The repair is durable, and the log goes on from there.
    store.blocking_append([put_entry(2, 6, 16)]).await?;
    drop(store);
    let mut store = try_open(dir.path())?;
    assert_eq!(store.get_log_state().await?.last_log_id, Some(log_id(2, 6)));
    Ok(())
}

#[tokio::test]
async fn entries_under_the_wrong_key_or_with_bad_keys_refuse_the_start() -> anyhow::Result<()> {
    // A whole value copied under another index: the checksum covers the key.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        let two = t.get(2u64.to_be_bytes())?.expect("entry 2");
        t.insert(4u64.to_be_bytes(), two).map(drop)
    })?;
    let msg = refusal(dir.path());
    assert!(msg.contains("index 4"), "{msg}");

    // Sealed under the right key, but the entry inside claims another index.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let misplaced = sealed(
        &4u64.to_be_bytes(),
        &bincode::serialize(&put_entry(1, 2, 16))?,
    );
    edit(dir.path(), "raft_log", |t| {
        t.insert(4u64.to_be_bytes(), misplaced).map(drop)
    })?;
    let msg = refusal(dir.path());
    assert!(msg.contains("stored under index 4 claims index 2"), "{msg}");

    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        t.insert(b"odd", &b"x"[..]).map(drop)
    })?;
    let msg = refusal(dir.path());
    assert!(msg.contains("expected 8 bytes"), "{msg}");
    Ok(())
}

#[tokio::test]
async fn a_corrupt_vote_or_pointer_refuses_the_start() -> anyhow::Result<()> {
    for tree in ["raft_vote", "raft_committed", "raft_purged"] {
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
    // The log's tail gone (what sled does after a damaged record).
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        t.remove(4u64.to_be_bytes())?;
        t.remove(5u64.to_be_bytes()).map(drop)
    })?;
    let msg = refusal(dir.path());
    assert!(
        msg.contains("`raft_log` ends at index 3") && msg.contains("through index 5"),
        "{msg}"
    );

    // The vote gone, or older than the one recorded.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_vote", |t| t.remove(b"value").map(drop))?;
    let msg = refusal(dir.path());
    assert!(msg.contains("sled lost the vote"), "{msg}");

    // Everything gone: sled's files replaced by an empty database.
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    for entry in std::fs::read_dir(dir.path())? {
        let path = entry?.path();
        if path.file_name() != Some("raftlock.watermark".as_ref()) {
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

#[tokio::test]
async fn a_truncation_lowers_the_record_and_reopens_cleanly() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let mut store = try_open(dir.path())?;
    store.truncate(log_id(1, 3)).await?;
    drop(store);
    let mut store = try_open(dir.path())?;
    assert_eq!(indexes(&store.try_get_log_entries(..).await?), vec![1, 2]);
    Ok(())
}

/// Damage in the middle of sled's own data file, as the issue reports:
/// 200 bytes flipped in the middle of `db` of a stopped store. sled stops
/// its recovery there, dropping what follows; the store must refuse (or
/// open with everything intact when the damage hit space sled no longer
/// reads), never open with the vote or acknowledged entries missing.
#[tokio::test]
async fn bytes_flipped_in_the_middle_of_sleds_file_never_go_unnoticed() -> anyhow::Result<()> {
    for offset_per_mille in [300u64, 500, 700] {
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
        let db = dir.path().join("db");
        let mut bytes = std::fs::read(&db)?;
        let at = (bytes.len() as u64 * offset_per_mille / 1000) as usize;
        for b in &mut bytes[at..at + 200] {
            *b ^= 0xa5;
        }
        std::fs::write(&db, &bytes)?;
        match try_open(dir.path()) {
            Err(e) => eprintln!("{offset_per_mille}‰: refused: {e}"),
            Ok(mut store) => {
                let state = store.get_log_state().await?;
                assert_eq!(state.last_log_id, Some(log_id(1, 200)));
                assert_eq!(store.read_vote().await?, Some(Vote::new(2, 0)));
                assert_eq!(store.try_get_log_entries(..).await?.len(), 200);
            }
        }
    }
    Ok(())
}

/// `purge` writes the pointer, then deletes entries; simulate a crash in
/// between and check open finishes the job.
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
