//! Hand-built register histories: known-bad ones must be rejected, legal
//! ones (including concurrency and uncertain ops) accepted.

mod common;

use common::{explanation, parse, run, verdict};
use raftlock_jepsen::checker::linear::{self, LinearConfig};
use raftlock_jepsen::model::RegisterModel;
use raftlock_jepsen::{Verdict, Workload};

const LIN: &str = "linearizable";
const LOST: &str = "no-lost-writes";

#[test]
fn stale_read_is_rejected() {
    // write 1, then write 2 completes, then a read returns 1.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 1 invoke write k=x 2
         30 1 ok write k=x 2
         40 2 invoke read k=x
         50 2 ok read k=x 1",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    let text = explanation(&r, LIN);
    assert!(text.contains("#4 p2 read x -> ok 1"), "{text}");
    assert!(text.contains("Int(2)"), "state after prefix shown: {text}");
    // The stale read does not lose a write by itself: the final read is 1,
    // and write 2 is acknowledged before it: the lost-write checker agrees.
    assert_eq!(verdict(&r, LOST), Verdict::Invalid);
}

#[test]
fn lost_write_is_rejected_by_both_checkers() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke read k=x
         30 2 ok read k=x null",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    assert_eq!(verdict(&r, LOST), Verdict::Invalid);
    assert!(explanation(&r, LOST).contains("lost write: #0 wrote 1"));
}

#[test]
fn concurrent_ops_with_several_legal_orders_are_valid() {
    // Two overlapping writes; reads during them see either, in an order
    // that only works with the writes placed write1 < read(1) < write2.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         0 2 invoke write k=x 2
         5 3 invoke read k=x
         10 1 ok write k=x 1
         10 2 ok write k=x 2
         15 3 ok read k=x 1
         20 3 invoke read k=x
         30 3 ok read k=x 2",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
    assert_eq!(verdict(&r, LOST), Verdict::Valid);

    // Same writes, other order observed: also fine.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         0 2 invoke write k=x 2
         5 3 invoke read k=x
         10 1 ok write k=x 1
         10 2 ok write k=x 2
         15 3 ok read k=x 2
         20 3 invoke read k=x
         30 3 ok read k=x 1",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
}

#[test]
fn two_reads_disagreeing_after_writes_settle_are_invalid() {
    // Both writes done by t=10; reads at 20 and 40 see different values.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         0 2 invoke write k=x 2
         10 1 ok write k=x 1
         10 2 ok write k=x 2
         20 3 invoke read k=x
         30 3 ok read k=x 2
         40 3 invoke read k=x
         50 3 ok read k=x 1",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
}

#[test]
fn info_write_that_took_effect_is_valid() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 3
         30 2 info write k=x 3
         40 3 invoke read k=x
         50 3 ok read k=x 3",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
    assert_eq!(verdict(&r, LOST), Verdict::Valid);
}

#[test]
fn info_write_that_did_not_take_effect_is_valid() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 3
         30 2 info write k=x 3
         40 3 invoke read k=x
         50 3 ok read k=x 1",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
}

#[test]
fn info_write_may_take_effect_long_after_its_client_gave_up() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 3
         30 2 info write k=x 3
         40 3 invoke read k=x
         50 3 ok read k=x 1
         60 3 invoke read k=x
         70 3 ok read k=x 3",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
    // But it cannot take effect twice: 1, 3, 1 again is impossible.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 3
         30 2 info write k=x 3
         40 3 invoke read k=x
         50 3 ok read k=x 3
         60 3 invoke read k=x
         70 3 ok read k=x 1",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
}

#[test]
fn failed_write_never_happened() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 3
         30 2 fail write k=x 3
         40 3 invoke read k=x
         50 3 ok read k=x 3",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
}

#[test]
fn cas_outcomes() {
    // cas(1,2) ok, then a cas(1,5) that reports false: legal, value is 2.
    let ok = "0 1 invoke write k=x 1
              10 1 ok write k=x 1
              20 1 invoke cas k=x [1,2]
              30 1 ok cas k=x true
              40 2 invoke cas k=x [1,5]
              50 2 ok cas k=x false
              60 3 invoke read k=x
              70 3 ok read k=x 2";
    assert_eq!(verdict(&run(Workload::Register, ok), LIN), Verdict::Valid);
    // A cas that reports false although the register held `expected`.
    let bad = "0 1 invoke write k=x 1
               10 1 ok write k=x 1
               20 2 invoke cas k=x [1,5]
               30 2 ok cas k=x false";
    assert_eq!(
        verdict(&run(Workload::Register, bad), LIN),
        Verdict::Invalid
    );
    // A cas that reports success although the register did not hold it.
    let bad = "0 1 invoke write k=x 1
               10 1 ok write k=x 1
               20 2 invoke cas k=x [7,5]
               30 2 ok cas k=x true";
    assert_eq!(
        verdict(&run(Workload::Register, bad), LIN),
        Verdict::Invalid
    );
    // An info cas is allowed to have swapped.
    let info = "0 1 invoke write k=x 1
                10 1 ok write k=x 1
                20 2 invoke cas k=x [1,5]
                30 2 info cas k=x [1,5]
                40 3 invoke read k=x
                50 3 ok read k=x 5";
    let r = run(Workload::Register, info);
    assert_eq!(verdict(&r, LIN), Verdict::Valid);
    assert_eq!(verdict(&r, LOST), Verdict::Valid);
}

