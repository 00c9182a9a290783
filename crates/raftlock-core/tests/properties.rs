//! Property tests: random command sequences from many sessions, checked
//! step by step against a deliberately naive reference model (one FIFO
//! vector per lock) and against the safety properties a lock service
//! lives or dies by.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use raftlock_core::kv::{
    DeleteRangeRequest, KvCompare, KvCompareResult, KvCompareTarget, KvOp, KvRequest, PutRequest,
    RangeRequest, TxnRequest,
};
use raftlock_core::{
    Command, Compare, CoreError, HolderGuard, Position, QueueKind, Response, SessionId,
    StateMachine, TreeOp, TxnOp,
};

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
        3 => (guard(), txn_op()).prop_map(|(guard, op)| Command::GuardedWrite { guard, op }),
        3 => (
            prop::collection::vec(compare(), 0..3),
            prop::collection::vec(txn_op(), 0..4),
            prop::collection::vec(txn_op(), 0..3),
        )
            .prop_map(|(compare, success, failure)| Command::Txn { compare, success, failure }),
        3 => prop::collection::vec(tree_op(), 0..4).prop_map(|ops| Command::TreeOps { ops }),
        4 => kv_op().prop_map(Command::Kv),
    ]
}

const KV_KEYS: [&[u8]; 4] = [b"k/a", b"k/b", b"k/b/c", b"l"];

fn kv_key() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(&KV_KEYS[..]).prop_map(<[u8]>::to_vec)
}

