//! `SnapshotFloor`: with `snapshot_gated_purge` the log keeps every entry no
//! durable snapshot covers, whatever openraft purges (a follower's purge
//! races the install of the snapshot that covers it); an append never
//! leaves a hole behind a purge that waits; and a log that cannot be
//! replayed from the snapshot on disk is refused at start.

mod common;

use std::time::Duration;

use common::{log_id, put_entry, Store};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{LogState, RaftLogReader};
use raftlock_storage::{SledLogConfig, StoreError};
use tempfile::TempDir;

fn gated(dir: &TempDir) -> SledLogConfig {
    SledLogConfig::new(dir.path()).with_snapshot_gated_purge(true)
}

fn state(purged: Option<(u64, u64)>, last: Option<(u64, u64)>) -> LogState<common::TestConfig> {
    LogState {
        last_purged_log_id: purged.map(|(t, i)| log_id(t, i)),
        last_log_id: last.map(|(t, i)| log_id(t, i)),
    }
}

/// Indexes of the entries on disk.
async fn indexes(store: &mut Store) -> anyhow::Result<Vec<u64>> {
    let entries = store.try_get_log_entries(..).await?;
    Ok(entries.iter().map(|e| e.log_id.index).collect())
}

/// A purge that no durable snapshot covers is reported to openraft but kept
/// on disk; it is carried out, durably, as far as the floor rises.
#[tokio::test]
async fn a_purge_waits_until_a_durable_snapshot_covers_it() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        let mut store = Store::open(&gated(&dir))?;
        store.snapshot_floor().start(None)?;
        store
            .blocking_append((1..=10).map(|i| put_entry(1, i, 16)))
            .await?;
        // A follower installing a snapshot through 8: openraft purges while
        // the snapshot is still being written ...
        store.purge(log_id(1, 8)).await?;
        assert_eq!(
            store.get_log_state().await?,
            state(Some((1, 8)), Some((1, 10)))
        );
        assert_eq!(indexes(&mut store).await?, (1..=10).collect::<Vec<_>>());
    } // ... and the node dies before the snapshot is on disk.
    let mut store = Store::open(&gated(&dir))?;
    assert_eq!(store.get_log_state().await?, state(None, Some((1, 10))));
    assert_eq!(indexes(&mut store).await?, (1..=10).collect::<Vec<_>>());

    // Restarted with an older snapshot (through 3) on disk: purged to it at
    // once, then as far as each newer durable snapshot reaches.
    let floor = store.snapshot_floor();
    floor.start(Some(3))?;
    store.purge(log_id(1, 8)).await?;
    assert_eq!(indexes(&mut store).await?, (4..=10).collect::<Vec<_>>());
    floor.advance(6)?;
    assert_eq!(floor.current(), Some(6));
    assert_eq!(indexes(&mut store).await?, (7..=10).collect::<Vec<_>>());
    drop(store);
    let mut store = Store::open(&gated(&dir))?;
    assert_eq!(
        store.get_log_state().await?,
        state(Some((1, 6)), Some((1, 10)))
    );
    assert_eq!(indexes(&mut store).await?, (7..=10).collect::<Vec<_>>());

    let floor = store.snapshot_floor();
    floor.start(Some(6))?;
    store.purge(log_id(1, 8)).await?;
    floor.advance(9)?;
    assert_eq!(indexes(&mut store).await?, vec![9, 10]);
    drop(store);
    let mut store = Store::open(&gated(&dir))?;
    assert_eq!(
        store.get_log_state().await?,
        state(Some((1, 8)), Some((1, 10)))
    );
    assert_eq!(indexes(&mut store).await?, vec![9, 10]);
    Ok(())
}