#[test]
fn keys_are_independent_and_a_bad_key_is_named() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         1 2 invoke write k=y 1
         10 1 ok write k=x 1
         11 2 ok write k=y 1
         20 1 invoke read k=y
         21 2 invoke read k=x
         30 1 ok read k=y 1
         31 2 ok read k=x 9",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    let details = &r[0].details;
    let parts = details["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0]["key"], "x");
    assert_eq!(parts[0]["verdict"], "invalid");
    assert_eq!(parts[1]["verdict"], "valid");
    assert!(explanation(&r, LIN).contains("key \"x\""));
}

#[test]
fn exhausted_budget_is_unknown_never_valid() {
    let h = parse(
        "0 1 invoke write k=x 1
         0 2 invoke write k=x 2
         0 3 invoke write k=x 3
         10 1 ok write k=x 1
         10 2 ok write k=x 2
         10 3 ok write k=x 3
         20 4 invoke read k=x
         30 4 ok read k=x 3",
    );
    let ops = h.operations().unwrap();
    let tight = LinearConfig {
        max_steps: 2,
        time_limit: None,
    };
    let report = linear::check(&RegisterModel, &ops, &tight);
    assert_eq!(report.verdict, Verdict::Unknown);
    assert!(report.partitions[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("budget"));
    let roomy = LinearConfig {
        max_steps: 1000,
        time_limit: None,
    };
    assert_eq!(
        linear::check(&RegisterModel, &ops, &roomy).verdict,
        Verdict::Valid
    );
}

#[test]
fn malformed_cas_makes_the_verdict_unknown() {
    let r = run(
        Workload::Register,
        "0 1 invoke cas k=x 3
         10 1 ok cas k=x true",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Unknown);
    assert!(explanation(&r, LIN).contains("cas value must be"));
}

#[test]
fn failure_window_lists_the_concurrent_ops() {
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke write k=x 2
         21 3 invoke read k=x
         22 4 invoke read k=x
         30 2 ok write k=x 2
         31 3 ok read k=x 7
         32 4 ok read k=x 2",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    let text = explanation(&r, LIN);
    assert!(text.contains("read x -> ok 7"), "{text}");
    assert!(text.contains("concurrent ops"), "{text}");
    assert!(text.contains("write x 2 -> ok"), "{text}");
    assert!(text.contains("ops overlapping it in real time"), "{text}");
    assert!(text.contains("#4 p4 read x -> ok 2"), "{text}");
    assert!(
        r[0].highlight.contains(&3),
        "the bad read is highlighted: {:?}",
        r[0].highlight
    );
    println!("{text}");
}

#[test]
fn lost_write_checker_accepts_superseded_and_concurrent_writes() {
    // Write 1 superseded by a later write 2.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 1 invoke write k=x 2
         30 1 ok write k=x 2
         40 2 invoke read k=x
         50 2 ok read k=x 2",
    );
    assert_eq!(verdict(&r, LOST), Verdict::Valid);
    // Write 2 overlaps the final read, so the read need not see it.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         15 1 invoke write k=x 2
         20 2 invoke read k=x
         30 2 ok read k=x 1
         40 1 ok write k=x 2",
    );
    assert_eq!(verdict(&r, LOST), Verdict::Valid);
    // An uncertain write may have superseded an acknowledged one.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1
         5 3 invoke write k=x 3
         10 1 ok write k=x 1
         12 3 info write k=x 3
         20 2 invoke read k=x
         30 2 ok read k=x 3",
    );
    assert_eq!(verdict(&r, LOST), Verdict::Valid);
    // A key written but never read cannot be vouched for.
    let r = run(
        Workload::Register,
        "0 1 invoke write k=x 1\n10 1 ok write k=x 1",
    );
    assert_eq!(verdict(&r, LOST), Verdict::Unknown);
}

#[test]
fn workload_is_detected_from_the_functions() {
    use raftlock_jepsen::{check_history, CheckOptions};
    let names = |text: &str| -> Vec<String> {
        check_history(&parse(text), &CheckOptions::default())
            .unwrap()
            .into_iter()
            .map(|r| r.checker)
            .collect()
    };
    assert_eq!(
        names("0 1 invoke read k=x\n1 1 ok read k=x null"),
        ["linearizable(register)", "no-lost-writes"]
    );
    assert_eq!(
        names("0 1 invoke acquire k=l\n1 1 ok acquire k=l"),
        ["linearizable(mutex)"]
    );
    assert_eq!(
        names("0 1 invoke incr k=c t=1\n1 1 fail incr k=c t=1"),
        ["linearizable(mutex)", "fenced"]
    );
}
