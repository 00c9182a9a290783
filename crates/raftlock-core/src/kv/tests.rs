//! The key space's meaning, by example and against a model.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::command::{Command, Response};
use crate::error::CoreError;
use crate::state::StateMachine;

fn open(sm: &mut StateMachine, id: u128) {
    let open = Command::OpenSession {
        id: SessionId(id),
        owner: "etcd".into(),
        ttl_ms: 5_000,
    };
    assert!(sm.apply(&open).result.is_ok());
}

fn kv(sm: &mut StateMachine, op: KvOp) -> Result<KvResponseOp, CoreError> {
    match sm.apply(&Command::Kv(op)).result {
        Ok(Response::Kv(r)) => Ok(r.op),
        Ok(other) => panic!("unexpected {other:?}"),
        Err(e) => Err(e),
    }
}

fn put(sm: &mut StateMachine, key: &str, value: &str) -> KvResponseOp {
    kv(
        sm,
        KvOp::Put(PutRequest {
            key: key.into(),
            value: value.into(),
            prev_kv: true,
            ..PutRequest::default()
        }),
    )
    .expect("put")
}

fn range(sm: &StateMachine, req: RangeRequest) -> Result<RangeResult, CoreError> {
    sm.kv().range(&req, sm.revision())
}

fn prefix(p: &str) -> RangeRequest {
    RangeRequest {
        key: p.into(),
        range_end: prefix_end(p.as_bytes()),
        ..RangeRequest::default()
    }
}

fn keys(r: &RangeResult) -> Vec<String> {
    r.kvs
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
        .collect()
}

#[test]
fn puts_count_versions_and_share_the_global_revision() {
    let mut sm = StateMachine::new();
    open(&mut sm, 1); // revision 1: a session, not a key
    assert_eq!(put(&mut sm, "k", "a"), KvResponseOp::Put { prev_kv: None });
    let KvResponseOp::Put {
        prev_kv: Some(prev),
    } = put(&mut sm, "k", "b")
    else {
        panic!("prev_kv asked for")
    };
    assert_eq!(
        (prev.value.as_slice(), prev.version, prev.mod_revision),
        (&b"a"[..], 1, 2)
    );
    let now = sm.kv().get(b"k").expect("exists");
    assert_eq!(
        (now.create_revision, now.mod_revision, now.version),
        (2, 3, 2)
    );
    assert_eq!(sm.revision(), 3);
}

