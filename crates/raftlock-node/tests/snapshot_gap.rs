//! A member whose log was purged past its newest snapshot (what a `kill -9`
//! left behind when openraft 0.9 purged a follower's log before the
//! snapshot it was installing reached the disk) cannot rebuild its state:
//! the entries between the snapshot and the log are gone. It must refuse to
//! start with an error that names its data directory, both indexes and the
//! fix, rather than fail somewhere inside openraft or start on a state it
//! cannot rebuild.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{eventually, settings, WAIT};
use openraft::storage::RaftLogStorage;
use raftlock_node::{LocalCluster, Node, StartError, TypeConfig};
use raftlock_storage::{SledLogConfig, SledLogStore};

/// Opens `count` sessions through `node`: one log entry each.
async fn write(node: &Node, count: usize) {
    for i in 0..count {
        node.open_session(&format!("gap-{i}"), Duration::from_secs(60))
            .await
            .expect("open session");
    }
}

/// Purges the stopped member's log through its last entry, as the old
/// store did at once when a follower installed a snapshot; returns that
/// index.
async fn purge_whole_log(data_dir: &Path) -> u64 {
    let config = SledLogConfig::new(data_dir.join("log"));
    let mut log = SledLogStore::<TypeConfig>::open(&config).expect("open the member's log");
    let last = log
        .get_log_state()
        .await
        .expect("log state")
        .last_log_id
        .expect("a log");
    log.purge(last).await.expect("purge");
    last.index
}

fn refusal(result: Result<(), StartError>) -> (String, String) {
    match result {
        Err(StartError::Storage { path, message }) => (path, message),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(()) => panic!("started on a log it cannot replay"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_log_was_purged_past_its_snapshot_refuses_to_start() {
    common::init_tracing();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = LocalCluster::start(dir.path(), 1, settings())
        .await
        .expect("start");
    cluster.leader(WAIT).await.expect("a leader");
    let node = cluster.node(1).clone();
    write(&node, 5).await;
    node.raft().trigger().snapshot().await.expect("trigger");
    let mut snapshot = None;
    eventually("the snapshot to be built", WAIT, || {
        snapshot = node.raft().metrics().borrow().snapshot.map(|s| s.index);
        snapshot.is_some()
    })
    .await;
    let snapshot = snapshot.expect("a snapshot");
    write(&node, 5).await;
    let data_dir: PathBuf = node.config().data_dir.clone();
    drop(node);
    cluster.stop(1).await;

    let purged = purge_whole_log(&data_dir).await;
    assert!(purged > snapshot, "entries after the snapshot were written");
    let (path, message) = refusal(cluster.restart(1).await);
    println!("refused: {message}");
    assert_eq!(path, data_dir.display().to_string());
    for needle in [
        format!("purged through index {purged}"),
        format!("only through index {snapshot}"),
        "Move this member's data directory away".to_string(),
    ] {
        assert!(message.contains(&needle), "{needle:?} not in: {message}");
    }

    // No snapshot at all (lost, or never written) is refused the same way.
    std::fs::remove_file(data_dir.join("snapshot.bin")).expect("remove snapshot");
    let (_, message) = refusal(cluster.restart(1).await);
    assert!(message.contains("there is no snapshot"), "{message}");
    assert!(
        message.contains(&format!("purged through index {purged}")),
        "{message}"
    );
}
