//! Example-based tests of the semantics docs/api.md promises, one rule each.

use raftlock_core::{Command, CoreError, QueueKind, Response, SessionId, StateMachine};

const A: SessionId = SessionId(0xa);
const B: SessionId = SessionId(0xb);

fn with_sessions() -> StateMachine {
    let mut sm = StateMachine::new();
    for id in [A, B] {
        let open = Command::OpenSession {
            id,
            owner: format!("{id}"),
            ttl_ms: 1000,
        };
        assert!(sm.apply(&open).result.is_ok());
    }
    sm
}

fn acquire(session: SessionId, wait: bool) -> Command {
    Command::Acquire {
        kind: QueueKind::Lock,
        name: "job".into(),
        session,
        data: vec![],
        wait,
    }
}

fn release(session: SessionId) -> Command {
    Command::Release {
        kind: QueueKind::Lock,
        name: "job".into(),
        session,
        withdraw: None,
    }
}

fn put(path: &str, expected_version: Option<u64>) -> Command {
    Command::Put {
        path: path.into(),
        data: b"v".to_vec(),
        session: None,
        sequential: false,
        expected_version,
    }
}

#[test]
fn acquire_is_idempotent_per_session() {
    let mut sm = with_sessions();
    let first = sm.apply(&acquire(A, true));
    let rev = sm.revision();
    let again = sm.apply(&acquire(A, true));
    let (Ok(Response::Acquired(f)), Ok(Response::Acquired(g))) = (first.result, again.result)
    else {
        panic!("acquire failed");
    };
    assert_eq!(f.node, g.node);
    assert!(f.created && !g.created && g.held);
    assert_eq!(sm.revision(), rev, "a repeated acquire changes nothing");
    assert_eq!(sm.queue(QueueKind::Lock, "job").waiters.len(), 0);
}

#[test]
fn try_lock_on_a_held_lock_queues_nothing() {
    let mut sm = with_sessions();
    sm.apply(&acquire(A, true));
    let rev = sm.revision();
    assert_eq!(
        sm.apply(&acquire(B, false)).result,
        Err(CoreError::LockHeld {
            lock: "job".into(),
            holder: A
        })
    );
    assert_eq!(sm.revision(), rev);
    assert!(sm.queue(QueueKind::Lock, "job").waiters.is_empty());
}

#[test]
fn release_errors_distinguish_other_holder_from_nobody() {
    let mut sm = with_sessions();
    assert!(matches!(
        sm.apply(&release(A)).result,
        Err(CoreError::NotFound(_))
    ));
    sm.apply(&acquire(A, true));
    assert_eq!(
        sm.apply(&release(B)).result,
        Err(CoreError::NotOwner { lock: "job".into() })
    );
    assert_eq!(
        sm.apply(&release(SessionId(7))).result,
        Err(CoreError::SessionNotFound(SessionId(7)))
    );
}

#[test]
fn release_hands_over_to_the_next_and_reports_the_grant() {
    let mut sm = with_sessions();
    sm.apply(&acquire(A, true));
    let Ok(Response::Acquired(b)) = sm.apply(&acquire(B, true)).result else {
        panic!()
    };
    let applied = sm.apply(&release(A));
    assert_eq!(applied.effects.granted, vec![b.node.clone()]);
    assert_eq!(applied.effects.deleted.len(), 1);
    let holder = sm.queue(QueueKind::Lock, "job").holder.expect("B holds");
    assert_eq!(holder.session, B);
    assert_eq!(holder.granted_revision, Some(applied.revision));
    assert_eq!(
        sm.fencing_check("job", b.fencing_token),
        (true, Some(b.fencing_token))
    );
}

fn withdraw(session: SessionId, node: &str) -> Command {
    Command::Release {
        kind: QueueKind::Lock,
        name: "job".into(),
        session,
        withdraw: Some(node.to_string()),
    }
}

#[test]
fn withdrawing_a_specific_node_spares_a_newer_one() {
    let mut sm = with_sessions();
    let Ok(Response::Acquired(old)) = sm.apply(&acquire(A, true)).result else {
        panic!()
    };
    sm.apply(&release(A));
    sm.apply(&acquire(A, true));
    assert_eq!(
        sm.apply(&withdraw(A, &old.node)).result,
        Err(CoreError::NotFound(old.node))
    );
    assert!(sm.queue(QueueKind::Lock, "job").holder.is_some());
}

#[test]
fn a_withdrawal_never_takes_back_a_grant() {
    let mut sm = with_sessions();
    sm.apply(&acquire(A, true));
    let Ok(Response::Acquired(waiting)) = sm.apply(&acquire(B, true)).result else {
        panic!()
    };
    // B's first request times out while A releases: the grant commits
    // first, so the withdrawal must fail and B keeps the lock.
    sm.apply(&release(A));
    assert_eq!(
        sm.apply(&withdraw(B, &waiting.node)).result,
        Err(CoreError::AlreadyGranted {
            node: waiting.node.clone()
        })
    );
    assert_eq!(
        sm.queue(QueueKind::Lock, "job").holder.map(|h| h.session),
        Some(B)
    );
    // While still waiting, a withdrawal does remove the node.
    let Ok(Response::Acquired(a)) = sm.apply(&acquire(A, true)).result else {
        panic!()
    };
    assert!(!a.held);
    assert!(sm.apply(&withdraw(A, &a.node)).result.is_ok());
    assert!(sm.queue(QueueKind::Lock, "job").waiters.is_empty());
}

