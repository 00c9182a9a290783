//! Appends made while `InlineSync` is armed run their durability barrier in
//! the appending thread (what a follower answering an append does): durable
//! when `append` returns, with the same fault handling as the sync worker's
//! barriers, and never bypassing a stalled disk.

mod common;

use std::time::{Duration, Instant};

use common::{put_entry, Store};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::Vote;
use raftlock_storage::{Durability, SledLogConfig};
use tempfile::TempDir;

fn config(dir: &TempDir) -> SledLogConfig {
    SledLogConfig::new(dir.path())
        .with_durability(Durability::Fsync)
        .with_deferred_durability(true)
}

/// Armed: the barrier has run (and covers the entries) before `append`
/// returns, in the caller's thread: an injected slow sync delays the
/// append itself.
#[tokio::test]
async fn an_armed_append_is_durable_when_it_returns() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let mut store = Store::open(&config(&dir))?;
    let durable = store.durable_index();
    let inline = store.inline_sync();
    let before = store.sync_stats().barriers;

    let armed = inline.arm();
    store
        .blocking_append((1..=3).map(|i| put_entry(1, i, 16)))
        .await?;
    assert_eq!(durable.current()?, 3, "not durable when append returned");
    assert_eq!(store.sync_stats().barriers, before + 1);

    store.sync_stall().set_delay(Duration::from_millis(100));
    let started = Instant::now();
    store.blocking_append([put_entry(1, 4, 16)]).await?;
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "the slow sync did not run in the appending thread"
    );
    assert_eq!(durable.current()?, 4);
    drop(armed);
    Ok(())
}

/// A stalled disk is never bypassed: an armed append then queues for the
/// worker, is acknowledged to openraft as written, and becomes durable
/// only once the disk resumes.
#[tokio::test]
async fn an_armed_append_on_a_stalled_disk_waits_for_the_disk() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let mut store = Store::open(&config(&dir))?;
    let durable = store.durable_index();
    let stall = store.sync_stall();
    let _armed = store.inline_sync().arm();

    stall.set(true);
    tokio::time::timeout(
        Duration::from_secs(10),
        store.blocking_append([put_entry(1, 1, 16)]),
    )
    .await??;
    assert_eq!(durable.current()?, 0, "durable while the disk was stalled");
    stall.set(false);
    tokio::time::timeout(Duration::from_secs(10), durable.wait_for(1)).await??;
    Ok(())
}

/// A barrier that fails in the appending thread fails the durable index
/// at once, and every later barrier, the worker's included (a vote), fails
/// too: an `fdatasync` error is never followed by a "successful" sync.
#[tokio::test]
async fn an_inline_barrier_failure_is_final_for_the_worker_too() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let mut store = Store::open(&config(&dir))?;
    let durable = store.durable_index();
    let inline = store.inline_sync();

    let armed = inline.arm();
    store.blocking_append([put_entry(1, 1, 16)]).await?;
    assert_eq!(durable.current()?, 1);

    store.sync_stall().fail_next();
    store.blocking_append([put_entry(1, 2, 16)]).await?;
    assert!(
        durable.current().is_err(),
        "index 2 reported durable after a failed barrier"
    );
    drop(armed);

    // Not armed: the vote's barrier runs on the worker, which must know.
    let vote = store.save_vote(&Vote::new(2, 1)).await;
    assert!(
        vote.is_err(),
        "a vote was reported saved after a failed barrier"
    );
    let _armed = inline.arm();
    store.blocking_append([put_entry(1, 3, 16)]).await?;
    assert!(durable.wait_for(3).await.is_err(), "a failure is final");
    Ok(())
}
