//! Property tests of lock-delay (`lock_delay.rs`): random histories of a
//! few sessions over locks with and without a delay, each step checked
//! against a brute-force model (plain FIFO vectors, the holder's session
//! end leaving a held-off head), plus: a failed command changes nothing,
//! the snapshot round-trips, and nobody holds a held-off lock.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use raftlock_core::{Command, QueueKind, SessionId, StateMachine, MAX_LOCK_DELAY_MS};

const SESSIONS: u128 = 4;
const LOCKS: [&str; 2] = ["a", "b/c"];

#[derive(Debug, Clone)]
enum Op {
    Open(SessionId),
    Close(SessionId),
    Expire(SessionId),
    /// Acquire, naming a delay or not, waiting or try-lock.
    Lock(&'static str, SessionId, Option<u64>, bool),
    Unlock(&'static str, SessionId),
    /// The leader ends the lock's delay (or a stale end, when none runs).
    EndDelay(&'static str),
}

fn session() -> impl Strategy<Value = SessionId> {
    (1..=SESSIONS).prop_map(SessionId)
}

fn lock() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&LOCKS[..])
}

fn delay() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        4 => Just(Some(500)),
        1 => Just(Some(0)),
        1 => Just(Some(700)),
        1 => Just(Some(MAX_LOCK_DELAY_MS + 1)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => session().prop_map(Op::Open),
        1 => session().prop_map(Op::Close),
        2 => session().prop_map(Op::Expire),
        8 => (lock(), session(), delay(), prop_oneof![4 => Just(true), 1 => Just(false)])
            .prop_map(|(l, s, d, w)| Op::Lock(l, s, d, w)),
        3 => (lock(), session()).prop_map(|(l, s)| Op::Unlock(l, s)),
        3 => lock().prop_map(Op::EndDelay),
    ]
}

/// One lock: its delay and its queue of (sequence, session, held off).
/// Only the head can be held off; its session has ended (a reopened id
/// may not take or release it).
#[derive(Debug, Default)]
struct ModelLock {
    delay: u64,
    queue: Vec<(u64, SessionId, bool)>,
}

#[derive(Debug, Default)]
struct Model {
    revision: u64,
    open: BTreeSet<SessionId>,
    locks: BTreeMap<&'static str, ModelLock>,
}

fn node(name: &str, seq: u64) -> String {
    format!("/locks/{name}/lock-{seq:010}")
}

impl Model {
    fn ghost(&self, name: &str) -> Option<u64> {
        let l = self.locks.get(name)?;
        l.queue.first().filter(|e| e.2).map(|e| e.0)
    }

