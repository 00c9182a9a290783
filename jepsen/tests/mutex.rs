//! Hand-built lock histories for the mutex model.

mod common;

use common::{explanation, run, verdict};
use raftlock_jepsen::{Verdict, Workload};

const LIN: &str = "linearizable(mutex)";

fn check(text: &str) -> Verdict {
    verdict(&run(Workload::Mutex, text), LIN)
}

#[test]
fn clean_handoff_is_valid() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 ok acquire k=l
             11 2 invoke acquire k=l   # waits for 1
             20 1 invoke release k=l
             30 1 ok release k=l
             35 2 ok acquire k=l
             40 2 invoke release k=l
             50 2 ok release k=l"
        ),
        Verdict::Valid
    );
}

#[test]
fn two_concurrent_holders_are_rejected() {
    let r = run(
        Workload::Mutex,
        "0 1 invoke acquire k=l
         10 1 ok acquire k=l
         20 2 invoke acquire k=l
         30 2 ok acquire k=l
         40 1 invoke release k=l
         50 1 ok release k=l",
    );
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    let text = explanation(&r, LIN);
    assert!(text.contains("p2 acquire l -> ok"), "{text}");
    assert!(text.contains("Some(1)"), "holder shown: {text}");
}

#[test]
fn release_by_non_holder_is_rejected() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 ok acquire k=l
             20 2 invoke release k=l
             30 2 ok release k=l"
        ),
        Verdict::Invalid
    );
    // Releasing a free lock is a release by a non-holder too.
    assert_eq!(
        check("0 2 invoke release k=l\n10 2 ok release k=l"),
        Verdict::Invalid
    );
}

#[test]
fn failed_ops_are_ignored() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 ok acquire k=l
             20 2 invoke acquire k=l
             30 2 fail acquire k=l      # lock_held
             31 2 invoke release k=l
             32 2 fail release k=l      # not_owner"
        ),
        Verdict::Valid
    );
}

#[test]
fn reacquire_by_the_holder_is_idempotent() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 ok acquire k=l
             20 1 invoke acquire k=l
             30 1 ok acquire k=l
             40 1 invoke release k=l
             50 1 ok release k=l"
        ),
        Verdict::Valid
    );
}

#[test]
fn info_acquire_that_did_not_take_effect_is_valid() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 info acquire k=l      # timed out
             20 2 invoke acquire k=l
             30 2 ok acquire k=l"
        ),
        Verdict::Valid
    );
}

#[test]
fn info_acquire_that_took_effect_blocks_others_until_expiry() {
    // Process 1's acquire timed out but was granted; its release proves it
    // held the lock. Process 2 got the lock in between: two holders.
    let bad = "0 1 invoke acquire k=l
               10 1 info acquire k=l
               20 2 invoke acquire k=l
               30 2 ok acquire k=l
               40 1 invoke release k=l
               50 1 ok release k=l";
    assert_eq!(check(bad), Verdict::Invalid);
    // Same, but 2 acquires only after 1 released: legal.
    let good = "0 1 invoke acquire k=l
                10 1 info acquire k=l
                40 1 invoke release k=l
                50 1 ok release k=l
                60 2 invoke acquire k=l
                70 2 ok acquire k=l";
    assert_eq!(check(good), Verdict::Valid);
}

#[test]
fn expiry_frees_the_lock_of_a_dead_session() {
    // 1 holds, its session expires (observed between 15 and 40), then 2
    // acquires: legal.
    let with_expiry = "0 1 invoke acquire k=l
                       10 1 ok acquire k=l
                       15 1 invoke expire k=l
                       40 1 ok expire k=l
                       50 2 invoke acquire k=l
                       60 2 ok acquire k=l";
    assert_eq!(check(with_expiry), Verdict::Valid);
    // Without the expiry the grant to 2 is a second holder.
    let without = "0 1 invoke acquire k=l
                   10 1 ok acquire k=l
                   50 2 invoke acquire k=l
                   60 2 ok acquire k=l";
    assert_eq!(check(without), Verdict::Invalid);
    // The expiry window matters: a grant that completed before the
    // session could have expired is still a second holder.
    let too_early = "0 1 invoke acquire k=l
                     10 1 ok acquire k=l
                     12 2 invoke acquire k=l
                     14 2 ok acquire k=l
                     15 1 invoke lost k=l
                     40 1 ok lost k=l";
    assert_eq!(check(too_early), Verdict::Invalid);
}

