//! Issue 14: a stopped member whose files were damaged refuses to start,
//! naming the file (or sled tree) and the offset (or index), and never
//! serves the damaged state. The member's log (`log/`: segment files and
//! sled) and snapshot
//! (`snapshot.bin`) are damaged in place between a stop and a restart; an
//! undamaged copy of the same directory still starts.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{eventually, settings, WAIT};
use raftlock_node::{LocalCluster, Node, StartError};

async fn write(node: &Node, count: usize) {
    for i in 0..count {
        node.open_session(&format!("c-{i}"), Duration::from_secs(60))
            .await
            .expect("open session");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

fn flip(path: &Path, at_per_mille: usize, len: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = bytes.len() * at_per_mille / 1000;
    let end = (at + len).min(bytes.len());
    for b in &mut bytes[at..end] {
        *b ^= 0xa5;
    }
    std::fs::write(path, bytes).expect("write");
}

fn flip_range(path: &Path, at: usize, len: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    for b in &mut bytes[at..at + len] {
        *b ^= 0xa5;
    }
    std::fs::write(path, bytes).expect("write");
}

fn refused(result: Result<(), StartError>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(()) => panic!("the damaged member started"),
    }
}

/// One member with a snapshot and log entries after it, stopped; returns
/// its data directory and a pristine copy of it.
async fn stopped_member(dir: &Path) -> (LocalCluster, PathBuf, PathBuf) {
    let mut cluster = LocalCluster::start(dir, 1, settings())
        .await
        .expect("start");
    cluster.leader(WAIT).await.expect("a leader");
    let node = cluster.node(1).clone();
    write(&node, 40).await;
    node.raft().trigger().snapshot().await.expect("trigger");
    eventually("the snapshot to be built", WAIT, || {
        node.raft().metrics().borrow().snapshot.is_some()
    })
    .await;
    write(&node, 200).await;
    let data_dir = node.config().data_dir.clone();
    drop(node);
    cluster.stop(1).await;
    let pristine = dir.join("pristine");
    copy_dir(&data_dir, &pristine);
    (cluster, data_dir, pristine)
}

fn restore(pristine: &Path, data_dir: &Path) {
    std::fs::remove_dir_all(data_dir).expect("wipe");
    copy_dir(pristine, data_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_or_log_refuses_the_start() {
    common::init_tracing();
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut cluster, data_dir, pristine) = stopped_member(dir.path()).await;

    // One flipped byte in the snapshot file.
    flip(&data_dir.join("snapshot.bin"), 500, 1);
    let message = refused(cluster.restart(1).await);
    println!("snapshot: {message}");
    assert!(message.contains("snapshot.bin"), "{message}");
    assert!(
        message.contains("checksum mismatch in bytes 0.."),
        "{message}"
    );

    // A torn (truncated) snapshot file.
    restore(&pristine, &data_dir);
    let snapshot = data_dir.join("snapshot.bin");
    let len = std::fs::metadata(&snapshot).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&snapshot)
        .and_then(|f| f.set_len(len - 3))
        .expect("truncate");
    let message = refused(cluster.restart(1).await);
    assert!(message.contains("no whole trailer"), "{message}");

    // 200 bytes flipped in the middle of the log's records (the issue's
    // report was about sled's file, which held the log then): later
    // records say the damaged ones were acknowledged, so it refuses.
    restore(&pristine, &data_dir);
    let segment = data_dir.join("log").join("segment-0000000000000001.log");
    let written = std::fs::read(&segment)
        .expect("read segment")
        .iter()
        .rposition(|b| *b != 0)
        .expect("records");
    flip_range(&segment, written / 2, 200);
    let message = refused(cluster.restart(1).await);
    println!("segment: {message}");
    assert!(message.contains("refusing to start from"), "{message}");
    assert!(
        message.contains("segment-0000000000000001.log, offset"),
        "{message}"
    );

    // The watermark record missing: nothing to check sled against.
    restore(&pristine, &data_dir);
    std::fs::remove_file(data_dir.join("log").join("raftlock.watermark")).expect("rm");
    let message = refused(cluster.restart(1).await);
    assert!(
        message.contains("raftlock.watermark is missing"),
        "{message}"
    );

    // The undamaged directory starts and serves what was written.
    restore(&pristine, &data_dir);
    cluster.restart(1).await.expect("a pristine copy starts");
    cluster.leader(WAIT).await.expect("a leader");
}
