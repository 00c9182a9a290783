//! What the store does with bytes it did not expect: corruption must become
//! an error (openraft then stops the node), never a panic; an interrupted
//! purge is finished at open.
//!
//! These tests edit the sled database directly, so they name the on-disk
//! layout (tree names, big-endian keys, bincode values) on purpose.

mod common;

use std::path::Path;

use common::{log_id, open, put_entry};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use raftlock_storage::Durability;
use tempfile::TempDir;

/// Creates a store with entries 1..=5 and a vote, then closes it.
async fn store_with_five_entries(dir: &Path) -> anyhow::Result<()> {
    let mut store = open(dir, Durability::Fsync);
    store
        .blocking_append((1..=5).map(|i| put_entry(1, i, 16)))
        .await?;
    store.save_vote(&Vote::new(1, 0)).await?;
    Ok(())
}

/// Edits tree `tree` of the closed database in `dir`.
fn edit(
    dir: &Path,
    tree: &str,
    f: impl FnOnce(&sled::Tree) -> sled::Result<()>,
) -> anyhow::Result<()> {
    let db = sled::open(dir)?;
    f(&db.open_tree(tree)?)?;
    db.flush()?;
    Ok(())
}

#[tokio::test]
async fn corrupt_entry_value_is_an_error() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        t.insert(3u64.to_be_bytes(), &[0xff; 7][..]).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    let err = store
        .try_get_log_entries(1..=5)
        .await
        .expect_err("corrupt entry");
    assert!(
        err.to_string().contains("corrupt log entry at index 3"),
        "{err}"
    );
    // Entries not touching the corrupt one still read fine.
    assert_eq!(store.try_get_log_entries(4..=5).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn corrupt_last_entry_fails_get_log_state() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        t.insert(5u64.to_be_bytes(), &b""[..]).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    assert!(store.get_log_state().await.is_err());
    Ok(())
}

#[tokio::test]
async fn entry_under_the_wrong_index_is_an_error() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let misplaced = bincode::serialize(&put_entry(1, 2, 16))?;
    edit(dir.path(), "raft_log", |t| {
        t.insert(4u64.to_be_bytes(), misplaced).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    let err = store
        .try_get_log_entries(..)
        .await
        .expect_err("misplaced entry");
    assert!(
        err.to_string()
            .contains("stored under index 4 claims index 2"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn malformed_log_key_is_an_error() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_log", |t| {
        t.insert(b"odd", &b"x"[..]).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    let err = store.try_get_log_entries(..).await.expect_err("bad key");
    assert!(err.to_string().contains("expected 8 bytes"), "{err}");
    Ok(())
}

#[tokio::test]
async fn corrupt_vote_is_an_error() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    edit(dir.path(), "raft_vote", |t| {
        t.insert(b"value", &[1u8, 2][..]).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    let err = store.read_vote().await.expect_err("corrupt vote");
    assert!(err.to_string().contains("corrupt vote"), "{err}");
    Ok(())
}

/// `purge` writes the pointer, then deletes entries; simulate a crash in
/// between and check open finishes the job.
#[tokio::test]
async fn interrupted_purge_is_completed_at_open() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    store_with_five_entries(dir.path()).await?;
    let pointer = bincode::serialize(&log_id(1, 2))?;
    edit(dir.path(), "raft_purged", |t| {
        t.insert(b"value", pointer).map(drop)
    })?;

    let mut store = open(dir.path(), Durability::Fsync);
    let state = store.get_log_state().await?;
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    let left: Vec<u64> = store
        .try_get_log_entries(..)
        .await?
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(left, vec![3, 4, 5]);
    Ok(())
}