#[test]
fn ranges_sort_limit_filter_and_count() {
    let mut sm = StateMachine::new();
    for (k, v) in [("p/b", "2"), ("p/a", "3"), ("p/c", "1"), ("q", "0")] {
        put(&mut sm, k, v);
    }
    put(&mut sm, "p/b", "9"); // revision 5
    let all = range(&sm, prefix("p/")).expect("range");
    assert_eq!(
        (keys(&all), all.count, all.more),
        (vec!["p/a".into(), "p/b".into(), "p/c".into()], 3, false)
    );
    let by_mod_desc = range(
        &sm,
        RangeRequest {
            sort_order: SortOrder::Descend,
            sort_target: SortTarget::Mod,
            limit: 2,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert_eq!(keys(&by_mod_desc), vec!["p/b", "p/c"]);
    assert!(by_mod_desc.more);
    assert_eq!(by_mod_desc.count, 3);
    // A target other than the key sorts ascending by default.
    let by_value = range(
        &sm,
        RangeRequest {
            sort_target: SortTarget::Value,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert_eq!(keys(&by_value), vec!["p/c", "p/a", "p/b"]);
    let old = range(
        &sm,
        RangeRequest {
            max_create_revision: 2,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert_eq!(keys(&old), vec!["p/a", "p/b"]);
    let modded = range(
        &sm,
        RangeRequest {
            min_mod_revision: 5,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert_eq!(keys(&modded), vec!["p/b"]);
    let counted = range(
        &sm,
        RangeRequest {
            count_only: true,
            limit: 1,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert!(counted.kvs.is_empty());
    // Without a sort order, etcd sorts by a non-key target only the first
    // limit + 1 keys in key order (p/a 3, p/b 9): p/a, not p/c.
    let quirk = range(
        &sm,
        RangeRequest {
            sort_target: SortTarget::Value,
            limit: 1,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert_eq!((keys(&quirk), quirk.more), (vec!["p/a".to_string()], true));
    // etcd reads no keys for count_only, so its limit cuts nothing off.
    assert_eq!((counted.count, counted.more), (3, false));
    let bare = range(
        &sm,
        RangeRequest {
            keys_only: true,
            ..prefix("p/")
        },
    )
    .expect("range");
    assert!(bare.kvs.iter().all(|kv| kv.value.is_empty()));
    let from = range(
        &sm,
        RangeRequest {
            key: b"p/c".to_vec(),
            range_end: vec![0],
            ..RangeRequest::default()
        },
    )
    .expect("range");
    assert_eq!(keys(&from), vec!["p/c", "q"]);
}

#[test]
fn past_revisions_read_as_they_were_until_compacted() {
    let mut sm = StateMachine::new();
    put(&mut sm, "a", "1"); // 1
    put(&mut sm, "b", "1"); // 2
    put(&mut sm, "a", "2"); // 3
    let del = KvOp::DeleteRange(DeleteRangeRequest {
        key: b"b".to_vec(),
        prev_kv: true,
        ..Default::default()
    });
    let KvResponseOp::DeleteRange {
        deleted: 1,
        prev_kvs,
    } = kv(&mut sm, del).expect("delete")
    else {
        panic!("one deleted")
    };
    assert_eq!(prev_kvs[0].key, b"b"); // 4
    let at = |sm: &StateMachine, revision| {
        range(
            sm,
            RangeRequest {
                revision,
                ..prefix("")
            },
        )
    };
    let at2 = at(&sm, 2).expect("kept");
    assert_eq!(keys(&at2), vec!["a", "b"]);
    assert_eq!(at2.kvs[0].value, b"1");
    assert_eq!(at2.revision, 4, "the header carries the newest revision");
    assert_eq!(keys(&at(&sm, 4).expect("now")), vec!["a"]);
    assert!(matches!(
        at(&sm, 5),
        Err(CoreError::FutureRevision {
            requested: 5,
            current: 4
        })
    ));
    kv(&mut sm, KvOp::Compact { revision: 3 }).expect("compact"); // 5
    assert!(matches!(
        at(&sm, 2),
        Err(CoreError::Compacted {
            compact_revision: 3
        })
    ));
    assert_eq!(keys(&at(&sm, 3).expect("at the floor")), vec!["a", "b"]);
    assert!(matches!(
        kv(&mut sm, KvOp::Compact { revision: 3 }),
        Err(CoreError::Compacted { .. })
    ));
    assert!(matches!(sm.kv().events_since(2, b"a", b""), Err(3)));
    let events = sm.kv().events_since(3, b"\0", b"\0").expect("kept");
    assert_eq!(
        events
            .iter()
            .map(|e| (e.kind, e.revision()))
            .collect::<Vec<_>>(),
        vec![(KvEventKind::Put, 3), (KvEventKind::Delete, 4)]
    );
    assert_eq!(events[1].prev.as_ref().map(|p| p.version), Some(1));
}

#[test]
fn a_session_end_deletes_its_leased_keys_in_the_history() {
    let mut sm = StateMachine::new();
    open(&mut sm, 7);
    let leased = |key: &str| {
        KvOp::Put(PutRequest {
            key: key.into(),
            value: b"x".to_vec(),
            lease: Some(SessionId(7)),
            ..Default::default()
        })
    };
    kv(&mut sm, leased("l/1")).expect("put");
    kv(&mut sm, leased("l/2")).expect("put");
    put(&mut sm, "l/3", "kept");
    assert_eq!(sm.kv().lease_keys(SessionId(7)).len(), 2);
    let missing = KvOp::Put(PutRequest {
        key: b"z".to_vec(),
        lease: Some(SessionId(8)),
        ..Default::default()
    });
    assert_eq!(
        kv(&mut sm, missing),
        Err(CoreError::SessionNotFound(SessionId(8)))
    );
    let ended = sm.apply(&Command::ExpireSession { id: SessionId(7) });
    assert!(ended.result.is_ok());
    assert_eq!(keys(&range(&sm, prefix("l/")).expect("range")), vec!["l/3"]);
    let events = sm
        .kv()
        .events_since(ended.revision, b"l/", b"l0")
        .expect("kept");
    assert_eq!(events.len(), 2);
    assert!(events
        .iter()
        .all(|e| e.kind == KvEventKind::Delete && e.revision() == ended.revision));
    sm.check_invariants().expect("consistent");
}

#[test]
fn transactions_take_one_branch_whole_or_fail_without_a_change() {
    let mut sm = StateMachine::new();
    put(&mut sm, "k", "v"); // 1
    let cmp = |target| KvCompare {
        result: KvCompareResult::Equal,
        target,
        key: b"k".to_vec(),
        range_end: vec![],
    };
    let txn = TxnRequest {
        compare: vec![
            cmp(KvCompareTarget::Version(1)),
            cmp(KvCompareTarget::Value(b"v".to_vec())),
        ],
        success: vec![
            KvRequest::Put(PutRequest {
                key: b"a".to_vec(),
                value: b"1".to_vec(),
                ..Default::default()
            }),
            KvRequest::Range(prefix("")),
            KvRequest::Txn(TxnRequest {
                compare: vec![KvCompare {
                    result: KvCompareResult::Equal,
                    target: KvCompareTarget::Create(0),
                    key: b"b".to_vec(),
                    range_end: vec![],
                }],
                success: vec![KvRequest::Put(PutRequest {
                    key: b"b".to_vec(),
                    ..Default::default()
                })],
                failure: vec![],
            }),
        ],
        failure: vec![KvRequest::DeleteRange(DeleteRangeRequest {
            key: b"k".to_vec(),
            ..Default::default()
        })],
    };
    let KvResponseOp::Txn {
        succeeded: true,
        responses,
    } = kv(&mut sm, KvOp::Txn(txn.clone())).expect("txn")
    else {
        panic!("compares hold")
    };
    let KvResponseOp::Range(seen) = &responses[1] else {
        panic!("a range")
    };
    assert_eq!(
        keys(seen),
        vec!["a", "k"],
        "a range sees the txn's own earlier put"
    );
    assert_eq!(sm.revision(), 2);
    assert_eq!(
        sm.kv().get(b"b").map(|kv| kv.mod_revision),
        Some(2),
        "one revision for the whole txn"
    );
    // Now the version is 1 still but "a" and "b" exist: the failure branch runs.
    let again = KvOp::Txn(TxnRequest {
        compare: vec![cmp(KvCompareTarget::Version(2))],
        ..txn.clone()
    });
    assert!(matches!(
        kv(&mut sm, again).expect("txn"),
        KvResponseOp::Txn {
            succeeded: false,
            ..
        }
    ));
    assert!(sm.kv().get(b"k").is_none());
    // A put on a missing lease fails the whole transaction.
    let before = sm.clone();
    let bad = KvOp::Txn(TxnRequest {
        compare: vec![],
        success: vec![
            KvRequest::Put(PutRequest {
                key: b"x".to_vec(),
                ..Default::default()
            }),
            KvRequest::Put(PutRequest {
                key: b"y".to_vec(),
                lease: Some(SessionId(3)),
                ..Default::default()
            }),
        ],
        failure: vec![],
    });
    assert_eq!(
        kv(&mut sm, bad),
        Err(CoreError::SessionNotFound(SessionId(3)))
    );
    assert_eq!(sm, before);
    let twice = KvOp::Txn(TxnRequest {
        compare: vec![],
        success: vec![
            KvRequest::Put(PutRequest {
                key: b"x".to_vec(),
                ..Default::default()
            }),
            KvRequest::Put(PutRequest {
                key: b"x".to_vec(),
                ..Default::default()
            }),
        ],
        failure: vec![],
    });
    assert!(matches!(kv(&mut sm, twice), Err(CoreError::Invalid(_))));
    // A value compare on a missing key always fails; a version one sees 0.
    let missing = |target| {
        KvOp::Txn(TxnRequest {
            compare: vec![KvCompare {
                result: KvCompareResult::Equal,
                target,
                key: b"nope".to_vec(),
                range_end: vec![],
            }],
            ..TxnRequest::default()
        })
    };
    assert!(matches!(
        kv(&mut sm, missing(KvCompareTarget::Value(vec![]))),
        Ok(KvResponseOp::Txn {
            succeeded: false,
            ..
        })
    ));
    assert!(matches!(
        kv(&mut sm, missing(KvCompareTarget::Version(0))),
        Ok(KvResponseOp::Txn {
            succeeded: true,
            ..
        })
    ));
}

#[test]
fn ignore_value_and_lease_keep_them_and_need_the_key() {
    let mut sm = StateMachine::new();
    open(&mut sm, 5);
    kv(
        &mut sm,
        KvOp::Put(PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            lease: Some(SessionId(5)),
            ..Default::default()
        }),
    )
    .expect("put");
    kv(
        &mut sm,
        KvOp::Put(PutRequest {
            key: b"k".to_vec(),
            ignore_value: true,
            ignore_lease: true,
            ..Default::default()
        }),
    )
    .expect("put");
    let k = sm.kv().get(b"k").expect("exists");
    assert_eq!(
        (k.value.as_slice(), k.lease, k.version),
        (&b"v"[..], Some(SessionId(5)), 2)
    );
    kv(
        &mut sm,
        KvOp::Put(PutRequest {
            key: b"k".to_vec(),
            value: b"w".to_vec(),
            ..Default::default()
        }),
    )
    .expect("put");
    assert!(
        sm.kv().lease_keys(SessionId(5)).is_empty(),
        "a put without a lease detaches it"
    );
    let missing = KvOp::Put(PutRequest {
        key: b"m".to_vec(),
        ignore_value: true,
        ..Default::default()
    });
    assert_eq!(kv(&mut sm, missing), Err(CoreError::KeyNotFound));
    sm.check_invariants().expect("consistent");
}

#[test]
fn a_transaction_checks_its_puts_before_its_ranges_as_etcd_does() {
    let mut sm = StateMachine::new();
    put(&mut sm, "k", "v");
    let future = RangeRequest {
        key: b"k".to_vec(),
        revision: sm.revision() + 1,
        ..RangeRequest::default()
    };
    let keep_missing = |lease: Option<SessionId>| {
        KvRequest::Put(PutRequest {
            key: b"m".to_vec(),
            ignore_lease: lease.is_none(),
            lease,
            ..Default::default()
        })
    };
    // A range at a future revision, then a put that cannot be applied:
    // the put's error, in a branch and in a nested transaction.
    let txn = |put: KvRequest| TxnRequest {
        success: vec![KvRequest::Range(future.clone()), put],
        ..TxnRequest::default()
    };
    assert_eq!(
        kv(&mut sm, KvOp::Txn(txn(keep_missing(None)))),
        Err(CoreError::KeyNotFound)
    );
    let nested = KvRequest::Txn(txn(keep_missing(Some(SessionId(9)))));
    assert_eq!(
        kv(
            &mut sm,
            KvOp::Txn(TxnRequest {
                success: vec![KvRequest::Range(future.clone()), nested],
                ..TxnRequest::default()
            })
        ),
        Err(CoreError::SessionNotFound(SessionId(9)))
    );
    // With only the range wrong, the range's.
    assert!(matches!(
        kv(&mut sm, KvOp::Txn(txn(KvRequest::Range(future.clone())))),
        Err(CoreError::FutureRevision { .. })
    ));
    sm.check_invariants().expect("consistent");
}

#[test]
fn the_history_is_bounded_and_its_floor_rises() {
    let mut sm = StateMachine::new();
    for i in 0..(HISTORY_MAX_EVENTS + 10) {
        put(&mut sm, "k", &i.to_string());
    }
    let floor = sm.kv().compact_revision();
    assert_eq!(floor, 11);
    assert!(matches!(
        range(
            &sm,
            RangeRequest {
                revision: 10,
                ..prefix("")
            }
        ),
        Err(CoreError::Compacted { .. })
    ));
    let at = range(
        &sm,
        RangeRequest {
            revision: floor,
            ..prefix("")
        },
    )
    .expect("kept");
    assert_eq!(at.kvs[0].value, b"10");
    sm.check_invariants().expect("consistent");
}

/// Random key-space writes against a model that keeps every revision's
/// whole state: ranges at every kept revision must match it.
#[derive(Debug, Clone)]
enum Step {
    Put(u8, u8, bool),
    Delete(u8, Option<u8>),
    Txn(u8, u64, u8, u8),
    Compact(u64),
    Expire,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..6, any::<u8>(), any::<bool>()).prop_map(|(k, v, l)| Step::Put(k, v, l)),
        2 => (0u8..6, proptest::option::of(0u8..7)).prop_map(|(k, e)| Step::Delete(k, e)),
        2 => (0u8..6, 0u64..4, 0u8..6, any::<u8>()).prop_map(|(k, v, p, x)| Step::Txn(k, v, p, x)),
        1 => (0u64..40).prop_map(Step::Compact),
        1 => Just(Step::Expire),
    ]
}

type Model = BTreeMap<Vec<u8>, KeyValue>;

fn key(k: u8) -> Vec<u8> {
    vec![b'a' + k]
}

proptest! {
    #[test]
    fn ranges_at_every_kept_revision_match_a_model(steps in prop::collection::vec(step(), 1..60)) {
        let mut sm = StateMachine::new();
        let mut lease = 1u128;
        open(&mut sm, lease);
        let mut states: Vec<(u64, Model)> = vec![(sm.revision(), Model::new())];
        for s in steps {
            let op = match s {
                Step::Put(k, v, l) => Command::Kv(KvOp::Put(PutRequest { key: key(k), value: vec![v], lease: l.then_some(SessionId(lease)), ..Default::default() })),
                Step::Delete(k, end) => Command::Kv(KvOp::DeleteRange(DeleteRangeRequest { key: key(k), range_end: end.map(key).unwrap_or_default(), prev_kv: true })),
                Step::Txn(k, v, p, x) => Command::Kv(KvOp::Txn(TxnRequest {
                    compare: vec![KvCompare { result: KvCompareResult::Equal, target: KvCompareTarget::Version(v), key: key(k), range_end: vec![] }],
                    success: vec![KvRequest::Put(PutRequest { key: key(p), value: vec![x], ..Default::default() })],
                    failure: vec![KvRequest::DeleteRange(DeleteRangeRequest { key: key(p), ..Default::default() })],
                })),
                Step::Compact(r) => Command::Kv(KvOp::Compact { revision: r }),
                Step::Expire => {
                    let expire = Command::ExpireSession { id: SessionId(lease) };
                    lease += 1;
                    sm.apply(&expire);
                    let now: Model = range(&sm, prefix("")).expect("now").kvs.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
                    states.push((sm.revision(), now));
                    Command::OpenSession { id: SessionId(lease), owner: "etcd".into(), ttl_ms: 5_000 }
                }
            };
            sm.apply(&op);
            prop_assert!(sm.check_invariants().is_ok(), "{:?}", sm.check_invariants());
            let now: Model = range(&sm, prefix("")).expect("now").kvs.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
            states.push((sm.revision(), now));
            // Every revision since the floor reads as it was recorded.
            for (rev, model) in &states {
                if *rev == 0 {
                    continue;
                }
                match range(&sm, RangeRequest { revision: *rev, ..prefix("") }) {
                    Ok(r) => {
                        prop_assert!(*rev >= sm.kv().compact_revision());
                        let got: Model = r.kvs.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
                        prop_assert_eq!(&got, model, "at revision {}", rev);
                    }
                    Err(CoreError::Compacted { .. }) => prop_assert!(*rev < sm.kv().compact_revision()),
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
            // Replaying the kept events from the floor onto that state gives now.
            let floor = sm.kv().compact_revision().max(1);
            if let Some((_, base)) = states.iter().rev().find(|(r, _)| *r < floor) {
                let mut replay = base.clone();
                for e in sm.kv().events_since(floor, b"\0", b"\0").expect("kept") {
                    match e.kind {
                        KvEventKind::Put => { replay.insert(e.kv.key.clone(), e.kv); }
                        KvEventKind::Delete => { replay.remove(&e.kv.key); }
                    }
                }
                prop_assert_eq!(&replay, &states.last().expect("now").1);
            }
        }
    }
}
