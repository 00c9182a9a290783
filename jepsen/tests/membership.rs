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

use raftlock_jepsen::control::{default_member_bin, default_raftlock_bin};
use raftlock_jepsen::nemesis::{schedule, Fault};
use raftlock_jepsen::runner::TestOutcome;
use raftlock_jepsen::Workload;

use process::assert_valid;

/// Seed and length of the re-add run (see its test).
const READD_SEED: u64 = 44;
const READD_TIME: Duration = Duration::from_secs(30);

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

/// A member removed and then added back, under the disk nemeses: with a
/// disk fault in the run every member is a `raftlock-jepsen member`
/// process (the fault hooks live there), so the re-added member must join
/// as one too (`raftlock-jepsen member --join`, an empty data directory)
/// and carry the hooks like the others. Four founders and no spare ids:
/// the first change can only be a removal, and the next one only the
/// add of the removed id, so a short run re-adds. With root, `disk-fill`
/// is in the mix too (every data directory on a tmpfs: the re-added
/// member's is emptied, ballast and all, between its two lives).
#[test]
#[ignore = "needs target/debug/raftlock and raftlock-jepsen: run jepsen/ci.sh"]
fn mutex_with_a_member_re_added_under_disk_faults_is_valid() {
    let _one = process::one_at_a_time();
    for bin in [default_raftlock_bin(), default_member_bin()] {
        process::binary(bin, "cargo build -p raftlock-cli -p raftlock-jepsen");
    }
    let nemesis = if process::is_root() {
        "membership,disk,disk-fill"
    } else {
        "membership,disk"
    };
    let mut opts = process::options(Workload::Mutex, nemesis, READD_SEED, READD_TIME);
    opts.nodes = 4;
    opts.spares = 0;
    opts.pacing =
        process::fast_pacing((Duration::from_millis(1_000), Duration::from_millis(2_000)));
    // The seed plans enough changes in the first half of the run (a
    // change takes longer than its planned hold) for a removal and an add.
    let mut at = Duration::ZERO;
    let mut changes = 0;
    for step in schedule(&opts.faults, opts.seed, &opts.pacing, READD_TIME) {
        at += step.wait;
        if at < READD_TIME / 2 && step.fault == Fault::Membership {
            changes += 1;
        }
        at += step.hold;
    }
    assert!(
        changes >= 2,
        "seed {READD_SEED} plans {changes} membership changes in the first half"
    );
    let outcome = process::run(&opts);
    assert_valid(&outcome);
    let (adds, removes, failed) = outcome.membership;
    assert!(
        adds >= 1 && removes >= 1 && failed == 0,
        "a member must have been removed and added back ({adds} adds, {removes} removes, \
         {failed} failed):\n{}",
        outcome.summary
    );
}
