//! Hand-built histories of the read-write lock workload.

mod common;

use common::{explanation, run, verdict};
use raftlock_jepsen::{Verdict, Workload};

const RW: &str = "rwlock-exclusion";

/// Two readers together, then a writer alone, then a reader whose
/// predecessor's session was lost (ended at the loss, not at a release).
const GOOD: &str = r#"
    0 1 invoke acquire k=l "read"
    10 1 ok acquire k=l t=3
    1 2 invoke acquire k=l "read"
    11 2 ok acquire k=l t=4
    5 3 invoke acquire k=l "write"
    20 1 invoke release k=l
    21 1 ok release k=l
    22 2 invoke release k=l
    23 2 ok release k=l
    30 3 ok acquire k=l t=5
    35 4 invoke acquire k=l "read"
    40 5 invoke lost k=l 3
    40 5 ok lost k=l 3
    50 4 ok acquire k=l t=6
    60 4 invoke release k=l
    61 4 ok release k=l"#;

#[test]
fn readers_together_and_a_writer_alone_are_valid() {
    let r = run(Workload::RwLock, GOOD);
    assert_eq!(verdict(&r, RW), Verdict::Valid, "{}", explanation(&r, RW));
}

#[test]
fn a_writer_with_a_reader_is_rejected() {
    // The writer's grant comes while reader 2 still holds.
    let r = run(Workload::RwLock, &GOOD.replace("30 3 ok", "15 3 ok"));
    assert_eq!(verdict(&r, RW), Verdict::Invalid);
    assert!(explanation(&r, RW).contains("writer #"));
}

#[test]
fn a_hold_past_the_loss_of_the_writer_is_rejected() {
    // Without the loss the writer holds to the end of the history.
    let text: String = GOOD
        .lines()
        .filter(|l| !l.contains(" lost "))
        .collect::<Vec<_>>()
        .join("\n");
    let r = run(Workload::RwLock, &text);
    assert_eq!(verdict(&r, RW), Verdict::Invalid);
}

#[test]
fn a_grant_after_the_loss_is_no_hold() {
    // Writer 3's grant arrives after its client observed the loss.
    let r = run(
        Workload::RwLock,
        &GOOD.replace("40 5 invoke lost", "25 5 invoke lost"),
    );
    assert_eq!(verdict(&r, RW), Verdict::Valid, "{}", explanation(&r, RW));
    // Reader 4 granted while the writer (not yet lost) holds: invalid.
    let r = run(
        Workload::RwLock,
        &GOOD.replace("50 4 ok acquire k=l t=6", "38 4 ok acquire k=l t=6"),
    );
    assert_eq!(verdict(&r, RW), Verdict::Invalid);
}

#[test]
fn a_later_grant_with_a_lower_token_is_rejected() {
    let r = run(Workload::RwLock, &GOOD.replace("t=6", "t=2"));
    assert_eq!(verdict(&r, RW), Verdict::Invalid);
    assert!(explanation(&r, RW).contains("token"));
}

#[test]
fn the_workload_is_detected_from_the_modes() {
    let h = common::parse(GOOD);
    assert_eq!(Workload::detect(&h.operations().unwrap()), Workload::RwLock);
}
