//! End to end: real `raftlock` processes, real faults, real verdicts.
//!
//! These tests need the binaries built first, so they are `#[ignore]`d
//! for a plain `cargo test --workspace` and run by `jepsen/ci.sh`, which
//! builds them and then runs
//! `cargo test -p raftlock-jepsen --test cluster -- --ignored --test-threads=1`.
//! A missing binary is a failure, not a skip.
//!
//! - each workload under mixed faults for ~15 s must be valid (clients
//!   stick to one member, the default);
//! - the lock workloads under `isolate-leader` (the leader's Raft links
//!   cut while its clients keep using it) must be valid, with
//!   sticky HTTP clients and with clients embedded in the members
//!   (`raftlock-jepsen member`);
//! - `rwlock` under every fault (`all`) must be valid, and with its
//!   injected client bug (write holds taken in read mode) invalid;
//! - `semaphore` likewise, its bug: odd clients on a second semaphore;
//! - `lock-delay` (mutex with a 1 s lock-delay) under client pauses and
//!   leader faults must be valid, with at least one holder's loss whose
//!   delay was checked, and with its injected client bug (no delay asked
//!   for) invalid;
//! - `multilock` under `all` must be valid, and with its injected client
//!   bug (transfers that lock only one of their two accounts) invalid;
//! - `rwlock`, `semaphore`, `lock-delay` and `multilock` with clients
//!   embedded in the members (`raftlock-jepsen member`, its control
//!   endpoint) under kills, pauses and partitions must be valid, with
//!   grants, and the rwlock bug must be caught there too;
//! - the injected-bug build (linearizable reads without a read index,
//!   `target/injected/debug/raftlock`) must be caught by the register
//!   workload with the leader-isolating partition, within 2 × 20 s.

mod process;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use raftlock_jepsen::control::default_raftlock_bin;
use raftlock_jepsen::control::setup::workspace_root;
use raftlock_jepsen::runner::{TestOptions, TestOutcome};
use raftlock_jepsen::workload::route::Routing;
use raftlock_jepsen::{Verdict, Workload};

use process::{binary, store};

fn run(workload: Workload, nemesis: &str, seed: u64) -> TestOutcome {
    run_with(workload, Routing::default(), nemesis, seed)
}

fn run_with(workload: Workload, clients: Routing, nemesis: &str, seed: u64) -> TestOutcome {
    run_tuned(workload, clients, nemesis, seed, |_| {})
}

/// [`run_with`], with `tune` applied to the options last.
fn run_tuned(
    workload: Workload,
    clients: Routing,
    nemesis: &str,
    seed: u64,
    tune: impl FnOnce(&mut TestOptions),
) -> TestOutcome {
    let _one = process::one_at_a_time();
    let mut opts = process::options(workload, nemesis, seed, Duration::from_secs(15));
    opts.raftlock_bin = binary(default_raftlock_bin(), "cargo build -p raftlock-cli");
    opts.clients = clients;
    opts.member_bin = PathBuf::from(env!("CARGO_BIN_EXE_raftlock-jepsen"));
    tune(&mut opts);
    process::run(&opts)
}

/// Valid, with ops, and with a fault injected.
fn assert_valid(outcome: &TestOutcome) {
    process::assert_valid(outcome);
    assert!(
        outcome.faults >= 1,
        "no fault injected:\n{}",
        outcome.summary
    );
}

