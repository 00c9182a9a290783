//! Behaviour of `SledLogStore` beyond openraft's suite: state survives a
//! reopen, one barrier per append batch, large entries, segment rotation
//! and deletion, the metadata helper.

mod common;

use common::{log_id, open, put_entry, Store};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{LogState, RaftLogReader, Vote};
use std::time::Duration;

use raftlock_storage::{Durability, SledLogConfig};
use tempfile::TempDir;

#[tokio::test]
async fn reopen_returns_same_entries_vote_committed_and_purged() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let entries: Vec<_> = (1..=10).map(|i| put_entry(2, i, 32)).collect();
    {
        let mut store = open(dir.path(), Durability::Fsync);
        store.blocking_append(entries.clone()).await?;
        store.save_vote(&Vote::new_committed(2, 1)).await?;
        store.save_committed(Some(log_id(2, 7))).await?;
        store.purge(log_id(2, 3)).await?;
        store.truncate(log_id(2, 9)).await?;
    }

    let mut store = open(dir.path(), Durability::Fsync);
    // The same term and candidate, but not restored as committed: the
    // member must not lead again without an election (store.rs, type docs).
    assert_eq!(store.read_vote().await?, Some(Vote::new(2, 1)));
    assert_eq!(store.read_committed().await?, Some(log_id(2, 7)));
    assert_eq!(
        store.get_log_state().await?,
        LogState {
            last_purged_log_id: Some(log_id(2, 3)),
            last_log_id: Some(log_id(2, 8)),
        }
    );
    let got = store
        .get_log_reader()
        .await
        .try_get_log_entries(0..100)
        .await?;
    assert_eq!(got, entries[3..8].to_vec());
    Ok(())
}

#[tokio::test]
async fn a_restored_vote_is_uncommitted_until_the_next_save() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        let mut store = open(dir.path(), Durability::Fsync);
        store.save_vote(&Vote::new_committed(3, 2)).await?;
        // Within one run the vote reads back as saved.
        assert_eq!(store.read_vote().await?, Some(Vote::new_committed(3, 2)));
    }
    let mut store = open(dir.path(), Durability::Fsync);
    let restored = store.read_vote().await?.expect("a vote");
    assert!(!restored.committed, "{restored:?}");
    assert_eq!(restored.leader_id, Vote::<u64>::new(3, 2).leader_id);
    store.save_vote(&Vote::new_committed(4, 1)).await?;
    assert_eq!(store.read_vote().await?, Some(Vote::new_committed(4, 1)));
    Ok(())
}

#[tokio::test]
async fn purging_everything_keeps_last_log_id_across_reopen() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        let mut store = open(dir.path(), Durability::Fsync);
        store
            .blocking_append((1..=4).map(|i| put_entry(1, i, 8)))
            .await?;
        // Past the last entry, as after installing a newer snapshot.
        store.purge(log_id(3, 20)).await?;
    }
    let mut store = open(dir.path(), Durability::Fsync);
    let state = store.get_log_state().await?;
    assert_eq!(state.last_purged_log_id, Some(log_id(3, 20)));
    assert_eq!(state.last_log_id, Some(log_id(3, 20)));
    assert!(store.try_get_log_entries(..).await?.is_empty());
    Ok(())
}

/// A purge removes its keys one at a time (transient memory, see
/// `LogTree::remove_upto`): it must still leave exactly the entries after
/// the purged id, before and after a reopen.
#[tokio::test]
async fn purge_across_several_batches_leaves_the_tail() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let entries: Vec<_> = (1..=1_000).map(|i| put_entry(1, i, 16)).collect();
    let mut store = open(dir.path(), Durability::FlushOnly);
    store.blocking_append(entries.clone()).await?;
    store.purge(log_id(1, 700)).await?;
    assert_eq!(
        store.try_get_log_entries(..).await?,
        entries[700..].to_vec()
    );
    drop(store);
    let mut store = open(dir.path(), Durability::FlushOnly);
    assert_eq!(
        store.get_log_state().await?,
        LogState {
            last_purged_log_id: Some(log_id(1, 700)),
            last_log_id: Some(log_id(1, 1_000)),
        }
    );
    assert_eq!(
        store.try_get_log_entries(..).await?,
        entries[700..].to_vec()
    );
    Ok(())
}

