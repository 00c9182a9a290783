//! Test bodies written once against `dyn LockClient`, run over both
//! transports by `embedded.rs` and `http.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use raftlock_client::{
    lost_margin, ClientError, Election, Leader, LeaderStream, LockClient, LostReason, Mutex,
    Session,
};
use tokio::time::Instant;

use super::{within, PATIENCE};

const TTL: Duration = Duration::from_secs(5);

/// Two tasks, each with its own session (and client), take one lock in
/// turns: never both inside, and tokens strictly increase in grant order.
/// Whoever holds waits until the other (if it has rounds left) is queued,
/// so every grant after the first is a waiter woken by a release.
pub async fn mutual_exclusion(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    const ROUNDS: usize = 5;
    const NAME: &str = "orders/42";
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let left: Arc<[AtomicUsize; 2]> =
        Arc::new([AtomicUsize::new(ROUNDS), AtomicUsize::new(ROUNDS)]);
    let sessions = [
        Session::open(a, "a", TTL).await.expect("open a"),
        Session::open(b, "b", TTL).await.expect("open b"),
    ];
    let ids = [sessions[0].id(), sessions[1].id()];
    let workers = sessions.into_iter().enumerate().map(|(me, session)| {
        let (inside, tokens, left) = (inside.clone(), tokens.clone(), left.clone());
        tokio::spawn(async move {
            let mutex = Mutex::new(&session, NAME);
            for _ in 0..ROUNDS {
                let guard = mutex.lock().await.expect("lock");
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                let state = mutex.state().await.expect("state");
                let holder = state.holder.expect("a holder");
                assert_eq!(holder.session, Some(session.id()));
                assert_eq!(holder.fencing_token, guard.fencing_token());
                tokens.lock().expect("tokens").push(guard.fencing_token());
                if left[1 - me].load(Ordering::SeqCst) > 0 {
                    until_waiting(session.client().as_ref(), NAME, ids[1 - me]).await;
                }
                // Counted before the release: the next holder reads it.
                left[me].fetch_sub(1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
            session.close().await.expect("close");
        })
    });
    for worker in within("both workers", futures::future::join_all(workers)).await {
        worker.expect("worker");
    }
    let tokens = tokens.lock().expect("tokens").clone();
    assert_eq!(tokens.len(), 2 * ROUNDS);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens {tokens:?}");
}

/// Polls the lock until `session` waits in it (a state check, bounded).
async fn until_waiting(client: &dyn LockClient, name: &str, session: raftlock_client::SessionId) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let state = client.lock_state(name).await.expect("lock state");
        if state.waiters.iter().any(|w| w.session == Some(session)) {
            return;
        }
        assert!(Instant::now() < deadline, "{session} never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Try-lock and timeouts refuse while held; dropping the guard (no
/// unlock) hands the lock to the waiter; fencing follows the holder.
pub async fn guard_drop_releases(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    let name = "jobs/nightly";
    let sa = Session::open(a.clone(), "a", TTL).await.expect("open a");
    let sb = Session::open(b, "b", TTL).await.expect("open b");
    let (ma, mb) = (Mutex::new(&sa, name), Mutex::new(&sb, name));
    let ga = ma.lock().await.expect("a locks");
    let first = ga.fencing_token();
    assert!(matches!(mb.try_lock().await, Err(ClientError::LockHeld(_))));
    let timed_out = mb.lock_timeout(Duration::from_millis(200)).await;
    assert!(
        matches!(timed_out, Err(ClientError::Timeout(_))),
        "{timed_out:?}"
    );
    // The timed-out wait left nothing queued.
    assert!(ma.state().await.expect("state").waiters.is_empty());
    assert!(a.fencing_check(name, first).await.expect("check").valid);

    let waiter = tokio::spawn(async move { mb.lock().await });
    until_waiting(a.as_ref(), name, sb.id()).await;
    drop(ga);
    let gb = within("b's lock", waiter)
        .await
        .expect("join")
        .expect("b gets the lock after a's guard is dropped");
    assert!(gb.fencing_token() > first);
    let stale = a.fencing_check(name, first).await.expect("check");
    assert!(!stale.valid);
    assert_eq!(stale.current_token, Some(gb.fencing_token()));
    gb.unlock().await.expect("unlock");
    assert!(ma.state().await.expect("state").holder.is_none());
    sa.close().await.expect("close a");
    sb.close().await.expect("close b");
}

/// Campaign, proclaim, resign and observe; the next candidate takes over.
pub async fn election(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    let name = "scheduler";
    let sa = Session::open(a.clone(), "a", TTL).await.expect("open a");
    let sb = Session::open(b, "b", TTL).await.expect("open b");
    let (ea, eb) = (Election::new(&sa, name), Election::new(&sb, name));
    let mut watch = a.observe(name);
    assert_eq!(next(&mut watch).await, None);

    let won = ea.campaign("host-a").await.expect("a wins");
    let leader = next(&mut watch).await.expect("a leads");
    assert_eq!(
        (leader.session, leader.value.as_str()),
        (Some(sa.id()), "host-a")
    );
    assert_eq!(leader.fencing_token, won.fencing_token);

    let candidate = eb.clone();
    let b_campaign = tokio::spawn(async move { candidate.campaign("host-b").await });
    let refused = eb.proclaim("usurper").await;
    assert!(
        matches!(refused, Err(ClientError::NotLeader(_))),
        "{refused:?}"
    );
    ea.proclaim("host-a2").await.expect("proclaim");
    let leader = next(&mut watch).await.expect("a leads");
    assert_eq!(
        (leader.session, leader.value.as_str()),
        (Some(sa.id()), "host-a2")
    );

    ea.resign().await.expect("resign");
    // b may not have queued yet when a resigned: skip an empty interlude.
    let leader = loop {
        if let Some(leader) = next(&mut watch).await {
            break leader;
        }
    };
    assert_eq!(
        (leader.session, leader.value.as_str()),
        (Some(sb.id()), "host-b")
    );
    let b_won = within("b's campaign", b_campaign)
        .await
        .expect("join")
        .expect("b wins");
    assert!(b_won.fencing_token > won.fencing_token);
    let current = eb.leader().await.expect("leader").expect("b leads");
    assert_eq!(current.session, Some(sb.id()));
    sa.close().await.expect("close a");
    sb.close().await.expect("close b");
}

/// The next state of an observe stream.
async fn next(watch: &mut LeaderStream) -> Option<Leader> {
    let item = within("an observe event", watch.next()).await;
    item.expect("the stream goes on").expect("an event")
}

/// A `session_not_found` answer fires `lost()` at once: to an explicit
/// keepalive, to a lock call, and to the background keepalive (well
/// before the deadline a silent failure would wait for).
pub async fn session_not_found_fires_lost(client: Arc<dyn LockClient>) {
    let ttl = Duration::from_secs(3);
    let session = Session::open(client.clone(), "x", ttl).await.expect("open");
    client
        .close_session(session.id())
        .await
        .expect("close behind its back");
    assert!(session.lost_reason().is_none());
    let answer = session.keepalive().await;
    assert!(
        matches!(answer, Err(ClientError::SessionNotFound(_))),
        "{answer:?}"
    );
    assert_eq!(session.lost_reason(), Some(LostReason::Expired));
    drop(session);

    let session = Session::open(client.clone(), "y", ttl).await.expect("open");
    client
        .close_session(session.id())
        .await
        .expect("close behind its back");
    let locked = Mutex::new(&session, "orders/7").lock().await;
    assert!(
        matches!(locked, Err(ClientError::SessionNotFound(_))),
        "{locked:?}"
    );
    assert_eq!(session.lost_reason(), Some(LostReason::Expired));
    drop(session);

    let session = Session::open(client.clone(), "z", ttl).await.expect("open");
    client
        .close_session(session.id())
        .await
        .expect("close behind its back");
    let reason = within("lost()", session.lost()).await;
    assert_eq!(reason, LostReason::Expired);
    assert!(
        Instant::now() < session.lost_at(),
        "fired by the answer, not the deadline"
    );
}

/// Waits for `lost()` after the cluster was stopped and checks the
/// window: not before `last_renewed + ttl − margin`, and before the
/// earliest possible server-side expiry `last_renewed + ttl`.
pub async fn assert_lost_in_window(session: &Session) {
    let reason = within("lost()", session.lost()).await;
    let fired = Instant::now();
    assert_eq!(reason, LostReason::KeepaliveFailed);
    let renewed = session.last_renewed();
    let ttl = session.ttl();
    let earliest = renewed + ttl - lost_margin(ttl);
    assert!(fired >= earliest, "fired {:?} early", earliest - fired);
    assert!(
        fired < renewed + ttl,
        "fired {:?} after the server may have expired the session",
        fired - (renewed + ttl)
    );
}

/// Read-write lock, semaphore and multi-lock through their recipes:
/// readers share and exclude a writer, a dropped guard hands over, a
/// semaphore refuses another limit, and a multi-lock takes all or none.
pub async fn primitives(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    use raftlock_client::{MultiLock, RwLock, Semaphore};
    let sa = Session::open(a.clone(), "a", TTL).await.expect("open a");
    let sb = Session::open(b, "b", TTL).await.expect("open b");
    // Read-write lock.
    let (ra, rb) = (RwLock::new(&sa, "docs/1"), RwLock::new(&sb, "docs/1"));
    let reading = ra.read().await.expect("a reads");
    let also = rb.try_read().await.expect("b reads alongside");
    also.unlock().await.expect("b stops reading");
    assert!(matches!(
        rb.try_write().await,
        Err(ClientError::LockHeld(_))
    ));
    let writer = tokio::spawn(async move { rb.write().await });
    let first = reading.fencing_token();
    drop(reading);
    let w = within("b writes", writer)
        .await
        .expect("join")
        .expect("granted");
    assert!(w.fencing_token() > first);
    assert!(matches!(ra.try_read().await, Err(ClientError::LockHeld(_))));
    w.unlock().await.expect("unlock");
    // Semaphore of 1: the limit is fixed.
    let (pa, pb) = (
        Semaphore::new(&sa, "pool", 1),
        Semaphore::new(&sb, "pool", 2),
    );
    let permit = pa.acquire().await.expect("a's permit");
    let refused = pb.try_acquire().await;
    assert!(
        matches!(&refused, Err(ClientError::Rejected { code, .. }) if code == "limit_mismatch"),
        "{refused:?}"
    );
    permit.release().await.expect("release");
    // Multi-lock: b cannot take an overlapping set while a holds one.
    let ma = MultiLock::new(&sa, ["acct/1", "acct/2"]);
    let mb = MultiLock::new(&sb, ["acct/2", "acct/3"]);
    let held = ma.lock().await.expect("a takes both");
    assert_eq!(held.grants().len(), 2);
    assert!(matches!(mb.try_lock().await, Err(ClientError::LockHeld(_))));
    let free = Mutex::new(&sb, "acct/3")
        .try_lock()
        .await
        .expect("acct/3 stayed free");
    free.unlock().await.expect("unlock");
    held.unlock().await.expect("release both");
    let got = mb.lock_timeout(PATIENCE).await.expect("b takes both");
    got.unlock().await.expect("unlock");
    sa.close().await.expect("close a");
    sb.close().await.expect("close b");
}

/// A guard's guarded write commits while it holds and is refused
/// (`not_holder`, nothing written) once the lock went to another; a
/// transaction runs one branch, and a failing operation writes nothing.
pub async fn guarded_writes(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    use raftlock_client::{Compare, Txn, TxnOp, TxnOpResult};
    const NAME: &str = "orders/7";
    let sa = Session::open(a, "a", TTL).await.expect("open a");
    let sb = Session::open(b, "b", TTL).await.expect("open b");
    let guard_a = Mutex::new(&sa, NAME).lock().await.expect("a locks");
    let written = guard_a
        .put_if_holder("/ledger/7", b"a1")
        .await
        .expect("holder writes");
    assert_eq!((written.version, written.created), (1, true));
    let stale = guard_a.holder_guard();
    // The lock goes to B while A's guard still exists (A's session ends).
    sa.close().await.expect("close a");
    let guard_b = Mutex::new(&sb, NAME).lock().await.expect("b locks");
    let refused = guard_a.put_if_holder("/ledger/7", b"a2").await;
    assert!(
        matches!(&refused, Err(ClientError::Rejected { code, .. }) if code == "not_holder"),
        "{refused:?}"
    );
    let client = sb.client();
    let txn = |version| Txn {
        compare: vec![
            Compare::Version {
                path: "/ledger/7".into(),
                version,
            },
            Compare::Holder(guard_b.holder_guard()),
        ],
        success: vec![TxnOp::Put {
            path: "/ledger/7".into(),
            data: b"b1".to_vec(),
            session: None,
            sequential: false,
            expected_version: None,
        }],
        failure: vec![],
    };
    let ran = client.txn(&txn(1)).await.expect("txn");
    assert!(ran.succeeded, "{ran:?}");
    assert!(matches!(&ran.responses[..], [TxnOpResult::Put(n)] if n.version == 2));
    let skipped = client.txn(&txn(1)).await.expect("txn");
    assert!(!skipped.succeeded && skipped.responses.is_empty());
    let stale_txn = Txn {
        compare: vec![Compare::Holder(stale)],
        success: vec![],
        failure: vec![
            TxnOp::Delete {
                path: "/ledger/7".into(),
                expected_version: None,
            },
            TxnOp::Delete {
                path: "/ledger/none".into(),
                expected_version: None,
            },
        ],
    };
    let failed = client.txn(&stale_txn).await;
    assert!(
        matches!(failed, Err(ClientError::NotFound(_))),
        "{failed:?}"
    );
    let still = client
        .put_node("/ledger/7", b"b2", None)
        .await
        .expect("plain put");
    assert_eq!(still.version, 3, "the failed delete was rolled back");
    drop(guard_a);
    guard_b.unlock().await.expect("unlock");
    sb.close().await.expect("close b");
}

/// Reentrant mode: the holding task locks again without a second node,
/// and the lock stays held until the last hold is given back; another
/// task of the same handle waits meanwhile.
pub async fn reentrant_hold_count(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    const NAME: &str = "reentrant/1";
    let sa = Session::open(a, "a", TTL).await.expect("open a");
    let sb = Session::open(b, "b", TTL).await.expect("open b");
    let lock = Mutex::new(&sa, NAME).reentrant();
    let first = lock.lock().await.expect("lock");
    let second = within("a re-entry", lock.lock()).await.expect("re-enter");
    let third = lock.try_lock().await.expect("re-enter by try_lock");
    assert_eq!(lock.hold_count(), 3);
    assert_eq!(first.fencing_token(), second.fencing_token());
    let state = sa.client().lock_state(NAME).await.expect("state");
    assert!(state.waiters.is_empty(), "a re-entry queued: {state:?}");
    // Another task of this handle is not the owner: it waits.
    let other = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock().await.map(drop) })
    };
    let refused = other.await.expect("task");
    assert!(
        matches!(refused, Err(ClientError::LockHeld(_))),
        "{refused:?}"
    );
    // Two of three holds given back: still held, B cannot take it.
    second.unlock().await.expect("give back");
    drop(third);
    assert_eq!(lock.hold_count(), 1);
    let other = Mutex::new(&sb, NAME);
    let held = other.try_lock().await;
    assert!(matches!(held, Err(ClientError::LockHeld(_))), "{held:?}");
    let state = sa.client().lock_state(NAME).await.expect("state");
    assert_eq!(state.holder.map(|h| h.session), Some(Some(sa.id())));
    // The last one releases.
    first.unlock().await.expect("release");
    assert_eq!(lock.hold_count(), 0);
    let taken = other.try_lock().await.expect("b takes it");
    taken.unlock().await.expect("unlock");
    sa.close().await.expect("close a");
    sb.close().await.expect("close b");
}

