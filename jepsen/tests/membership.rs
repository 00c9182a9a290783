//! End to end: the `membership` nemesis (issue 12) adds spare members
//! with `raftlock serve --join` and removes voters (the leader too) while
//! the mutex and register workloads run; every run must be valid, and
//! changes must actually have happened (at least one completed add and
//! one completed removal), so a run cannot pass by doing nothing.
//!
//! `#[ignore]`d like `tests/cluster.rs` (they need the binaries built):
//! `jepsen/ci.sh` runs them with
//! `cargo test -p raftlock-jepsen --test membership -- --ignored --test-threads=1`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use raftlock_jepsen::control::default_raftlock_bin;
use raftlock_jepsen::nemesis::{Fault, Pacing};
use raftlock_jepsen::runner::{self, TestOptions, TestOutcome};
use raftlock_jepsen::{Verdict, Workload};

/// One cluster at a time: the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A run of `workload` for 20 s under `nemesis`, with faults paced faster
/// than the default so that a short run sees several changes: from three
/// members and two spares the first change is an add, and at most two adds
/// can follow before a removal must come.
fn run(workload: Workload, nemesis: &str, seed: u64) -> TestOutcome {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bin = default_raftlock_bin();
    assert!(
        bin.is_file(),
        "{} is missing: build it first with `cargo build -p raftlock-cli` (jepsen/ci.sh does)",
        bin.display()
    );
    let mut opts = TestOptions::new(workload);
    opts.raftlock_bin = bin;
    opts.faults = Fault::parse_list(nemesis).unwrap();
    opts.time_limit = Duration::from_secs(20);
    opts.concurrency = 8;
    opts.seed = seed;
    opts.store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jepsen-store");
    opts.pacing = Pacing {
        first: (Duration::from_millis(500), Duration::from_millis(1_000)),
        between: (Duration::from_millis(500), Duration::from_millis(1_500)),
        hold: (Duration::from_millis(1_000), Duration::from_millis(2_500)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime
        .block_on(runner::run(&opts))
        .unwrap_or_else(|e| panic!("{} failed to run: {e:#}", opts.replay_command()));
    println!("{}", outcome.summary);
    outcome
}

/// Valid, with ops.
fn assert_valid(outcome: &TestOutcome) {
    assert_eq!(
        outcome.verdict,
        Verdict::Valid,
        "expected a valid run:\n{}",
        outcome.summary
    );
    assert!(outcome.operations > 50, "too few ops:\n{}", outcome.summary);
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
