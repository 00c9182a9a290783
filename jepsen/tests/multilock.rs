//! Hand-built histories of the multilock workload (two accounts of 100).

mod common;

use common::{explanation, run, verdict};
use raftlock_jepsen::{Verdict, Workload};

const CHECKER: &str = "multilock-conservation";

/// A transfer under both locks, then an audit under both; process 2
/// waits for the set and holds it after 1's release.
const GOOD: &str = r#"
    0 1 invoke acquire k=m ["a","b"]
    10 1 ok acquire k=m t=3
    5 2 invoke acquire k=m ["b","a"]
    20 1 invoke transfer k=m {"from":0,"to":1,"amount":5}
    30 1 ok transfer k=m {"from":0,"to":1,"amount":5}
    40 1 invoke release k=m ["a","b"]
    41 1 ok release k=m ["a","b"]
    50 2 ok acquire k=m t=4
    60 2 invoke read k=accounts 200
    70 2 ok read k=accounts [95,105]
    80 2 invoke release k=m ["b","a"]
    81 2 ok release k=m ["b","a"]"#;

#[test]
fn conserved_totals_and_exclusive_holds_are_valid() {
    let r = run(Workload::MultiLock, GOOD);
    assert_eq!(verdict(&r, CHECKER), Verdict::Valid, "{r:#?}");
}

#[test]
fn a_lost_update_is_invalid() {
    let r = run(Workload::MultiLock, &GOOD.replace("[95,105]", "[95,110]"));
    assert_eq!(verdict(&r, CHECKER), Verdict::Invalid, "{r:#?}");
    assert!(explanation(&r, CHECKER).contains("not the total 200"));
}

#[test]
fn two_holders_of_one_account_are_invalid() {
    // Process 2 holds "b" before 1 released it.
    let r = run(
        Workload::MultiLock,
        &GOOD.replace("50 2 ok acquire", "35 2 ok acquire"),
    );
    assert_eq!(verdict(&r, CHECKER), Verdict::Invalid, "{r:#?}");
    assert!(explanation(&r, CHECKER).contains("at once"));
}

#[test]
fn a_loss_ends_a_hold() {
    // 1 loses its session at 35 (recorded by 3): 2 may hold from 50.
    let text = GOOD
        .replace(
            "40 1 invoke release k=m [\"a\",\"b\"]",
            "35 3 invoke lost k=m 1",
        )
        .replace("41 1 ok release k=m [\"a\",\"b\"]", "35 3 ok lost k=m 1");
    let r = run(Workload::MultiLock, &text);
    assert_eq!(verdict(&r, CHECKER), Verdict::Valid, "{r:#?}");
}

#[test]
fn without_a_read_of_every_balance_it_is_unknown() {
    let text: String = GOOD
        .lines()
        .filter(|l| !l.contains("read"))
        .collect::<Vec<_>>()
        .join("\n");
    let r = run(Workload::MultiLock, &text);
    assert_eq!(verdict(&r, CHECKER), Verdict::Unknown, "{r:#?}");
}

#[test]
fn the_workload_is_detected() {
    let h = common::parse(GOOD);
    assert_eq!(
        Workload::detect(&h.operations().unwrap()),
        Workload::MultiLock
    );
}
