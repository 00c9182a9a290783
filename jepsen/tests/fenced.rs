//! Hand-built histories of the fenced-counter workload.

mod common;

use common::{explanation, parse, run, verdict};
use raftlock_jepsen::checker::fenced::{self, FencedViolation};
use raftlock_jepsen::{Verdict, Workload};

const FENCED: &str = "fenced";

fn violations(text: &str) -> Vec<FencedViolation> {
    fenced::check(&parse(text).operations().unwrap()).violations
}

/// Two holders in turn, one increment each, a stale holder rejected, an
/// increment with unknown outcome, and a final read.
const GOOD: &str = "
    0 1 invoke acquire k=l
    10 1 ok acquire k=l t=5
    11 1 invoke incr k=c t=5
    12 1 ok incr k=c t=5 1
    13 1 invoke release k=l
    14 1 ok release k=l
    20 2 invoke acquire k=l
    30 2 ok acquire k=l t=7
    31 2 invoke incr k=c t=7
    32 2 ok incr k=c t=7 2
    33 2 invoke incr k=c t=7
    34 2 info incr k=c t=7
    35 3 invoke incr k=c t=5       # a paused old holder wakes up
    36 3 fail incr k=c t=5         # and is fenced off
    40 4 invoke read k=c
    50 4 ok read k=c FINAL";

#[test]
fn valid_run_with_and_without_the_info_increment() {
    for final_value in ["2", "3"] {
        let r = run(Workload::Fenced, &GOOD.replace("FINAL", final_value));
        assert_eq!(
            verdict(&r, FENCED),
            Verdict::Valid,
            "{}",
            explanation(&r, FENCED)
        );
        assert_eq!(verdict(&r, "linearizable(mutex)"), Verdict::Valid);
    }
}

#[test]
fn lost_acknowledged_increment_is_rejected() {
    let r = run(Workload::Fenced, &GOOD.replace("FINAL", "1"));
    assert_eq!(verdict(&r, FENCED), Verdict::Invalid);
    assert!(explanation(&r, FENCED).contains("lost increment"));
}

#[test]
fn phantom_increment_is_rejected() {
    let r = run(Workload::Fenced, &GOOD.replace("FINAL", "4"));
    assert_eq!(verdict(&r, FENCED), Verdict::Invalid);
    assert!(explanation(&r, FENCED).contains("phantom increment"));
}

#[test]
fn out_of_order_token_accepted_is_rejected() {
    // Token 7 accepted first (value 1), then token 5 accepted (value 2).
    let v = violations(
        "0 1 invoke incr k=c t=7
         10 1 ok incr k=c t=7 1
         20 2 invoke incr k=c t=5
         30 2 ok incr k=c t=5 2
         40 3 invoke read k=c
         50 3 ok read k=c 2",
    );
    assert!(
        matches!(
            v.as_slice(),
            [FencedViolation::StaleTokenAccepted {
                token: 5,
                after_token: 7,
                ..
            }]
        ),
        "{v:?}"
    );
}

#[test]
fn accept_order_comes_from_the_reported_value_not_the_ack_order() {
    // Acks arrive out of order (token 7's ack first), but the values show
    // the store accepted 5 before 7: legal.
    let v = violations(
        "0 1 invoke incr k=c t=5
         1 2 invoke incr k=c t=7
         10 2 ok incr k=c t=7 2
         11 1 ok incr k=c t=5 1
         40 3 invoke read k=c
         50 3 ok read k=c 2",
    );
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn duplicate_acknowledged_value_is_a_lost_update() {
    let v = violations(
        "0 1 invoke incr k=c t=5
         1 2 invoke incr k=c t=6
         10 1 ok incr k=c t=5 1
         11 2 ok incr k=c t=6 1",
    );
    assert!(
        v.iter()
            .any(|x| matches!(x, FencedViolation::DuplicateAck { value: 1, .. })),
        "{v:?}"
    );
}

#[test]
fn grant_tokens_must_increase() {
    let v = violations(
        "0 1 invoke acquire k=l
         10 1 ok acquire k=l t=7
         11 1 invoke release k=l
         12 1 ok release k=l
         20 2 invoke acquire k=l
         30 2 ok acquire k=l t=5",
    );
    assert!(
        matches!(
            v.as_slice(),
            [FencedViolation::TokenNotIncreasing {
                earlier_token: 7,
                later_token: 5,
                ..
            }]
        ),
        "{v:?}"
    );
    let v = violations(
        "0 1 invoke acquire k=l
         10 1 ok acquire k=l t=7
         20 2 invoke acquire k=l
         30 2 ok acquire k=l t=7",
    );
    assert!(
        v.iter()
            .any(|x| matches!(x, FencedViolation::DuplicateToken { token: 7, .. })),
        "{v:?}"
    );
}

#[test]
fn grant_order_is_real_time_order_not_ack_order() {
    // 1's grant (token 5) is acknowledged late, after 2's grant (token 6)
    // was acknowledged; the grants overlap in real time, so no order is
    // implied. Re-acquire by the same holder may repeat its token.
    let v = violations(
        "0 1 invoke acquire k=l
         20 2 invoke acquire k=l
         30 2 ok acquire k=l t=6
         50 1 ok acquire k=l t=5
         60 2 invoke acquire k=l
         70 2 ok acquire k=l t=6",
    );
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn missing_data_is_unknown_not_valid() {
    // No read of the counter: lost increments cannot be ruled out.
    let r = run(
        Workload::Fenced,
        "0 1 invoke incr k=c t=5
         10 1 ok incr k=c t=5 1",
    );
    assert_eq!(verdict(&r, FENCED), Verdict::Unknown);
    // A grant without a token.
    let r = run(
        Workload::Fenced,
        "0 1 invoke acquire k=l\n10 1 ok acquire k=l",
    );
    assert_eq!(verdict(&r, FENCED), Verdict::Unknown);
}

#[test]
fn reads_concurrent_with_increments_get_bounds_not_exact_counts() {
    let v = violations(
        "0 1 invoke incr k=c t=5
         5 2 invoke read k=c
         10 1 ok incr k=c t=5 1
         15 2 ok read k=c 0",
    );
    assert!(v.is_empty(), "{v:?}");
}
