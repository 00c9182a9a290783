//! Sanity check of search cost on a realistic history size. Asserts only
//! the verdict; the time is printed (run with `--nocapture` to see it).

mod common;

use common::simulate_register;
use raftlock_jepsen::checker::linear::{self, LinearConfig};
use raftlock_jepsen::model::RegisterModel;
use raftlock_jepsen::Verdict;
use std::time::Instant;

fn timed(label: &str, keys: u64) {
    let h = simulate_register(42, 10, 10_000, keys, 1);
    let ops = h.operations().unwrap();
    assert_eq!(ops.len(), 10_000);
    let config = LinearConfig {
        max_steps: 50_000_000,
        time_limit: None,
    };
    let started = Instant::now();
    let report = linear::check(&RegisterModel, &ops, &config);
    println!(
        "{label}: 10000 ops, 10 processes, {keys} key(s): {:?} in {:?}, {} steps",
        report.verdict,
        started.elapsed(),
        report.steps()
    );
    assert_eq!(report.verdict, Verdict::Valid);
}

#[test]
fn ten_thousand_ops_one_key() {
    timed("single key", 1);
}

#[test]
fn ten_thousand_ops_ten_keys() {
    timed("partitioned", 10);
}
