//! What the process tests (`cluster.rs`, `membership.rs`, `disk.rs`)
//! share: one cluster at a time, the options of a short run, running it
//! on a small runtime, and what every valid run must show.
//!
//! Each test binary declares `mod process;` and uses what it needs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use raftlock_jepsen::nemesis::{Fault, Pacing};
use raftlock_jepsen::runner::{self, TestOptions, TestOutcome};
use raftlock_jepsen::{Verdict, Workload};

/// One cluster at a time: the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held while a test runs a cluster (a failed test does not poison it).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the runs' reports go: under the test target's tmp dir.
pub fn store() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jepsen-store")
}

/// True when running as root (mounting a tmpfs needs it).
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `path`, which must exist: a missing binary is a failure, not a skip.
pub fn binary(path: PathBuf, build: &str) -> PathBuf {
    assert!(
        path.is_file(),
        "{} is missing: build it first with `{build}` (jepsen/ci.sh does)",
        path.display()
    );
    path
}

/// A run of `workload` under `nemesis` for `time_limit`, 8 clients,
/// `seed`, reports in [`store`]; the rest as `TestOptions::new`.
pub fn options(workload: Workload, nemesis: &str, seed: u64, time_limit: Duration) -> TestOptions {
    let mut opts = TestOptions::new(workload);
    opts.faults = Fault::parse_list(nemesis).unwrap();
    opts.time_limit = time_limit;
    opts.concurrency = 8;
    opts.seed = seed;
    opts.store = store();
    opts
}

/// Faults paced fast enough that a 20 s run sees several, each held for
/// `hold` (a range).
pub fn fast_pacing(hold: (Duration, Duration)) -> Pacing {
    Pacing {
        first: (Duration::from_millis(500), Duration::from_millis(1_000)),
        between: (Duration::from_millis(500), Duration::from_millis(1_500)),
        hold,
    }
}

/// Runs `opts` on a two-worker runtime and prints the summary; a run that
/// could not be carried out panics with its replay command.
pub fn run(opts: &TestOptions) -> TestOutcome {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime
        .block_on(runner::run(opts))
        .unwrap_or_else(|e| panic!("{} failed to run: {e:#}", opts.replay_command()));
    println!("{}", outcome.summary);
    outcome
}

/// Valid, with ops.
pub fn assert_valid(outcome: &TestOutcome) {
    assert_eq!(
        outcome.verdict,
        Verdict::Valid,
        "expected a valid run:\n{}",
        outcome.summary
    );
    assert!(outcome.operations > 50, "too few ops:\n{}", outcome.summary);
}