#[tokio::test]
async fn one_barrier_per_append_whatever_the_batch_size() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let mut store = open(dir.path(), Durability::Fsync);
    let before = store.sync_stats();

    store
        .blocking_append((1..=256).map(|i| put_entry(1, i, 64)))
        .await?;
    let after = store.sync_stats();
    assert_eq!(
        (after.barriers, after.requests),
        (before.barriers + 1, before.requests + 1)
    );
    // The barrier's time is counted (an fdatasync takes some).
    assert!(after.barrier_micros > before.barrier_micros, "{after:?}");

    store.blocking_append([put_entry(1, 257, 64)]).await?;
    assert_eq!(store.sync_stats().barriers, before.barriers + 2);
    assert_eq!(store.try_get_log_entries(1..=257).await?.len(), 257);
    Ok(())
}

/// Segment files of the log in `dir`.
fn segment_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("segment-"))
        })
        .count()
}

/// An entry larger than a segment and than the zero-filled chunks the
/// file grows by gets a segment of its own, and reads back after a reopen.
#[tokio::test]
async fn large_entries_round_trip() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let config = SledLogConfig::new(dir.path()).with_segment_bytes(1024 * 1024);
    let big = [
        put_entry(1, 1, 16),
        put_entry(1, 2, 3 * 1024 * 1024),
        put_entry(1, 3, 16),
    ];
    {
        let mut store = Store::open(&config)?;
        store.blocking_append(big[..1].to_vec()).await?;
        store.blocking_append(big[1..].to_vec()).await?;
    }
    // The big batch went to a segment of its own (and the mark written at
    // close, past that segment's size, to a third).
    assert!(segment_files(dir.path()) >= 2);
    let mut store = Store::open(&config)?;
    assert_eq!(store.try_get_log_entries(..).await?, big.to_vec());
    Ok(())
}

/// The log moves on to a new segment file when one is full, and a purge
/// deletes the oldest segments once every entry in them is purged (and
/// never one holding an entry after the purge point).
#[tokio::test]
async fn segments_rotate_and_purges_delete_whole_old_ones() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let config = SledLogConfig::new(dir.path())
        .with_durability(Durability::FlushOnly)
        .with_segment_bytes(64 * 1024);
    let entries: Vec<_> = (1..=1_000).map(|i| put_entry(1, i, 200)).collect();
    let mut store = Store::open(&config)?;
    for chunk in entries.chunks(10) {
        store.blocking_append(chunk.to_vec()).await?;
    }
    let before = segment_files(dir.path());
    assert!(before >= 4, "{before} segments for ~270 KB at 64 KiB each");
    store.purge(log_id(1, 700)).await?;
    let after = segment_files(dir.path());
    assert!(
        after < before && after >= 2,
        "{before} segments before the purge, {after} after"
    );
    assert_eq!(
        store.try_get_log_entries(..).await?,
        entries[700..].to_vec()
    );
    drop(store);
    let mut store = Store::open(&config)?;
    assert_eq!(
        store.get_log_state().await?,
        LogState {
            last_purged_log_id: Some(log_id(1, 700)),
            last_log_id: Some(log_id(1, 1_000)),
        }
    );
    assert_eq!(
        store.try_get_log_entries(..).await?,
        entries[700..].to_vec()
    );
    // Purging everything keeps the active segment (the next append goes
    // there) and deletes every other.
    store.purge(log_id(1, 1_000)).await?;
    assert_eq!(segment_files(dir.path()), 1);
    store.blocking_append([put_entry(2, 1_001, 8)]).await?;
    drop(store);
    let mut store = Store::open(&config)?;
    assert_eq!(
        store.try_get_log_entries(..).await?,
        vec![put_entry(2, 1_001, 8)]
    );
    Ok(())
}

#[tokio::test]
async fn flush_only_mode_stores_the_same() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let entries: Vec<_> = (1..=5).map(|i| put_entry(1, i, 8)).collect();
    {
        let mut store = open(dir.path(), Durability::FlushOnly);
        store.blocking_append(entries.clone()).await?;
        store.save_vote(&Vote::new(1, 0)).await?;
    }
    let mut store = open(dir.path(), Durability::FlushOnly);
    assert_eq!(store.try_get_log_entries(..).await?, entries);
    assert_eq!(store.read_vote().await?, Some(Vote::new(1, 0)));
    Ok(())
}

#[tokio::test]
async fn meta_store_values_are_durable_and_typed() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        let store = open(dir.path(), Durability::Fsync);
        let meta = store.meta();
        meta.put("node_id", &7u64).await?;
        meta.put("snapshot", &String::from("snap-42")).await?;
        meta.put("gone", &1u8).await?;
        meta.remove("gone").await?;
    }
    let store = open(dir.path(), Durability::Fsync);
    let meta = store.meta();
    assert_eq!(meta.get::<u64>("node_id")?, Some(7));
    assert_eq!(meta.get::<String>("snapshot")?, Some("snap-42".into()));
    assert_eq!(meta.get::<u8>("gone")?, None);
    // Reading with the wrong type is an error, not garbage or a panic.
    assert!(meta.get::<String>("node_id").is_err());
    Ok(())
}