#[test]
fn expiry_after_an_uncertain_acquire_is_valid() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=l
             10 1 info acquire k=l
             11 1 invoke expire k=l
             20 1 ok expire k=l
             30 2 invoke acquire k=l
             40 2 ok acquire k=l"
        ),
        Verdict::Valid
    );
}

#[test]
fn locks_are_independent() {
    assert_eq!(
        check(
            "0 1 invoke acquire k=a
             1 2 invoke acquire k=b
             10 1 ok acquire k=a
             11 2 ok acquire k=b"
        ),
        Verdict::Valid
    );
}

#[test]
fn expiry_recorded_on_behalf_of_the_owner_frees_its_lock() {
    // Process 1 holds the lock, completes an unrelated op (an increment),
    // then learns its session is gone. The expiry is recorded by process 3
    // with value 1, its window starting at 1's last known-alive instant
    // (15), before 1's later op: 2's grant at 40 is legal.
    let text = "0 1 invoke acquire k=l
         10 1 ok acquire k=l
         15 3 invoke expire 1 k=l
         20 2 invoke acquire k=l
         40 2 ok acquire k=l
         50 1 invoke incr k=c
         60 1 ok incr k=c
         70 3 ok expire 1 k=l";
    assert_eq!(check(text), Verdict::Valid);
    // The same expiry on behalf of someone else does not free 1's lock.
    let text = text.replace("expire 1", "expire 7");
    assert_eq!(check(&text), Verdict::Invalid);
}

// Issue 10: a client holds the lock until it observes that its session is
// lost (the client crate's deadline after its last successful keepalive,
// or `session_not_found`). The run driver records that end at the instant
// of the observation, never earlier; a grant to another client before it
// is two holders.

#[test]
fn a_grant_before_the_holder_observed_its_loss_is_rejected() {
    // p1 holds from 10 ms; its keepalives to a cut-off leader kept
    // succeeding, so it observed the loss only at its deadline (3.0 s,
    // recorded by its next process p3 on its behalf). p2 was granted the
    // lock at 2.5 s: two holders.
    let bad = "0 1 invoke acquire k=l
               10 1 ok acquire k=l
               1000 2 invoke acquire k=l
               2500 2 ok acquire k=l
               3000 3 invoke lost 1 k=l
               3001 3 ok lost 1 k=l";
    let r = run(Workload::Mutex, bad);
    assert_eq!(verdict(&r, LIN), Verdict::Invalid);
    assert!(
        explanation(&r, LIN).contains("p2 acquire l -> ok"),
        "{}",
        explanation(&r, LIN)
    );
    // A grant after the holder stopped is fine.
    let good = bad
        .replace("2500 2 ok", "3500 2 ok")
        .replace("3001 3 ok lost", "3200 3 ok lost");
    assert_eq!(check(&good), Verdict::Valid);
}

#[test]
fn a_holder_retrying_its_release_still_holds() {
    // p1's releases fail (no leader) while its session is kept alive by
    // its isolated leader; the majority grants p2 at 4 s; p1 observes the
    // loss only at 5.5 s. Failed releases release nothing: invalid.
    let bad = "0 1 invoke acquire k=l
               10 1 ok acquire k=l
               20 2 invoke acquire k=l
               1000 1 invoke release k=l
               3000 1 fail release k=l
               3100 1 invoke release k=l
               4000 2 ok acquire k=l
               5100 1 fail release k=l
               5500 3 invoke expire 1 k=l
               5600 3 ok expire 1 k=l";
    assert_eq!(check(bad), Verdict::Invalid);
    // An expiry observed before the grant (the session's deadline passed
    // at 3.5 s) makes the same grant legal.
    let good = bad
        .replace("5500 3 invoke expire 1", "3500 3 invoke expire 1")
        .replace("5600 3 ok expire 1", "3600 3 ok expire 1");
    assert_eq!(check(&good), Verdict::Valid);
}

#[test]
fn the_checker_is_only_as_strict_as_the_recorded_loss() {
    // Why the run driver must not backdate a loss: the same overlap as
    // above, with p1's end backdated to its last known-alive instant
    // (100 ms) instead of when it stopped, is accepted. The driver records
    // the observation instant (see `workload::session`).
    let backdated = "0 1 invoke acquire k=l
                     10 1 ok acquire k=l
                     100 3 invoke lost 1 k=l
                     1000 2 invoke acquire k=l
                     2500 2 ok acquire k=l
                     3001 3 ok lost 1 k=l";
    assert_eq!(check(backdated), Verdict::Valid);
}
