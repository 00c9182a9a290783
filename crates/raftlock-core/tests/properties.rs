//! Property tests: random command sequences from many sessions, checked
//! step by step against a deliberately naive reference model (one FIFO
//! vector per lock) and against the safety properties a lock service
//! lives or dies by.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use raftlock_core::{Command, Position, QueueKind, Response, SessionId, StateMachine};

const SESSIONS: u128 = 5;
/// Sessions in a crowded history: more than a queue or a session's node
/// set holds in its small form.
const CROWD: u128 = 40;
const LOCKS: [&str; 3] = ["a", "b", "a/b"];
const PATHS: [&str; 4] = ["/x", "/x/y", "/z", "/x/y/w"];

fn kind() -> impl Strategy<Value = QueueKind> {
    prop_oneof![4 => Just(QueueKind::Lock), 1 => Just(QueueKind::Election)]
}

fn session() -> impl Strategy<Value = SessionId> {
    (1..=SESSIONS).prop_map(SessionId)
}

fn lock() -> impl Strategy<Value = String> {
    prop::sample::select(&LOCKS[..]).prop_map(str::to_string)
}

fn path() -> impl Strategy<Value = String> {
    prop::sample::select(&PATHS[..]).prop_map(str::to_string)
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        4 => (session(), prop_oneof![9 => Just(1000u64), 1 => Just(0)]).prop_map(|(id, ttl_ms)| Command::OpenSession {
            id, owner: format!("o{}", id.0), ttl_ms,
        }),
        1 => session().prop_map(|id| Command::CloseSession { id }),
        1 => session().prop_map(|id| Command::ExpireSession { id }),
        1 => prop::collection::vec((session(), 1..1000u64), 0..3)
            .prop_map(|sessions| Command::CheckpointSessions { sessions }),
        1 => prop::collection::vec(session(), 0..3).prop_map(|ids| Command::RenewSessions { ids }),
        8 => (kind(), lock(), session(), prop_oneof![4 => Just(true), 1 => Just(false)]).prop_map(|(kind, name, session, wait)| {
            Command::Acquire { kind, name, session, data: vec![1], wait }
        }),
        4 => (kind(), lock(), session(), prop::option::of(0..40u64)).prop_map(
            |(kind, name, session, node)| Command::Release {
                kind, name: name.clone(), session,
                withdraw: node.map(|n| format!("{}/lock-{n:010}", kind.queue_path(&name))),
            }
        ),
        1 => (lock(), session(), any::<u8>()).prop_map(|(name, session, v)| Command::Proclaim {
            name, session, value: vec![v],
        }),
        3 => (path(), prop::option::of(session()), any::<bool>(), prop::option::of(0..3u64))
            .prop_map(|(path, session, sequential, expected_version)| Command::Put {
                path, data: vec![7], session, sequential, expected_version,
            }),
        2 => (path(), prop::option::of(0..3u64))
            .prop_map(|(path, expected_version)| Command::Delete { path, expected_version }),
        // Bad input must change nothing.
        1 => Just(Command::Acquire {
            kind: QueueKind::Lock, name: "../x".into(), session: SessionId(1), data: vec![], wait: true,
        }),
        1 => Just(Command::Put {
            path: "/locks/a/lock-0000000000".into(), data: vec![], session: None,
            sequential: false, expected_version: None,
        }),
    ]
}

/// Many sessions on one lock and one session creating many ephemeral
/// nodes, so queues and node sets cross their small/large limits both
/// ways (the histories above never queue more than five).
fn crowded_command() -> impl Strategy<Value = Command> {
    let session = (1..=CROWD).prop_map(SessionId);
    let open = |id: SessionId| Command::OpenSession {
        id,
        owner: format!("o{}", id.0),
        ttl_ms: 1000,
    };
    prop_oneof![
        4 => session.clone().prop_map(open),
        1 => session.clone().prop_map(|id| Command::CloseSession { id }),
        8 => (kind(), session.clone()).prop_map(|(kind, session)| Command::Acquire {
            kind, name: "a".into(), session, data: vec![1], wait: true,
        }),
        4 => (kind(), session).prop_map(|(kind, session)| Command::Release {
            kind, name: "a".into(), session, withdraw: None,
        }),
        1 => Just(open(SessionId(1))),
        3 => Just(Command::Put {
            path: "/x".into(), data: vec![7], session: Some(SessionId(1)),
            sequential: true, expected_version: None,
        }),
    ]
}