#[tokio::test]
async fn second_open_of_a_locked_directory_fails_cleanly() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let _store = open(dir.path(), Durability::Fsync);
    let second = common::Store::open(&raftlock_storage::SledLogConfig::new(dir.path()));
    let err = second.err().expect("sled must refuse a second open");
    assert!(
        err.to_string().contains("cannot open sled database"),
        "{err}"
    );
    Ok(())
}

/// With deferred durability an append is reported to openraft as soon as it
/// is written, and `DurableIndex` alone says what is on disk: it covers an
/// append only after a barrier, drops below a truncation, rises to a purge,
/// and starts at the last entry on reopen.
#[tokio::test]
async fn deferred_durability_reports_through_the_durable_index() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let config = SledLogConfig::new(dir.path()).with_deferred_durability(true);
    let mut store = Store::open(&config)?;
    let durable = store.durable_index();
    let stall = store.sync_stall();
    let bounded = Duration::from_secs(10);

    store
        .blocking_append((1..=5).map(|i| put_entry(1, i, 16)))
        .await?;
    tokio::time::timeout(bounded, durable.wait_for(5)).await??;

    // A stalled disk: the append is acknowledged at once, not made durable.
    stall.set(true);
    tokio::time::timeout(bounded, store.blocking_append([put_entry(1, 6, 16)])).await??;
    assert_eq!(durable.current()?, 5);
    stall.set(false);
    tokio::time::timeout(bounded, durable.wait_for(6)).await??;

    store.truncate(log_id(1, 4)).await?;
    assert_eq!(durable.current()?, 3, "indexes 4.. are gone");
    store.blocking_append([put_entry(2, 4, 16)]).await?;
    tokio::time::timeout(bounded, durable.wait_for(4)).await??;

    store.purge(log_id(2, 4)).await?;
    assert_eq!(durable.current()?, 4);
    store.blocking_append([put_entry(2, 5, 16)]).await?;
    tokio::time::timeout(bounded, durable.wait_for(5)).await??;
    drop(store);

    let reopened = Store::open(&config)?;
    assert_eq!(reopened.durable_index().current()?, 5);
    Ok(())
}

/// A failed `fdatasync` is never retried as if the data were safe (after
/// one, Linux may have dropped the dirty pages): the durable index fails
/// instead of advancing, and every later barrier, vote included, fails too.
#[tokio::test]
async fn a_failed_barrier_fails_every_later_one() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let config = SledLogConfig::new(dir.path()).with_deferred_durability(true);
    let mut store = Store::open(&config)?;
    let durable = store.durable_index();
    let bounded = Duration::from_secs(10);

    store
        .blocking_append((1..=3).map(|i| put_entry(1, i, 16)))
        .await?;
    tokio::time::timeout(bounded, durable.wait_for(3)).await??;

    store.sync_stall().fail_next();
    store.blocking_append([put_entry(1, 4, 16)]).await?;
    let waited = tokio::time::timeout(bounded, durable.wait_for(4)).await?;
    assert!(
        waited.is_err(),
        "index 4 reported durable after a failed barrier"
    );
    assert!(
        durable.current().is_err(),
        "the durable index must stay failed"
    );

    // The injection was used up: only the sticky failure fails these.
    let vote = store.save_vote(&Vote::new(2, 1)).await;
    assert!(
        vote.is_err(),
        "a vote was reported saved after a failed barrier"
    );
    store.blocking_append([put_entry(1, 5, 16)]).await?;
    assert!(tokio::time::timeout(bounded, durable.wait_for(5))
        .await?
        .is_err());
    assert!(
        durable.wait_for(3).await.is_err(),
        "a failure is final, even for indexes durable before it"
    );
    Ok(())
}

/// A full disk fails the barrier like any I/O error, and says so: the
/// durable index's error is recognisably "out of space".
#[tokio::test]
async fn a_full_disk_fails_the_barrier_and_is_named() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let config = SledLogConfig::new(dir.path()).with_deferred_durability(true);
    let mut store = Store::open(&config)?;
    let durable = store.durable_index();

    store.sync_stall().fail_next_out_of_space();
    store.blocking_append([put_entry(1, 1, 16)]).await?;
    let waited = tokio::time::timeout(Duration::from_secs(10), durable.wait_for(1)).await?;
    let err = waited.expect_err("index 1 reported durable on a full disk");
    assert!(err.is_out_of_space(), "not named as a full disk: {err}");
    assert!(durable.current().is_err_and(|e| e.is_out_of_space()));
    Ok(())
}
