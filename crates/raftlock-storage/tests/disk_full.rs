//! A real full file system, not an injected error: the log store on a
//! 4 MiB tmpfs is written until the file system is full, and the failure
//! must come back as "out of space" and be final (the durable index fails
//! and stays failed). The node tests inject `ENOSPC` at the barrier
//! instead (`Node::fail_log_sync_out_of_space`); this checks that a real
//! `ENOSPC` from sled reaches that same path.
//!
//! Mounting needs root and a private mount namespace (`unshare -m`), which
//! CI may not grant, so the test is ignored by default and run by name:
//! `cargo test -p raftlock-storage --test disk_full -- --ignored`. When it
//! cannot mount it fails and says so; it never passes without running.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{put_entry, Store};
use openraft::storage::RaftLogStorageExt;
use raftlock_storage::SledLogConfig;

/// Set in the child process that runs inside the private mount namespace.
const IN_NAMESPACE: &str = "RAFTLOCK_DISK_FULL_CHILD";
const TEST_NAME: &str = "a_real_full_file_system_fails_the_log_for_good";

#[tokio::test]
#[ignore = "needs root and `unshare -m`: cargo test -p raftlock-storage --test disk_full -- --ignored"]
async fn a_real_full_file_system_fails_the_log_for_good() {
    if std::env::var_os(IN_NAMESPACE).is_some() {
        fill_the_disk().await;
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private"])
        .arg(exe)
        .args(["--exact", TEST_NAME, "--ignored", "--nocapture"])
        .env(IN_NAMESPACE, "1")
        .output()
        .expect("cannot run `unshare` (util-linux): this test needs it");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the tmpfs run failed (it needs root and mount namespaces):\n{stdout}\n{stderr}"
    );
}

/// Runs inside the private mount namespace.
async fn fill_the_disk() {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(dir.path())
        .status()
        .expect("run mount");
    assert!(
        mounted.success(),
        "cannot mount a tmpfs on {}",
        dir.path().display()
    );

    let config = SledLogConfig::new(dir.path().join("log")).with_deferred_durability(true);
    let mut store = Store::open(&config).expect("open on the empty tmpfs");
    let durable = store.durable_index();
    // 64 KiB entries: 4 MiB fills within about 64 of them, plus sled's
    // segment overhead; 1,000 is far past it.
    let mut failure = None;
    for index in 1..=1_000 {
        if let Err(e) = store
            .blocking_append([put_entry(1, index, 64 * 1024)])
            .await
        {
            failure = Some(format!("append {index}: {e}"));
            break;
        }
        let waited = tokio::time::timeout(Duration::from_secs(10), durable.wait_for(index))
            .await
            .expect("a barrier answered in time");
        if let Err(e) = waited {
            failure = Some(format!("barrier after {index}: {e}"));
            break;
        }
    }
    let failure = failure.expect("1,000 entries of 64 KiB fit on a 4 MiB tmpfs");
    let err = durable
        .current()
        .expect_err("the durable index must fail with the file system full");
    assert!(
        err.is_out_of_space(),
        "{failure}: not named out of space: {err}"
    );
    eprintln!("the file system filled up: {failure}");
    // Final: later writes fail too, even a small one.
    let later = store.blocking_append([put_entry(1, 5_000, 16)]).await;
    let waited = tokio::time::timeout(Duration::from_secs(10), durable.wait_for(5_000)).await;
    assert!(
        later.is_err() || waited.is_ok_and(|w| w.is_err()),
        "a write after the disk filled was reported durable"
    );
    drop(store);
    let _ = Command::new("umount").arg(dir.path()).status();
}