    /// The command for `op` and whether the model says it succeeds and
    /// changes the state. Applies the op to the model.
    fn step(&mut self, op: &Op) -> (Command, Result<bool, ()>) {
        let next = self.revision + 1;
        match op {
            Op::Open(s) => {
                let cmd = Command::OpenSession {
                    id: *s,
                    owner: "m".into(),
                    ttl_ms: 1_000,
                };
                (cmd, Ok(self.open.insert(*s)))
            }
            Op::Close(s) | Op::Expire(s) => {
                let cmd = match op {
                    Op::Close(_) => Command::CloseSession { id: *s },
                    _ => Command::ExpireSession { id: *s },
                };
                if !self.open.remove(s) {
                    return (cmd, Err(()));
                }
                for l in self.locks.values_mut() {
                    let Some(at) = l.queue.iter().position(|e| e.1 == *s && !e.2) else {
                        continue;
                    };
                    if at == 0 && l.delay > 0 {
                        l.queue[0].2 = true;
                    } else {
                        l.queue.remove(at);
                    }
                }
                self.locks.retain(|_, l| !l.queue.is_empty());
                (cmd, Ok(true))
            }
            Op::Lock(name, s, delay, wait) => {
                let cmd = match delay {
                    Some(ms) => Command::AcquireWithDelay {
                        name: name.to_string(),
                        session: *s,
                        wait: *wait,
                        lock_delay_ms: *ms,
                    },
                    None => Command::Acquire {
                        kind: QueueKind::Lock,
                        name: name.to_string(),
                        session: *s,
                        data: vec![],
                        wait: *wait,
                    },
                };
                if !self.open.contains(s) || delay.is_some_and(|d| d > MAX_LOCK_DELAY_MS) {
                    return (cmd, Err(()));
                }
                if let Some(l) = self.locks.get(name) {
                    if delay.is_some_and(|d| d != l.delay) {
                        return (cmd, Err(()));
                    }
                    if l.queue.iter().any(|e| e.1 == *s && e.2) {
                        return (cmd, Err(()));
                    }
                    if l.queue.iter().any(|e| e.1 == *s) {
                        return (cmd, Ok(false));
                    }
                    if !wait {
                        return (cmd, Err(()));
                    }
                }
                let l = self.locks.entry(name).or_insert_with(|| ModelLock {
                    delay: delay.unwrap_or(0),
                    queue: Vec::new(),
                });
                l.queue.push((next, *s, false));
                (cmd, Ok(true))
            }
            Op::Unlock(name, s) => {
                let cmd = Command::Release {
                    kind: QueueKind::Lock,
                    name: name.to_string(),
                    session: *s,
                    withdraw: None,
                };
                if !self.open.contains(s) {
                    return (cmd, Err(()));
                }
                let Some(l) = self.locks.get_mut(name) else {
                    return (cmd, Err(()));
                };
                let Some(at) = l.queue.iter().position(|e| e.1 == *s) else {
                    return (cmd, Err(()));
                };
                if l.queue[at].2 {
                    return (cmd, Err(()));
                }
                l.queue.remove(at);
                self.locks.retain(|_, l| !l.queue.is_empty());
                (cmd, Ok(true))
            }
            Op::EndDelay(name) => {
                let Some(seq) = self.ghost(name) else {
                    // A stale end: a node that is not (or no longer) held off.
                    let cmd = Command::EndLockDelays {
                        nodes: vec![node(name, next)],
                    };
                    return (cmd, Ok(false));
                };
                let cmd = Command::EndLockDelays {
                    nodes: vec![node(name, seq)],
                };
                if let Some(l) = self.locks.get_mut(name) {
                    l.queue.remove(0);
                }
                self.locks.retain(|_, l| !l.queue.is_empty());
                (cmd, Ok(true))
            }
        }
    }
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut sm = StateMachine::new();
    let mut model = Model::default();
    for op in ops {
        let before = sm.clone();
        let (cmd, expect) = model.step(op);
        let applied = sm.apply(&cmd);
        match expect {
            Err(()) => {
                prop_assert!(applied.result.is_err(), "{op:?} should fail: {applied:?}");
                prop_assert_eq!(&sm, &before, "a failed {:?} changed the state", op);
            }
            Ok(changed) => {
                prop_assert!(applied.result.is_ok(), "{op:?} failed: {applied:?}");
                if changed {
                    model.revision += 1;
                } else {
                    prop_assert_eq!(&sm, &before, "a no-op {:?} changed the state", op);
                }
            }
        }
        prop_assert_eq!(sm.revision(), model.revision);
        if let Err(broken) = sm.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {broken}")));
        }
        for name in LOCKS {
            let view = sm.queue(QueueKind::Lock, name);
            let ml = model.locks.get(name);
            let queue = ml.map(|l| l.queue.as_slice()).unwrap_or_default();
            let holder = queue.first().filter(|e| !e.2).map(|e| e.1);
            prop_assert_eq!(view.holder.as_ref().map(|h| h.session), holder);
            let waiters: Vec<SessionId> = queue.iter().skip(1).map(|e| e.1).collect();
            let seen: Vec<SessionId> = view.waiters.iter().map(|w| w.session).collect();
            prop_assert_eq!(seen, waiters, "waiters of {}", name);
            prop_assert_eq!(sm.lock_delay(name), ml.map_or(0, |l| l.delay));
            if let Some(seq) = model.ghost(name) {
                // Held off: nobody holds, and the old token is refused.
                prop_assert_eq!(sm.fencing_check(name, seq), (false, None));
                let prefix = format!("/locks/{name}/");
                let granted_here = applied
                    .effects
                    .granted
                    .iter()
                    .any(|g| g.starts_with(&prefix));
                prop_assert!(!granted_here, "{} granted while held off", name);
            }
        }
        let ghosts: Vec<(String, u64)> = sm
            .held_off()
            .into_iter()
            .map(|h| (h.node, h.delay_ms))
            .collect();
        let expected: Vec<(String, u64)> = LOCKS
            .iter()
            .filter_map(|n| Some((node(n, model.ghost(n)?), model.locks.get(n)?.delay)))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        prop_assert_eq!(ghosts, expected);
        let bytes = sm.to_snapshot().expect("encode");
        let restored = StateMachine::from_snapshot(&bytes).expect("decode");
        prop_assert_eq!(&restored, &sm);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lock_delay_agrees_with_the_model(ops in prop::collection::vec(op(), 1..120)) {
        run(&ops)?;
    }
}