/// A run with an injected `bug`: invalid, and `checker` says so.
fn assert_caught(outcome: &TestOutcome, checker: &str, bug: &str) {
    assert_eq!(
        outcome.verdict,
        Verdict::Invalid,
        "the injected {bug} bug was not caught:\n{}",
        outcome.summary
    );
    assert!(
        outcome.summary.contains(checker) && outcome.summary.contains("INVALID"),
        "{}",
        outcome.summary
    );
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn mutex_under_mixed_faults_is_valid() {
    assert_valid(&run(
        Workload::Mutex,
        "partition,kill,pause,client-pause",
        11,
    ));
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn fenced_under_mixed_faults_is_valid() {
    let outcome = run(Workload::Fenced, "client-pause,partition,kill,pause", 12);
    assert_valid(&outcome);
    assert!(outcome.summary.contains("fenced"), "{}", outcome.summary);
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn register_under_mixed_faults_is_valid() {
    assert_valid(&run(Workload::Register, "partition,kill,pause,delay", 13));
}

/// Read-write locks under every fault the harness has (membership
/// changes and the isolated leader too), 15 s: no writer ever shares.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn rwlock_under_all_faults_is_valid() {
    let outcome = run(Workload::RwLock, "all", 14);
    assert_valid(&outcome);
    assert!(
        outcome.summary.contains("rwlock-exclusion"),
        "{}",
        outcome.summary
    );
}

/// The rwlock checker's self-test on a real cluster: clients that take
/// write holds in read mode (the injected client bug) must be caught,
/// under the same faults, in 10 s.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn rwlock_writers_in_read_mode_are_caught() {
    let outcome = run_tuned(Workload::RwLock, Routing::default(), "all", 15, |o| {
        o.time_limit = Duration::from_secs(10);
        o.settings.inject_rw_read_for_write = true;
    });
    assert_caught(&outcome, "rwlock-exclusion", "shared-writer");
}

/// Semaphores (limit 3, 8 clients) under every fault, 15 s: never more
/// than 3 holders.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn semaphore_under_all_faults_is_valid() {
    let outcome = run(Workload::Semaphore, "all", 16);
    assert_valid(&outcome);
    assert!(
        outcome.summary.contains("semaphore-limit"),
        "{}",
        outcome.summary
    );
}

/// The semaphore checker's self-test on a real cluster: odd clients use
/// a second semaphore by mistake (the injected client bug), so up to 6
/// hold "the" semaphore of 3; it must be caught, under the same faults,
/// in 10 s.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn semaphore_clients_on_the_wrong_name_are_caught() {
    let outcome = run_tuned(Workload::Semaphore, Routing::default(), "all", 17, |o| {
        o.time_limit = Duration::from_secs(10);
        o.settings.inject_sem_wrong_name = true;
    });
    assert_caught(&outcome, "semaphore-limit", "wrong-name");
}

/// Locks with a 1 s lock-delay under client pauses, leader kills and
/// leader partitions, 20 s: client pauses and partitions make holders
/// lose their sessions, and no one may be granted the lock within the
/// delay after such a loss (docs/api.md, "Lock-delay").
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn lock_delay_under_mixed_faults_is_valid() {
    let outcome = run_tuned(
        Workload::LockDelay,
        Routing::default(),
        "client-pause,kill-leader,partition-leader",
        18,
        |o| o.time_limit = Duration::from_secs(20),
    );
    assert_valid(&outcome);
    let delay = outcome
        .results
        .iter()
        .find(|r| r.checker == "lock-delay")
        .unwrap_or_else(|| panic!("no lock-delay checker:\n{}", outcome.summary));
    let losses = delay.details["held_losses"].as_u64().unwrap_or(0);
    assert!(
        losses >= 1,
        "no holder lost its session, so no delay was checked:\n{}",
        outcome.summary
    );
}

/// The lock-delay checker's self-test on a real cluster: clients that
/// record a 1 s delay but ask for none (the injected client bug) get the
/// lock handed on right after a holder's loss; it must be caught.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn lock_delay_not_asked_for_is_caught() {
    let outcome = run_tuned(
        Workload::LockDelay,
        Routing::default(),
        "client-pause,kill-leader,partition-leader",
        18,
        |o| {
            o.time_limit = Duration::from_secs(20);
            o.settings.inject_no_lock_delay = true;
        },
    );
    assert_caught(&outcome, "lock-delay", "no-delay");
}

/// Transfers between accounts under multi-locks, under every fault, 15 s:
/// every read of all the balances sums to the total, and no account's
/// lock has two holders.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn multilock_under_all_faults_is_valid() {
    let outcome = run(Workload::MultiLock, "all", 19);
    assert_valid(&outcome);
    assert!(
        outcome.summary.contains("multilock-conservation"),
        "{}",
        outcome.summary
    );
}

/// The multilock checker's self-test on a real cluster: odd clients lock
/// only the account they take from (the injected client bug) and write
/// the other unguarded; it must be caught, under the same faults, in 10 s.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn multilock_transfers_under_one_lock_are_caught() {
    let outcome = run_tuned(Workload::MultiLock, Routing::default(), "all", 20, |o| {
        o.time_limit = Duration::from_secs(10);
        o.settings.inject_multi_one_lock = true;
    });
    assert_caught(&outcome, "multilock-conservation", "one-lock transfer");
}