#[test]
fn expiry_deletes_every_owned_node_and_wakes_successors() {
    let mut sm = with_sessions();
    sm.apply(&acquire(A, true));
    sm.apply(&acquire(B, true));
    let eph = Command::Put {
        path: "/svc/a".into(),
        data: vec![],
        session: Some(A),
        sequential: false,
        expected_version: None,
    };
    assert!(sm.apply(&eph).result.is_ok());
    let applied = sm.apply(&Command::ExpireSession { id: A });
    assert_eq!(applied.effects.deleted.len(), 2);
    assert_eq!(applied.effects.ended_sessions, vec![A]);
    assert!(sm.node("/svc/a").is_none());
    assert!(
        sm.node("/svc").is_some(),
        "the implicit parent is persistent"
    );
    assert_eq!(
        sm.queue(QueueKind::Lock, "job").holder.map(|h| h.session),
        Some(B)
    );
}

#[test]
fn compare_and_set_and_create_if_absent() {
    let mut sm = StateMachine::new();
    assert!(sm.apply(&put("/k", Some(0))).result.is_ok());
    assert!(matches!(
        sm.apply(&put("/k", Some(0))).result,
        Err(CoreError::VersionMismatch {
            expected: 0,
            actual: 1,
            ..
        })
    ));
    let Ok(Response::Put {
        version, created, ..
    }) = sm.apply(&put("/k", Some(1))).result
    else {
        panic!()
    };
    assert_eq!((version, created), (2, false));
    assert!(matches!(
        sm.apply(&put("/missing", Some(3))).result,
        Err(CoreError::NotFound(_))
    ));
}