fn open(sm: &mut StateMachine, id: u128) {
    let cmd = Command::OpenSession {
        id: SessionId(id),
        owner: "t".into(),
        ttl_ms: 1_000,
    };
    assert!(sm.apply(&cmd).result.is_ok());
}

fn acquire(sm: &mut StateMachine, id: u128) -> raftlock_core::Applied {
    sm.apply(&Command::AcquireWithDelay {
        name: "l".into(),
        session: SessionId(id),
        wait: true,
        lock_delay_ms: 1_000,
    })
}

#[test]
fn an_expired_holder_holds_the_lock_off_and_a_release_does_not() {
    let mut sm = StateMachine::new();
    for id in [1, 2, 3] {
        open(&mut sm, id);
        assert!(acquire(&mut sm, id).result.is_ok());
    }
    // Expiry of the holder: held off, nobody granted.
    let expired = sm.apply(&Command::ExpireSession { id: SessionId(1) });
    assert!(expired.effects.granted.is_empty(), "{expired:?}");
    let held_off = sm.held_off();
    assert_eq!(held_off.len(), 1);
    assert_eq!(sm.holder(QueueKind::Lock, "l"), None);
    // The held-off node lost its owner and got a new mod_revision: that is
    // a change node watches must see, so it is among the written nodes.
    assert_eq!(expired.effects.written, vec![held_off[0].node.clone()]);
    let node = sm.node(&held_off[0].node).expect("the held-off node stays");
    assert_eq!(node.ephemeral_owner, None);
    assert_eq!(node.mod_revision, sm.revision());
    // The delay ends: the next in line holds, its waiter is woken by the
    // deletion of its predecessor, as after a release.
    let ended = sm.apply(&Command::EndLockDelays {
        nodes: vec![held_off[0].node.clone()],
    });
    assert_eq!(ended.effects.deleted.len(), 1);
    assert_eq!(ended.effects.granted.len(), 1);
    assert_eq!(
        sm.holder(QueueKind::Lock, "l").map(|h| h.session),
        Some(SessionId(2))
    );
    // A voluntary release hands the lock on at once.
    let released = sm.apply(&Command::Release {
        kind: QueueKind::Lock,
        name: "l".into(),
        session: SessionId(2),
        withdraw: None,
    });
    assert_eq!(released.effects.granted.len(), 1);
    assert!(sm.held_off().is_empty());
    // Another delay is refused while anyone is queued.
    open(&mut sm, 4);
    let other = sm.apply(&Command::AcquireWithDelay {
        name: "l".into(),
        session: SessionId(4),
        wait: true,
        lock_delay_ms: 5,
    });
    assert!(other.result.is_err());
}