/// Acquires answered `ok` in the run's history: a run whose clients
/// could not reach their primitive has none, and proves nothing.
fn ok_acquires(outcome: &TestOutcome) -> usize {
    let history = std::fs::read_to_string(outcome.dir.join("history.jsonl")).unwrap_or_default();
    history
        .lines()
        .filter(|l| l.contains("\"type\":\"ok\"") && l.contains("\"f\":\"acquire\""))
        .count()
}

/// The primitives with clients embedded in the members' processes: each
/// goes through the embedded client's own code for it (the control
/// endpoint, `jepsen/src/member/control/`), not the HTTP API.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn primitives_with_embedded_clients_are_valid() {
    let workloads = [
        (Workload::RwLock, 41),
        (Workload::Semaphore, 42),
        (Workload::LockDelay, 43),
        (Workload::MultiLock, 44),
    ];
    for (workload, seed) in workloads {
        let outcome = run_tuned(
            workload,
            Routing::Embedded,
            "kill,pause,partition",
            seed,
            |o| o.time_limit = Duration::from_secs(10),
        );
        assert_valid(&outcome);
        assert!(
            ok_acquires(&outcome) >= 10,
            "{workload:?}: too few grants through the embedded clients:\n{}",
            outcome.summary
        );
    }
}

/// The rwlock checker sees the embedded clients' holds: its injected bug
/// is caught through them as through HTTP.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn rwlock_writers_in_read_mode_are_caught_with_embedded_clients() {
    let outcome = run_tuned(Workload::RwLock, Routing::Embedded, "kill,pause", 45, |o| {
        o.time_limit = Duration::from_secs(10);
        o.settings.inject_rw_read_for_write = true;
    });
    assert_caught(&outcome, "rwlock-exclusion", "read-mode writer");
}

/// A run under `isolate-leader` must be valid, with the fault injected
/// (the isolated-leader regression's shape at random: a client on the leader holds the lock
/// while the leader is cut off; it must observe its loss before the
/// majority grants the lock to someone else).
fn assert_isolated_leader_run_is_valid(workload: Workload, clients: Routing, seed: u64) {
    let outcome = run_with(workload, clients, "isolate-leader", seed);
    assert_valid(&outcome);
    let mode = format!("{clients} clients");
    for needle in ["  isolate-leader n", mode.as_str()] {
        assert!(outcome.summary.contains(needle), "{}", outcome.summary);
    }
}

#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn mutex_with_sticky_clients_under_isolate_leader_is_valid() {
    assert_isolated_leader_run_is_valid(Workload::Mutex, Routing::Sticky, 31);
}

/// The same with clients embedded in the members' processes, and fencing.
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn fenced_with_embedded_clients_under_isolate_leader_is_valid() {
    assert_isolated_leader_run_is_valid(Workload::Fenced, Routing::Embedded, 32);
}

/// Through the CLI, so its exit code is checked too: 1 = invalid.
#[test]
#[ignore = "needs target/injected/debug/raftlock: run jepsen/ci.sh"]
fn stale_reads_of_the_injected_build_are_caught() {
    let _one = process::one_at_a_time();
    let injected = std::env::var_os("RAFTLOCK_INJECTED_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/injected/debug/raftlock"));
    let injected = binary(
        injected,
        "cargo build -p raftlock-cli --features raftlock-node/inject-stale-reads \
         --target-dir target/injected",
    );
    let mut outputs = Vec::new();
    // Two bounded tries (each 20 s of faults); one must find the bug.
    for seed in [21, 22] {
        let out = Command::new(env!("CARGO_BIN_EXE_raftlock-jepsen"))
            .args([
                "test",
                "--workload",
                "register",
                "--nemesis",
                "partition-leader",
            ])
            .args(["--time-limit", "20", "--concurrency", "10"])
            .args(["--seed", &seed.to_string()])
            .arg("--raftlock-bin")
            .arg(&injected)
            .arg("--store")
            .arg(store())
            .output()
            .expect("run raftlock-jepsen");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        println!("{stdout}");
        match out.status.code() {
            Some(1) => {
                assert!(stdout.contains("verdict: INVALID"), "{stdout}");
                assert!(
                    stdout.contains("linearizable(register)   INVALID"),
                    "the linearizability checker should be the one to object:\n{stdout}"
                );
                return;
            }
            Some(0) | Some(3) => outputs.push(stdout),
            other => panic!(
                "raftlock-jepsen failed ({other:?}):\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    panic!(
        "the injected stale-read bug was not caught in two runs:\n{}",
        outputs.join("\n")
    );
}