/// A watch from a read's revision misses nothing written after the read
/// (even before the watch started), sees puts and deletes of the node's
/// children in revision order, and a watch from a revision the member no
/// longer keeps gets `Compacted` and ends.
pub async fn watch_after_read(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    use raftlock_client::{Txn, TxnOp, WatchEvent};
    let put = |path: &str, data: &[u8]| TxnOp::Put {
        path: path.to_string(),
        data: data.to_vec(),
        session: None,
        sequential: false,
        expected_version: None,
    };
    let run = |ops: Vec<TxnOp>| Txn {
        success: ops,
        ..Txn::default()
    };
    b.put_node("/svc/a", b"1", None).await.expect("put a");
    let (node, revision) = a.read_node("/svc/a").await.expect("read");
    assert_eq!((node.data.as_slice(), node.version), (&b"1"[..], 1));
    assert!(revision >= node.mod_revision);
    // Written after the read, before the watch starts: still seen.
    b.put_node("/svc/b", b"2", None).await.expect("put b");
    let mut watch = a.watch("/svc", Some(revision));
    b.put_node("/svc/a", b"3", None).await.expect("update a");
    let delete = TxnOp::Delete {
        path: "/svc/b".to_string(),
        expected_version: None,
    };
    b.txn(&run(vec![delete])).await.expect("delete b");
    // Not a child of /svc: not reported.
    b.put_node("/other", b"x", None).await.expect("put other");
    b.put_node("/svc/c", b"4", None).await.expect("put c");
    let mut seen = Vec::new();
    let mut last = revision;
    for _ in 0..4 {
        let event = within("a watch event", watch.next()).await;
        let (r, what) = match event {
            Some(Ok(WatchEvent::Put {
                revision,
                path,
                node,
            })) => (revision, format!("put {path} {:?}", node.data)),
            Some(Ok(WatchEvent::Delete { revision, path })) => (revision, format!("delete {path}")),
            other => panic!("{other:?}"),
        };
        assert!(r > last, "revisions increase: {r} after {last}");
        last = r;
        seen.push(what);
    }
    assert_eq!(
        seen,
        [
            format!("put /svc/b {:?}", b"2"),
            format!("put /svc/a {:?}", b"3"),
            "delete /svc/b".to_string(),
            format!("put /svc/c {:?}", b"4"),
        ]
    );
    // Push the first revisions out of every member's history (10,000
    // changes kept): 128 puts per transaction, the API's most.
    for batch in 0..80 {
        let ops = (0..128)
            .map(|i| put(&format!("/bulk/{batch}-{i}"), b"x"))
            .collect();
        b.txn(&run(ops)).await.expect("bulk writes");
    }
    // The member `a` watches through may lag the writes: poll until its
    // history dropped the revision (a bounded wait, not a sleep).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut old = a.watch("/svc", Some(revision));
        match within("the compaction notice", old.next()).await {
            Some(Ok(WatchEvent::Compacted { floor })) => {
                assert!(floor > revision, "floor {floor} above {revision}");
                assert!(old.next().await.is_none(), "the stream ends");
                break;
            }
            other => assert!(
                Instant::now() < deadline,
                "no compaction notice, got {other:?}"
            ),
        }
    }
}