/// A follower that installs a snapshot past its log's last entry purges
/// through it, and the next leader may append right after it while the
/// snapshot is still being written. The append waits for the snapshot:
/// written at once it would follow a hole (the entries between the log's
/// end and the snapshot's, neither on disk nor purged).
#[tokio::test]
async fn an_append_after_a_purge_past_the_last_entry_waits_for_the_snapshot() -> anyhow::Result<()>
{
    let dir = TempDir::new()?;
    let mut store = Store::open(&gated(&dir))?;
    let floor = store.snapshot_floor();
    floor.start(None)?;
    store
        .blocking_append((1..=5).map(|i| put_entry(1, i, 16)))
        .await?;
    store.purge(log_id(2, 10)).await?;
    assert_eq!(
        store.get_log_state().await?,
        state(Some((2, 10)), Some((2, 10)))
    );

    let mut reader = store.get_log_reader().await;
    let appending = tokio::spawn(async move {
        store.blocking_append([put_entry(2, 11, 16)]).await?;
        anyhow::Ok(store)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !appending.is_finished(),
        "the append did not wait for the snapshot"
    );
    let on_disk = reader.try_get_log_entries(..).await?;
    assert_eq!(on_disk.len(), 5, "nothing appended, nothing purged yet");

    floor.advance(10)?;
    let mut store = tokio::time::timeout(Duration::from_secs(10), appending).await???;
    assert_eq!(indexes(&mut store).await?, vec![11]);
    drop((reader, store));

    let mut store = Store::open(&gated(&dir))?;
    assert_eq!(
        store.get_log_state().await?,
        state(Some((2, 10)), Some((2, 11)))
    );
    store.snapshot_floor().start(Some(10))?;
    Ok(())
}

/// At start, a log purged past the snapshot on disk, or missing entries
/// after it, is refused with an error that names the indexes and the fix.
#[tokio::test]
async fn start_refuses_a_log_the_snapshot_does_not_reach() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    {
        // Not gated: the purge is durable at once, as before the fix.
        let mut store = Store::open(&SledLogConfig::new(dir.path()))?;
        store
            .blocking_append((1..=10).map(|i| put_entry(1, i, 16)))
            .await?;
        store.purge(log_id(1, 8)).await?;
    }
    let store = Store::open(&gated(&dir))?;
    let floor = store.snapshot_floor();
    let err = floor.start(Some(5)).expect_err("purged past the snapshot");
    assert!(
        matches!(
            err,
            StoreError::PurgedPastSnapshot {
                purged: 8,
                snapshot: Some(5)
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    for needle in [
        "purged through index 8",
        "only through index 5",
        "6..=8",
        "Move this member's data directory away",
    ] {
        assert!(text.contains(needle), "{needle:?} not in: {text}");
    }
    let err = floor.start(None).expect_err("no snapshot at all");
    assert!(err.to_string().contains("there is no snapshot"), "{err}");
    floor.start(Some(8))?;
    drop((floor, store));

    {
        // Entry 9 gone and 10 kept: a hole no Raft log should have, made
        // through the store (entries are written by index, like a map).
        let mut store = Store::open(&gated(&dir))?;
        store.truncate(log_id(1, 9)).await?;
        store.blocking_append([put_entry(1, 10, 16)]).await?;
    }
    let store = Store::open(&gated(&dir))?;
    let err = store
        .snapshot_floor()
        .start(Some(8))
        .expect_err("entry 9 is missing");
    assert!(
        matches!(
            err,
            StoreError::LogHole {
                snapshot: Some(8),
                first_missing: 9,
                last_missing: 9
            }
        ),
        "{err:?}"
    );
    // Entry 9 is not needed after a snapshot through 9.
    store.snapshot_floor().start(Some(9))?;
    Ok(())
}

/// A floor handle neither keeps the database open nor fails once the store
/// is gone (the node's state machine outlives its log store at shutdown).
#[tokio::test]
async fn a_floor_outliving_its_store_does_nothing() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let store = Store::open(&gated(&dir))?;
    let floor = store.snapshot_floor();
    drop(store);
    let _reopened = Store::open(&gated(&dir))?;
    floor.advance(7)?;
    assert_eq!(floor.current(), None);
    Ok(())
}