#[test]
fn sequential_creates_count_per_parent() {
    let mut sm = StateMachine::new();
    let seq = |sm: &mut StateMachine, path: &str| {
        let cmd = Command::Put {
            path: path.into(),
            data: vec![],
            session: None,
            sequential: true,
            expected_version: None,
        };
        match sm.apply(&cmd).result {
            Ok(Response::Put { path, .. }) => path,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(seq(&mut sm, "/q/job"), "/q/job-0000000000");
    assert_eq!(seq(&mut sm, "/q/job"), "/q/job-0000000001");
    assert_eq!(seq(&mut sm, "/q/other"), "/q/other-0000000002");
    assert_eq!(seq(&mut sm, "/r/job"), "/r/job-0000000000");
}

#[test]
fn tree_rules() {
    let mut sm = with_sessions();
    assert!(sm.apply(&put("/a/b", None)).result.is_ok());
    assert!(matches!(
        sm.apply(&Command::Delete {
            path: "/a".into(),
            expected_version: None
        })
        .result,
        Err(CoreError::NotEmpty(_))
    ));
    assert!(matches!(
        sm.apply(&put("/", None)).result,
        Err(CoreError::Invalid(_))
    ));
    assert!(matches!(
        sm.apply(&put("/locks/x", None)).result,
        Err(CoreError::Invalid(_))
    ));
    assert!(matches!(
        sm.apply(&put("/a/../b", None)).result,
        Err(CoreError::BadName { .. })
    ));
    let eph = Command::Put {
        path: "/e".into(),
        data: vec![],
        session: Some(A),
        sequential: false,
        expected_version: None,
    };
    sm.apply(&eph);
    assert!(matches!(
        sm.apply(&put("/e/child", None)).result,
        Err(CoreError::EphemeralParent(_))
    ));
}

#[test]
fn children_lists_siblings_that_sort_inside_a_subtree() {
    let mut sm = StateMachine::new();
    for path in ["/a/b", "/a/b/c/d", "/a/b-x", "/a/b.y", "/a/b0", "/a/c"] {
        assert!(sm.apply(&put(path, None)).result.is_ok(), "{path}");
    }
    assert_eq!(
        sm.children("/a"),
        Some(vec![
            "b".into(),
            "b-x".into(),
            "b.y".into(),
            "b0".into(),
            "c".into()
        ])
    );
    assert_eq!(sm.children("/"), Some(vec!["a".into()]));
    assert_eq!(sm.children("/nope"), None);
    assert_eq!(sm.children("/a/c"), Some(vec![]));
}

#[test]
fn election_leader_proclaims_others_cannot() {
    let mut sm = with_sessions();
    let campaign = |session, value: &[u8]| Command::Acquire {
        kind: QueueKind::Election,
        name: "primary".into(),
        session,
        data: value.to_vec(),
        wait: true,
    };
    sm.apply(&campaign(A, b"host-a"));
    sm.apply(&campaign(B, b"host-b"));
    let proclaim = |session| Command::Proclaim {
        name: "primary".into(),
        session,
        value: b"host-a2".to_vec(),
    };
    assert!(matches!(
        sm.apply(&proclaim(B)).result,
        Err(CoreError::NotLeader { .. })
    ));
    assert!(sm.apply(&proclaim(A)).result.is_ok());
    let leader = sm
        .queue(QueueKind::Election, "primary")
        .holder
        .expect("A leads");
    assert_eq!(leader.data, b"host-a2");
    assert!(
        sm.queue(QueueKind::Lock, "primary").holder.is_none(),
        "kinds are separate"
    );
}

#[test]
fn open_session_retry_is_a_no_op_and_conflicts_are_refused() {
    let mut sm = with_sessions();
    let rev = sm.revision();
    let again = Command::OpenSession {
        id: A,
        owner: format!("{A}"),
        ttl_ms: 1000,
    };
    assert!(sm.apply(&again).result.is_ok());
    assert_eq!(sm.revision(), rev);
    let other = Command::OpenSession {
        id: A,
        owner: "x".into(),
        ttl_ms: 1000,
    };
    assert_eq!(sm.apply(&other).result, Err(CoreError::SessionConflict(A)));
}

#[test]
fn a_session_opened_as_a_principal_keeps_it() {
    let mut sm = StateMachine::new();
    let id = SessionId(7);
    let open = |principal: &str| Command::OpenSessionAs {
        id,
        principal: principal.into(),
        owner: "w".into(),
        ttl_ms: 1000,
    };
    assert!(sm.apply(&open("billing-jobs")).result.is_ok());
    assert_eq!(sm.session_principal(id), Some(Some("billing-jobs")));
    let view = sm.session(id).expect("open");
    assert_eq!(view.principal.as_deref(), Some("billing-jobs"));
    assert_eq!(sm.sessions_of_principal("billing-jobs"), 1);
    assert_eq!(sm.sessions_of_principal("ops"), 0);
    // A retry is a no-op; the same id for another principal conflicts,
    // and so does the same id opened without one.
    let rev = sm.revision();
    assert!(sm.apply(&open("billing-jobs")).result.is_ok());
    assert_eq!(sm.revision(), rev);
    assert_eq!(
        sm.apply(&open("ops")).result,
        Err(CoreError::SessionConflict(id))
    );
    let anonymous = Command::OpenSession {
        id,
        owner: "w".into(),
        ttl_ms: 1000,
    };
    assert_eq!(
        sm.apply(&anonymous).result,
        Err(CoreError::SessionConflict(id))
    );
}

#[test]
fn corrupt_snapshots_are_refused() {
    let sm = with_sessions();
    let bytes = sm.to_snapshot().expect("encode");
    assert!(StateMachine::from_snapshot(&bytes[..3]).is_err());
    assert!(StateMachine::from_snapshot(&bytes[..bytes.len() - 1]).is_err());
    let mut wrong_version = bytes.clone();
    wrong_version[4] = 9;
    assert!(matches!(
        StateMachine::from_snapshot(&wrong_version),
        Err(raftlock_core::SnapshotError::UnsupportedFormat(9))
    ));
    assert_eq!(StateMachine::from_snapshot(&bytes).expect("decode"), sm);
}

#[test]
fn admission_counts_follow_opens_closes_and_queues() {
    let mut sm = StateMachine::new();
    for (id, owner) in [(1, "team-a"), (2, "team-a"), (3, "team-b")] {
        let open = Command::OpenSession {
            id: SessionId(id),
            owner: owner.into(),
            ttl_ms: 1000,
        };
        assert!(sm.apply(&open).result.is_ok());
    }
    assert_eq!(sm.session_count(), 3);
    assert_eq!(sm.sessions_owned_by("team-a"), 2);
    assert_eq!(sm.sessions_owned_by("team-c"), 0);
    assert_eq!(
        sm.queue_place(QueueKind::Lock, "job", SessionId(1)),
        (0, false)
    );
    assert!(sm.apply(&acquire(SessionId(1), true)).result.is_ok());
    assert!(sm.apply(&acquire(SessionId(2), true)).result.is_ok());
    assert_eq!(
        sm.queue_place(QueueKind::Lock, "job", SessionId(2)),
        (2, true)
    );
    assert_eq!(
        sm.queue_place(QueueKind::Lock, "job", SessionId(3)),
        (2, false)
    );
    assert_eq!(
        sm.queue_place(QueueKind::Election, "job", SessionId(1)),
        (0, false)
    );
    assert!(sm
        .apply(&Command::CloseSession { id: SessionId(1) })
        .result
        .is_ok());
    assert_eq!(sm.session_count(), 2);
    assert_eq!(sm.sessions_owned_by("team-a"), 1);
    assert_eq!(
        sm.queue_place(QueueKind::Lock, "job", SessionId(2)),
        (1, true)
    );
}
