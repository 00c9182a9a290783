//! `zk-mutex` end to end: ZooKeeper's lock recipe through the ZooKeeper
//! doors of real `raftlock serve` members, with raftlock's ZooKeeper
//! client, under faults; the lock node's czxid fences the counter.
//!
//! `#[ignore]`d like tests/cluster.rs (they need target/debug/raftlock);
//! jepsen/ci.sh builds it and runs
//! `cargo test -p raftlock-jepsen --test zk_mutex -- --ignored --test-threads=1`.
//!
//! - under every fault (`all`) for 15 s the run must be valid, with
//!   grants and increments through the doors;
//! - under the disk faults (`disk`), which need `raftlock-jepsen member`
//!   processes, the same: the members serve the doors too;
//! - with the injected client bug (a waiter that takes its predecessor's
//!   deletion for the lock without listing again) the mutex checker must
//!   find two holders at once.

mod process;

use std::path::PathBuf;
use std::time::Duration;

use raftlock_jepsen::control::default_raftlock_bin;
use raftlock_jepsen::runner::TestOutcome;
use raftlock_jepsen::{Verdict, Workload};

use process::binary;

fn run(
    nemesis: &str,
    seed: u64,
    tune: impl FnOnce(&mut raftlock_jepsen::runner::TestOptions),
) -> TestOutcome {
    let _one = process::one_at_a_time();
    let mut opts = process::options(Workload::ZkMutex, nemesis, seed, Duration::from_secs(15));
    opts.raftlock_bin = binary(default_raftlock_bin(), "cargo build -p raftlock-cli");
    opts.member_bin = PathBuf::from(env!("CARGO_BIN_EXE_raftlock-jepsen"));
    tune(&mut opts);
    process::run(&opts)
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn zk_mutex_under_all_faults_is_valid() {
    let outcome = run("all", 61, |_| {});
    process::assert_valid(&outcome);
    assert!(
        outcome.faults >= 1,
        "no fault injected:\n{}",
        outcome.summary
    );
    for needle in ["fenced", "linearizable(mutex)", "final counter"] {
        assert!(
            outcome.summary.contains(needle),
            "{needle}:\n{}",
            outcome.summary
        );
    }
}

/// The disk faults run on `raftlock-jepsen member` processes: their
/// doors must serve the recipe through full disks and slow syncs.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn zk_mutex_under_disk_faults_is_valid() {
    let outcome = run("disk", 63, |_| {});
    process::assert_valid(&outcome);
    assert!(
        outcome.summary.contains("disk-full") || outcome.summary.contains("slow-fsync"),
        "no disk fault injected:\n{}",
        outcome.summary
    );
    let fenced = outcome
        .results
        .iter()
        .find(|r| r.checker == "fenced")
        .unwrap_or_else(|| panic!("no fenced check:\n{}", outcome.summary));
    let grants = fenced.details["grants"].as_u64().unwrap_or(0);
    assert!(
        grants >= 1,
        "no grant through the members' doors:\n{}",
        outcome.summary
    );
}

/// Without the re-listing, a waiter whose predecessor withdrew (its wait
/// ran out) holds beside the real holder. Holds of up to 300 ms and
/// waits of 300 ms make withdrawals common on any machine (the queue moves
/// at the pace of the holds' sleeps, not of the CPU); no faults are needed.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn zk_mutex_without_relisting_is_caught() {
    let outcome = run("none", 62, |o| {
        o.time_limit = Duration::from_secs(10);
        o.settings.inject_zk_no_relist = true;
        o.settings.max_wait_ms = 300;
        o.settings.max_hold_ms = 300;
    });
    assert_eq!(
        outcome.verdict,
        Verdict::Invalid,
        "the injected bug was not caught:\n{}",
        outcome.summary
    );
    assert!(
        outcome.summary.contains("linearizable(mutex)") && outcome.summary.contains("INVALID"),
        "{}",
        outcome.summary
    );
}