fn kv_put() -> impl Strategy<Value = PutRequest> {
    (
        kv_key(),
        any::<u8>(),
        prop::option::of(session()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(key, v, lease, ignore_value, ignore_lease)| PutRequest {
            key,
            value: if ignore_value { vec![] } else { vec![v] },
            lease: if ignore_lease { None } else { lease },
            prev_kv: true,
            ignore_value,
            ignore_lease,
        })
}

fn kv_delete() -> impl Strategy<Value = DeleteRangeRequest> {
    (kv_key(), prop::option::of(kv_key())).prop_map(|(key, end)| DeleteRangeRequest {
        key,
        range_end: end.unwrap_or_default(),
        prev_kv: true,
    })
}

fn kv_request() -> impl Strategy<Value = KvRequest> {
    prop_oneof![
        kv_put().prop_map(KvRequest::Put),
        kv_delete().prop_map(KvRequest::DeleteRange),
        kv_key().prop_map(|key| KvRequest::Range(RangeRequest {
            key,
            ..RangeRequest::default()
        })),
    ]
}

/// The etcd key space's writes, leases among the sessions above: a failed
/// one must change nothing, and no key may outlive its lease (`run`
/// checks both for every command).
fn kv_op() -> impl Strategy<Value = KvOp> {
    let compare = (kv_key(), 0..3u64, any::<bool>()).prop_map(|(key, v, by_version)| KvCompare {
        result: KvCompareResult::Equal,
        target: if by_version {
            KvCompareTarget::Version(v)
        } else {
            KvCompareTarget::Mod(v)
        },
        key,
        range_end: vec![],
    });
    prop_oneof![
        3 => kv_put().prop_map(KvOp::Put),
        1 => kv_delete().prop_map(KvOp::DeleteRange),
        3 => (
            prop::collection::vec(compare, 0..2),
            prop::collection::vec(kv_request(), 0..3),
            prop::collection::vec(kv_request(), 0..2),
        )
            .prop_map(|(compare, success, failure)| KvOp::Txn(TxnRequest { compare, success, failure })),
        1 => (0..80u64).prop_map(|revision| KvOp::Compact { revision }),
    ]
}

/// The ZooKeeper door's strict operations: a failing one must undo the
/// list (checked for every failed command in `run`).
fn tree_op() -> impl Strategy<Value = TreeOp> {
    prop_oneof![
        3 => (path(), 7..9u8, prop::option::of(session()), any::<bool>())
            .prop_map(|(path, v, session, sequential)| TreeOp::Create {
                path, data: vec![v], session, sequential,
            }),
        2 => (path(), 7..9u8, prop::option::of(1..3u64))
            .prop_map(|(path, v, expected_version)| TreeOp::SetData { path, data: vec![v], expected_version }),
        2 => (path(), prop::option::of(1..3u64))
            .prop_map(|(path, expected_version)| TreeOp::Delete { path, expected_version }),
        1 => (path(), prop::option::of(1..3u64))
            .prop_map(|(path, expected_version)| TreeOp::Check { path, expected_version }),
    ]
}

/// Stand-ins for a fencing token that `run` replaces by the model's:
/// the lock's current holder's, and one it held before.
const CURRENT_TOKEN: u64 = u64::MAX;
const STALE_TOKEN: u64 = u64::MAX - 1;

fn guard() -> impl Strategy<Value = HolderGuard> {
    (
        lock(),
        prop_oneof![4 => Just(CURRENT_TOKEN), 2 => Just(STALE_TOKEN), 1 => 0..200u64],
    )
        .prop_map(|(lock, fencing_token)| HolderGuard {
            lock,
            fencing_token,
        })
}

fn compare() -> impl Strategy<Value = Compare> {
    prop_oneof![
        (path(), 0..3u64).prop_map(|(path, version)| Compare::Version { path, version }),
        (path(), 7..9u8).prop_map(|(path, v)| Compare::Value {
            path,
            value: vec![v]
        }),
        guard().prop_map(Compare::Holder),
    ]
}

fn txn_op() -> impl Strategy<Value = TxnOp> {
    prop_oneof![
        3 => (path(), 7..9u8, prop::option::of(session()), any::<bool>(), prop::option::of(0..3u64))
            .prop_map(|(path, v, session, sequential, expected_version)| TxnOp::Put {
                path, data: vec![v], session, sequential, expected_version,
            }),
        2 => (path(), prop::option::of(0..3u64))
            .prop_map(|(path, expected_version)| TxnOp::Delete { path, expected_version }),
        1 => Just(TxnOp::Delete { path: "/locks/a".into(), expected_version: None }),
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
    /// Each lock's fencing tokens by session, as acquires returned them.
    tokens: BTreeMap<String, BTreeMap<SessionId, u64>>,
    /// Tokens of lock holders that no longer hold, by lock.
    stale: BTreeMap<String, u64>,
}

impl Model {
    fn observe(&mut self, command: &Command, response: Option<&Response>) {
        let Some(response) = response else {
            return;
        };
        if let (
            Command::Acquire {
                kind: QueueKind::Lock,
                name,
                session,
                ..
            },
            Response::Acquired(acquired),
        ) = (command, response)
        {
            let tokens = self.tokens.entry(name.clone()).or_default();
            tokens.insert(*session, acquired.fencing_token);
        }
        let holders_before: Vec<(String, Option<u64>)> = LOCKS
            .iter()
            .map(|name| (name.to_string(), self.holder_token(name)))
            .collect();
        self.apply_queues(command);
        for (name, before) in holders_before {
            if let Some(token) = before.filter(|t| self.holder_token(&name) != Some(*t)) {
                self.stale.insert(name, token);
            }
        }
    }

    fn apply_queues(&mut self, command: &Command) {
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

    /// The fencing token of the lock's holder.
    fn holder_token(&self, name: &str) -> Option<u64> {
        let holder = self.holder(QueueKind::Lock, name)?;
        self.tokens.get(name)?.get(&holder).copied()
    }

    fn guard_holds(&self, guard: &HolderGuard) -> bool {
        self.holder_token(&guard.lock) == Some(guard.fencing_token)
    }

    /// The guard with its stand-in token replaced by a real one.
    fn resolve_guard(&self, guard: &HolderGuard) -> HolderGuard {
        let fencing_token = match guard.fencing_token {
            CURRENT_TOKEN => self.holder_token(&guard.lock).unwrap_or(0),
            STALE_TOKEN => self.stale.get(&guard.lock).copied().unwrap_or(1),
            token => token,
        };
        HolderGuard {
            lock: guard.lock.clone(),
            fencing_token,
        }
    }

    fn resolve(&self, command: &Command) -> Command {
        match command {
            Command::GuardedWrite { guard, op } => Command::GuardedWrite {
                guard: self.resolve_guard(guard),
                op: op.clone(),
            },
            Command::Txn {
                compare,
                success,
                failure,
            } => Command::Txn {
                compare: compare
                    .iter()
                    .map(|c| match c {
                        Compare::Holder(g) => Compare::Holder(self.resolve_guard(g)),
                        other => other.clone(),
                    })
                    .collect(),
                success: success.clone(),
                failure: failure.clone(),
            },
            other => other.clone(),
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

/// A plain command doing what a transaction operation does.
fn plain(op: &TxnOp) -> Command {
    match op.clone() {
        TxnOp::Put {
            path,
            data,
            session,
            sequential,
            expected_version,
        } => Command::Put {
            path,
            data,
            session,
            sequential,
            expected_version,
        },
        TxnOp::Delete {
            path,
            expected_version,
        } => Command::Delete {
            path,
            expected_version,
        },
    }
}

/// The generic tree (outside the lock prefixes) with each node's data,
/// version and owner, and every session's nodes: what a write changes,
/// but for the revisions it stamps.
fn tree(sm: &StateMachine) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec!["/".to_string()];
    while let Some(path) = stack.pop() {
        if path == "/locks" || path == "/elections" {
            continue;
        }
        if let Some(n) = sm.node(&path) {
            out.push(format!(
                "{path} {:?} v{} {:?}",
                n.data, n.version, n.ephemeral_owner
            ));
        }
        for child in sm.children(&path).unwrap_or_default() {
            stack.push(raftlock_core::path::join(&path, &child));
        }
    }
    for id in 1..=SESSIONS {
        out.push(format!("{:?}", sm.session(SessionId(id))));
    }
    out
}

/// Brute force for guarded writes and transactions: a guarded write is
/// its plain write when the model says the token holds, else `not_holder`;
/// a transaction is its branch's plain writes one by one, all or nothing.
fn check_guarded(
    before: &StateMachine,
    model: &Model,
    command: &Command,
    result: &Result<Response, CoreError>,
    after: &StateMachine,
) -> Result<(), TestCaseError> {
    let mut reference = before.clone();
    match command {
        Command::GuardedWrite { guard, op } => {
            if !model.guard_holds(guard) {
                prop_assert!(
                    matches!(result, Err(CoreError::NotHolder { .. })),
                    "{command:?} with a token that does not hold gave {result:?}"
                );
                return Ok(());
            }
            let expected = reference.apply(&plain(op)).result;
            prop_assert_eq!(result, &expected, "{:?}", command);
            prop_assert_eq!(&reference, after);
        }
        Command::Txn {
            compare,
            success,
            failure,
        } => {
            let succeeded = compare.iter().all(|c| match c {
                Compare::Version { path, version } => {
                    before.node(path).map_or(0, |n| n.version) == *version
                }
                Compare::Value { path, value } => {
                    before.node(path).is_some_and(|n| *n.data == **value)
                }
                Compare::Holder(guard) => model.guard_holds(guard),
            });
            let ops = if succeeded { success } else { failure };
            let reserved = success
                .iter()
                .chain(failure)
                .any(|op| op.path().starts_with("/locks"));
            if reserved {
                prop_assert!(matches!(result, Err(CoreError::Invalid(_))), "{result:?}");
                return Ok(());
            }
            for (index, op) in ops.iter().enumerate() {
                if let Err(error) = reference.apply(&plain(op)).result {
                    let expected = Err(CoreError::TxnOpFailed {
                        index,
                        error: Box::new(error),
                    });
                    prop_assert_eq!(result, &expected, "{:?}", command);
                    return Ok(());
                }
            }
            let Ok(Response::Txn {
                succeeded: ran,
                responses,
            }) = result
            else {
                return Err(TestCaseError::fail(format!("{command:?} gave {result:?}")));
            };
            prop_assert_eq!(*ran, succeeded);
            prop_assert_eq!(responses.len(), ops.len());
            prop_assert_eq!(tree(&reference), tree(after));
            let bump = u64::from(!ops.is_empty());
            prop_assert_eq!(after.revision(), before.revision() + bump);
        }
        _ => {}
    }
    Ok(())
}

fn run(commands: &[Command]) -> Result<StateMachine, TestCaseError> {
    let mut sm = StateMachine::new();
    let mut model = Model::default();
    let mut last_grant: BTreeMap<(QueueKind, String), (String, u64)> = BTreeMap::new();
    for command in commands {
        let command = &model.resolve(command);
        let before = sm
            .to_snapshot()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let reference = sm.clone();
        let applied = sm.apply(command);
        check_guarded(&reference, &model, command, &applied.result, &sm)?;
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
        model.observe(command, applied.result.as_ref().ok());
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