/// The naive model: which sessions are open, and each queue as a FIFO of
/// sessions. The lowest entry holds.
#[derive(Default)]
struct Model {
    open: BTreeSet<SessionId>,
    queues: BTreeMap<(QueueKind, String), Vec<SessionId>>,
}

impl Model {
    fn observe(&mut self, command: &Command, ok: bool) {
        if !ok {
            return;
        }
        match command {
            Command::OpenSession { id, .. } => {
                self.open.insert(*id);
            }
            Command::CloseSession { id } | Command::ExpireSession { id } => {
                self.open.remove(id);
                for q in self.queues.values_mut() {
                    q.retain(|s| s != id);
                }
            }
            Command::Acquire {
                kind,
                name,
                session,
                ..
            } => {
                let q = self.queues.entry((*kind, name.clone())).or_default();
                if !q.contains(session) {
                    q.push(*session);
                }
            }
            Command::Release {
                kind,
                name,
                session,
                ..
            } => {
                if let Some(q) = self.queues.get_mut(&(*kind, name.clone())) {
                    q.retain(|s| s != session);
                }
            }
            _ => {}
        }
    }

    fn holder(&self, kind: QueueKind, name: &str) -> Option<SessionId> {
        self.queues
            .get(&(kind, name.to_string()))
            .and_then(|q| q.first().copied())
    }

    fn expected_error(&self, command: &Command) -> Option<&'static str> {
        match command {
            Command::Acquire { session, name, .. } | Command::Release { session, name, .. }
                if !self.open.contains(session) && !name.contains("..") =>
            {
                Some("session_not_found")
            }
            _ => None,
        }
    }
}

fn queue_nodes(sm: &StateMachine, kind: QueueKind, name: &str) -> Vec<(u64, String)> {
    let queue_path = kind.queue_path(name);
    let mut nodes: Vec<(u64, String)> = sm
        .children(&queue_path)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|child| {
            let seq = child.strip_prefix("lock-")?.parse().ok()?;
            Some((seq, format!("{queue_path}/{child}")))
        })
        .collect();
    nodes.sort();
    nodes
}

/// Every answer a client could get, for comparing two states.
fn observable(sm: &StateMachine) -> String {
    let mut out = format!("rev {}\n", sm.revision());
    for kind in [QueueKind::Lock, QueueKind::Election] {
        for name in LOCKS {
            out += &format!("{kind:?} {name}: {:?}\n", sm.queue(kind, name));
        }
        out += &format!("{:?}\n", sm.queues(kind, ""));
    }
    for id in 1..=SESSIONS {
        out += &format!("{:?}\n", sm.session(SessionId(id)));
    }
    for path in ["/", "/x", "/x/y", "/z", "/locks", "/locks/a", "/elections"] {
        out += &format!("{path}: {:?} {:?}\n", sm.node(path), sm.children(path));
    }
    out
}

