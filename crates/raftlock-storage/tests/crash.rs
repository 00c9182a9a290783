//! `kill -9` in the middle of appending loses nothing that was acknowledged.
//!
//! The test re-runs its own binary as a child process (the ignored test
//! `crash_child`) that appends one entry per batch and prints `ack N` only
//! after openraft's durability callback for entry N fired. The parent kills
//! it with SIGKILL while it is busy, reopens the directory and checks every
//! acknowledged entry is there, with no hole. This checks the callback
//! ordering against a real process crash; power-loss durability (the
//! fdatasync) is shown by the strace evidence in the README.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{open, put_entry};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::RaftLogReader;
use raftlock_storage::Durability;
use tempfile::TempDir;

/// Tells the child where to write; its absence makes `crash_child` refuse.
const CHILD_DIR_ENV: &str = "RAFTLOCK_STORAGE_CRASH_CHILD_DIR";

/// Upper bound on the child's appends, so an orphaned child ends by itself.
const CHILD_MAX_APPENDS: u64 = 20_000;

#[test]
#[ignore = "child process of acknowledged_appends_survive_kill_9"]
fn crash_child() {
    let dir = std::env::var(CHILD_DIR_ENV).expect("run by acknowledged_appends_survive_kill_9");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut store = open(dir.as_ref(), Durability::Fsync);
        let first = store
            .get_log_state()
            .await
            .expect("state")
            .last_log_id
            .map_or(1, |id| id.index + 1);
        for index in first..first + CHILD_MAX_APPENDS {
            store
                .blocking_append([put_entry(1, index, 100)])
                .await
                .expect("append");
            println!("ack {index}");
        }
    });
}

/// Starts the child on `dir`, kills it once it acknowledged `at_least`
/// entries, and returns the highest index it acknowledged before dying.
fn run_child_and_kill(dir: &TempDir, at_least: u64) -> u64 {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "crash_child",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut acked = 0;
    for line in lines.by_ref() {
        if let Some(n) = line.expect("read child").strip_prefix("ack ") {
            acked = n.parse().expect("ack number");
            if acked >= at_least {
                break;
            }
        }
    }
    child.kill().expect("SIGKILL child");
    child.wait().expect("reap child");
    // Acks the child printed between our last read and its death count too.
    for line in lines {
        if let Some(n) = line.expect("read child").strip_prefix("ack ") {
            acked = n.parse().expect("ack number");
        }
    }
    acked
}

#[tokio::test]
async fn acknowledged_appends_survive_kill_9() -> anyhow::Result<()> {
    let dir = TempDir::new()?;
    let mut acked = 0;
    // Two crashes: the second one also crashes a recovered database.
    for _ in 0..2 {
        acked = run_child_and_kill(&dir, acked + 50);
        assert!(acked > 0, "child acknowledged nothing");

        let mut store = open(dir.path(), Durability::Fsync);
        let last = store
            .get_log_state()
            .await?
            .last_log_id
            .expect("entries")
            .index;
        assert!(
            last >= acked,
            "acknowledged {acked} but only {last} survived"
        );
        let indexes: Vec<u64> = store
            .try_get_log_entries(..)
            .await?
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(indexes, (1..=last).collect::<Vec<_>>(), "hole in the log");
    }
    Ok(())
}
