//! Hand-built histories of the lock-delay workload (delay 1000 ms): a
//! holder's loss must keep every other grant 1 s away.

mod common;

use common::{explanation, run, verdict};
use raftlock_jepsen::{Verdict, Workload};

const CHECKER: &str = "lock-delay";

/// Process 1 holds from 2 ms and loses its session at 10 ms (recorded by
/// its next process, 3); process 2's acquire completes at GRANT.
fn history(grant_ns: u64, released: bool) -> String {
    let release = if released {
        "9000000 1 invoke release k=l\n"
    } else {
        ""
    };
    format!(
        r#"
        1000000 1 invoke acquire k=l {{"lock_delay_ms":1000}}
        2000000 1 ok acquire k=l t=5
        {release}
        3000000 2 invoke acquire k=l {{"lock_delay_ms":1000}}
        10000000 3 invoke lost k=l 1
        10000000 3 ok lost k=l 1
        {grant_ns} 2 ok acquire k=l t=7"#
    )
}

#[test]
fn a_grant_after_the_delay_is_valid() {
    let r = run(Workload::LockDelay, &history(1_020_000_000, false));
    assert_eq!(verdict(&r, CHECKER), Verdict::Valid, "{r:#?}");
    assert_eq!(verdict(&r, "linearizable"), Verdict::Valid);
}

#[test]
fn a_grant_inside_the_delay_is_invalid() {
    let r = run(Workload::LockDelay, &history(500_000_000, false));
    assert_eq!(verdict(&r, CHECKER), Verdict::Invalid, "{r:#?}");
    assert!(explanation(&r, CHECKER).contains("inside the delay"));
    // The mutex alone cannot see it: the holds do not overlap.
    assert_eq!(verdict(&r, "linearizable"), Verdict::Valid);
}

#[test]
fn a_release_may_hand_on_at_once() {
    // The release was invoked (its outcome unknown here): the lock may
    // have been freed without a delay.
    let r = run(Workload::LockDelay, &history(500_000_000, true));
    assert_eq!(verdict(&r, CHECKER), Verdict::Valid, "{r:#?}");
}

#[test]
fn the_workload_is_detected() {
    let h = common::parse(&history(1_020_000_000, false));
    assert_eq!(
        Workload::detect(&h.operations().unwrap()),
        Workload::LockDelay
    );
}