fn run(commands: &[Command]) -> Result<StateMachine, TestCaseError> {
    let mut sm = StateMachine::new();
    let mut model = Model::default();
    let mut last_grant: BTreeMap<(QueueKind, String), (String, u64)> = BTreeMap::new();
    for command in commands {
        let before = sm
            .to_snapshot()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let applied = sm.apply(command);
        let ok = applied.result.is_ok();
        if let Some(code) = model.expected_error(command) {
            prop_assert!(
                matches!(
                    applied.result,
                    Err(raftlock_core::CoreError::SessionNotFound(_))
                ),
                "{command:?} should fail with {code}, got {:?}",
                applied.result
            );
        }
        if !ok {
            let after = sm
                .to_snapshot()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(
                before,
                after,
                "failed command {:?} changed the state",
                command
            );
            prop_assert!(applied.effects == Default::default());
        }
        model.observe(command, ok);
        prop_assert_eq!(sm.check_invariants(), Ok(()));

        for kind in [QueueKind::Lock, QueueKind::Election] {
            for name in LOCKS {
                let view = sm.queue(kind, name);
                // One holder, and it is the session the model says.
                prop_assert_eq!(
                    view.holder.as_ref().map(|h| h.session),
                    model.holder(kind, name),
                    "holder of {:?} {} after {:?}",
                    kind,
                    name,
                    command
                );
                // The cheap holder lookup agrees with the full view.
                prop_assert_eq!(&sm.holder(kind, name), &view.holder);
                // The holder is the lowest sequence; waiters in order.
                let nodes = queue_nodes(&sm, kind, name);
                let listed: Vec<String> = view
                    .holder
                    .iter()
                    .chain(&view.waiters)
                    .map(|e| e.node.clone())
                    .collect();
                let by_seq: Vec<String> = nodes.iter().map(|(_, n)| n.clone()).collect();
                prop_assert_eq!(&listed, &by_seq);
                // The admission check's cheap queue lookup agrees with the view.
                for id in (1..=CROWD).map(SessionId) {
                    let queued = view
                        .holder
                        .iter()
                        .chain(&view.waiters)
                        .any(|e| e.session == id);
                    prop_assert_eq!(sm.queue_place(kind, name, id), (listed.len(), queued));
                }
                // Predecessor lookup agrees with a brute-force scan.
                for (i, (_, node)) in nodes.iter().enumerate() {
                    let expected = match i {
                        0 => Position::Holder,
                        _ => Position::Behind(nodes[i - 1].1.clone()),
                    };
                    prop_assert_eq!(sm.position(node), Ok(expected));
                }
                // Fencing tokens strictly increase from grant to grant.
                if let Some(holder) = view.holder {
                    let key = (kind, name.to_string());
                    if let Some((node, token)) = last_grant.get(&key) {
                        if *node != holder.node {
                            prop_assert!(
                                holder.fencing_token > *token,
                                "token went from {} to {} on {}",
                                token,
                                holder.fencing_token,
                                name
                            );
                        } else {
                            prop_assert_eq!(holder.fencing_token, *token);
                        }
                    }
                    last_grant.insert(key, (holder.node, holder.fencing_token));
                }
            }
        }
        // The admission counts agree with a scan of the sessions.
        let live: Vec<SessionId> = (1..=CROWD)
            .map(SessionId)
            .filter(|id| sm.session(*id).is_some())
            .collect();
        prop_assert_eq!(sm.session_count(), live.len());
        for id in (1..=CROWD).map(SessionId) {
            let owner = format!("o{}", id.0);
            let expected = live
                .iter()
                .filter(|l| sm.session(**l).is_some_and(|v| v.owner == owner))
                .count();
            prop_assert_eq!(sm.sessions_owned_by(&owner), expected);
        }
        // No ephemeral node outlives its session.
        for id in (1..=CROWD).map(SessionId) {
            if !model.open.contains(&id) {
                prop_assert!(sm.session(id).is_none());
            }
        }
        if let Ok(Response::Acquired(acq)) = &applied.result {
            prop_assert_eq!(acq.held, sm.position(&acq.node) == Ok(Position::Holder));
        }
    }
    Ok(sm)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_histories_keep_every_lock_safe(commands in prop::collection::vec(command(), 1..120)) {
        run(&commands)?;
    }

    #[test]
    fn same_log_gives_byte_identical_snapshots(commands in prop::collection::vec(command(), 1..120)) {
        let a = run(&commands)?.to_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = run(&commands)?.to_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(a, b);
    }

    #[test]
    fn crowded_histories_keep_every_lock_safe_and_restore_exactly(
        commands in prop::collection::vec(crowded_command(), 1..300),
    ) {
        let state = run(&commands)?;
        let bytes = state.to_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let restored = StateMachine::from_snapshot(&bytes)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&restored, &state);
        prop_assert_eq!(restored.to_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?, bytes);
    }

    #[test]
    fn snapshot_restore_preserves_state_and_answers(
        commands in prop::collection::vec(command(), 1..120),
        more in prop::collection::vec(command(), 0..20),
    ) {
        let mut original = run(&commands)?;
        let bytes = original.to_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut restored = StateMachine::from_snapshot(&bytes)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&restored, &original);
        prop_assert_eq!(observable(&restored), observable(&original));
        // And both keep evolving identically.
        for command in &more {
            prop_assert_eq!(original.apply(command), restored.apply(command));
        }
        prop_assert_eq!(observable(&restored), observable(&original));
    }
}
