//! End to end: the `membership` nemesis adds spare members
//! with `raftlock serve --join` and removes voters (the leader too) while
//! the mutex and register workloads run; every run must be valid, and
//! changes must actually have happened (at least one completed add and
//! one completed removal), so a run cannot pass by doing nothing.
//!
//! `#[ignore]`d like `tests/cluster.rs` (they need the binaries built):
//! `jepsen/ci.sh` runs them with
//! `cargo test -p raftlock-jepsen --test membership -- --ignored --test-threads=1`.

mod process;

use std::time::Duration;

use raftlock_jepsen::control::default_raftlock_bin;
use raftlock_jepsen::runner::TestOutcome;
use raftlock_jepsen::Workload;

use process::assert_valid;

/// A run of `workload` for 20 s under `nemesis`, with faults paced faster
/// than the default so that a short run sees several changes: from three
/// members and two spares the first change is an add, and at most two adds
/// can follow before a removal must come.
fn run(workload: Workload, nemesis: &str, seed: u64) -> TestOutcome {
    let _one = process::one_at_a_time();
    let mut opts = process::options(workload, nemesis, seed, Duration::from_secs(20));
    opts.raftlock_bin = process::binary(default_raftlock_bin(), "cargo build -p raftlock-cli");
    opts.pacing =
        process::fast_pacing((Duration::from_millis(1_000), Duration::from_millis(2_500)));
    process::run(&opts)
}

/// Valid, with ops, and with completed adds and removals.
fn assert_valid_with_changes(outcome: &TestOutcome) {
    assert_valid(outcome);
    let (adds, removes, failed) = outcome.membership;
    assert!(
        adds > 0 && removes > 0,
        "the nemesis must have added and removed members ({adds} adds, {removes} removes, \
         {failed} failed):\n{}",
        outcome.summary
    );
    for needle in ["  membership add n", "  membership remove n"] {
        assert!(
            outcome.summary.contains(needle),
            "no {needle:?} fault in the summary:\n{}",
            outcome.summary
        );
    }
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn mutex_under_membership_changes_is_valid() {
    assert_valid_with_changes(&run(Workload::Mutex, "membership", 41));
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn register_under_membership_changes_is_valid() {
    assert_valid_with_changes(&run(Workload::Register, "membership", 42));
}

/// Membership changes between kills, pauses and partitions (which then
/// hit members that joined at run time too).
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn mutex_under_membership_and_process_faults_is_valid() {
    let outcome = run(Workload::Mutex, "membership,kill,pause,partition", 43);
    assert_valid(&outcome);
    assert!(
        outcome.membership.0 + outcome.membership.1 > 0,
        "no membership change completed:\n{}",
        outcome.summary
    );
}