/// Lock-delay through the `Mutex` builder: another delay is refused
/// while the lock is queued, and a holder's session closed by someone
/// else keeps the lock from the next in line for the delay.
pub async fn lock_delay(a: Arc<dyn LockClient>, b: Arc<dyn LockClient>) {
    let delay = Duration::from_millis(1_500);
    let stuck = Session::open(a, "stuck", TTL).await.expect("open a");
    let next = Session::open(b.clone(), "next", TTL).await.expect("open b");
    let held = Mutex::new(&stuck, "ledger")
        .with_lock_delay(delay)
        .lock()
        .await
        .expect("a holds");
    let other = Mutex::new(&next, "ledger")
        .with_lock_delay(Duration::from_millis(500))
        .try_lock()
        .await;
    assert!(
        matches!(other, Err(ClientError::BadRequest(_))),
        "another delay must be refused: {other:?}"
    );
    let closing = Instant::now();
    b.close_session(stuck.id())
        .await
        .expect("closed by someone else");
    let during = Mutex::new(&next, "ledger").state().await.expect("state");
    assert!(
        during.held_off && during.holder.is_none(),
        "held off during the delay: {during:?}"
    );
    assert_eq!(during.lock_delay, Some(delay));
    let guard = within(
        "the grant after the delay",
        Mutex::new(&next, "ledger").lock(),
    )
    .await
    .expect("b holds");
    assert!(
        closing.elapsed() >= delay,
        "granted {:?} after the close, inside the delay",
        closing.elapsed()
    );
    let after = Mutex::new(&next, "ledger").state().await.expect("state");
    assert!(
        !after.held_off && after.holder.is_some(),
        "granted: {after:?}"
    );
    guard.unlock().await.expect("unlock");
    drop(held);
}
