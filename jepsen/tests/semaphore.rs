//! Hand-built histories of the semaphore workload (limit 2).

mod common;

use common::{explanation, run, verdict};
use raftlock_jepsen::{Verdict, Workload};

const SEM: &str = "semaphore-limit";

/// Two holders at once, a third granted only after one released, a
/// fourth after a holder's loss.
const GOOD: &str = r#"
    0 1 invoke acquire k=s 2
    10 1 ok acquire k=s t=3
    1 2 invoke acquire k=s 2
    11 2 ok acquire k=s t=4
    5 3 invoke acquire k=s 2
    20 1 invoke release k=s
    21 1 ok release k=s
    30 3 ok acquire k=s t=5
    35 4 invoke acquire k=s 2
    40 5 invoke lost k=s 2
    40 5 ok lost k=s 2
    50 4 ok acquire k=s t=6
    60 3 invoke release k=s
    61 3 ok release k=s"#;

#[test]
fn at_most_the_limit_at_once_is_valid() {
    let r = run(Workload::Semaphore, GOOD);
    assert_eq!(verdict(&r, SEM), Verdict::Valid, "{}", explanation(&r, SEM));
}

#[test]
fn a_third_holder_at_once_is_rejected() {
    // The third grant comes before the first holder released.
    let r = run(Workload::Semaphore, &GOOD.replace("30 3 ok", "15 3 ok"));
    assert_eq!(verdict(&r, SEM), Verdict::Invalid);
    assert!(explanation(&r, SEM).contains("3 holders at once, limit 2"));
}

#[test]
fn a_later_grant_with_a_lower_token_is_rejected() {
    let r = run(Workload::Semaphore, &GOOD.replace("t=6", "t=2"));
    assert_eq!(verdict(&r, SEM), Verdict::Invalid);
    assert!(explanation(&r, SEM).contains("token"));
}

#[test]
fn the_workload_is_detected_from_the_limit() {
    let h = common::parse(GOOD);
    assert_eq!(
        Workload::detect(&h.operations().unwrap()),
        Workload::Semaphore
    );
}
