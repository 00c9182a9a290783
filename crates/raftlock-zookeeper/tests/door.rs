//! The ZooKeeper door over a real three-member in-process cluster, with
//! the codec as the client: each test talks to more than one member, so
//! what one member answers is what the replicated state says.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use raftlock_zookeeper::door::DoorConfig;
use raftlock_zookeeper::wire::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_stats_read_the_same_on_every_member() {
    let cluster = Cluster::start(door_config()).await;
    let addrs = cluster.addrs();
    client(move || {
        let mut a = Conn::connect(addrs[0], 10_000);
        let mut b = Conn::connect(addrs[1], 10_000);
        assert_eq!(
            created(a.ok(OpRequest::Create(create(
                "/app",
                b"cfg",
                CreateMode::Persistent
            )))),
            "/app"
        );
        // create2 answers the stat; the ephemeral owner is the session.
        let body = a.ok(OpRequest::Create2(create(
            "/app/e",
            b"",
            CreateMode::Ephemeral,
        )));
        let ReplyBody::Create2 { path, stat } = body else {
            panic!("{body:?}");
        };
        assert_eq!(path, "/app/e");
        assert_eq!(stat.ephemeral_owner, a.session_id);
        assert_eq!((stat.version, stat.czxid), (0, stat.mzxid));
        // Sequential names: ten digits of the parent's cversion (one
        // child, `e`, so far), appended.
        for (prefix, name) in [
            ("/app/q-", "/app/q-0000000001"),
            ("/app/q-", "/app/q-0000000002"),
            ("/app/x", "/app/x0000000003"),
        ] {
            let mode = CreateMode::EphemeralSequential;
            assert_eq!(
                created(b.ok(OpRequest::Create(create(prefix, b"", mode)))),
                name
            );
        }
        // Another member reads the same node and stat.
        let body = b.ok(OpRequest::GetData(pw("/app/e", false)));
        let ReplyBody::GetData { data, stat: seen } = body else {
            panic!("{body:?}");
        };
        assert_eq!((data, seen), (Some(vec![]), stat));
        // setData with a version; the wrong version is BADVERSION.
        let set = |version| {
            OpRequest::SetData(SetDataRequest {
                path: "/app".into(),
                data: Some(b"v2".to_vec()),
                version,
            })
        };
        let stat = stat_of(b.ok(set(0)));
        assert_eq!(
            (stat.version, stat.data_length, stat.num_children),
            (1, 2, 4)
        );
        assert!(stat.mzxid > stat.czxid);
        b.fails(set(0), ErrorCode::BadVersion);
        let body = b.ok(OpRequest::GetChildren2(pw("/app", false)));
        let ReplyBody::GetChildren2 {
            children,
            stat: parent,
        } = body
        else {
            panic!("{body:?}");
        };
        assert_eq!(
            children,
            ["e", "q-0000000001", "q-0000000002", "x0000000003"]
        );
        assert_eq!(parent, stat);
        // ZooKeeper's errors for the tree's refusals.
        a.fails(
            OpRequest::Create(create("/app", b"", CreateMode::Persistent)),
            ErrorCode::NodeExists,
        );
        a.fails(
            OpRequest::Create(create("/none/x", b"", CreateMode::Persistent)),
            ErrorCode::NoNode,
        );
        a.fails(
            OpRequest::Create(create("/app/e/c", b"", CreateMode::Persistent)),
            ErrorCode::NoChildrenForEphemerals,
        );
        // A missing parent comes first, as in ZooKeeper (the cross-check
        // saw it answer NONODE here); under an existing one the bad name
        // is BADARGUMENTS.
        a.fails(
            OpRequest::Create(create("/bad/", b"", CreateMode::Persistent)),
            ErrorCode::NoNode,
        );
        a.fails(
            OpRequest::Create(create("/app/", b"", CreateMode::Persistent)),
            ErrorCode::BadArguments,
        );
        a.fails(
            OpRequest::Create(create("/locks", b"", CreateMode::Persistent)),
            ErrorCode::BadArguments,
        );
        let delete = |path: &str, version| {
            OpRequest::Delete(DeleteRequest {
                path: path.into(),
                version,
            })
        };
        a.fails(delete("/app", -1), ErrorCode::NotEmpty);
        a.fails(delete("/app/q-0000000001", 3), ErrorCode::BadVersion);
        a.ok(delete("/app/q-0000000001", 0));
        a.fails(
            OpRequest::Exists(pw("/app/q-0000000001", false)),
            ErrorCode::NoNode,
        );
        // Names with `_` and Unicode, as lock recipes make them.
        let lock = "/app/_c_4f2a-lock-é";
        assert_eq!(
            created(a.ok(OpRequest::Create(create(lock, b"", CreateMode::Persistent)))),
            lock
        );
        // ZooKeeper's own subtree: under the root, read-only, config empty.
        let body = b.ok(OpRequest::GetChildren(pw("/", false)));
        assert_eq!(
            body,
            ReplyBody::GetChildren {
                children: vec!["app".into(), "zookeeper".into()]
            }
        );
        let body = b.ok(OpRequest::GetData(pw(CONFIG_NODE, false)));
        assert!(matches!(body, ReplyBody::GetData { data: Some(d), .. } if d.is_empty()));
        b.fails(
            OpRequest::Create(create("/zookeeper/x", b"", CreateMode::Persistent)),
            ErrorCode::BadArguments,
        );
        // The open ACL is what every node has; setACL is answered with the stat.
        let body = b.ok(OpRequest::GetAcl(PathRequest {
            path: "/app".into(),
        }));
        assert!(
            matches!(body, ReplyBody::GetAcl { ref acl, .. } if acl == &[Acl::open_unsafe()]),
            "{body:?}"
        );
        let set_acl = |version| {
            OpRequest::SetAcl(SetAclRequest {
                path: "/app".into(),
                acl: vec![Acl::open_unsafe()],
                version,
            })
        };
        assert_eq!(stat_of(b.ok(set_acl(0))).version, 1);
        b.fails(set_acl(3), ErrorCode::BadVersion);
        // sync answers its path.
        assert_eq!(
            b.ok(OpRequest::Sync(PathRequest {
                path: "/app".into()
            })),
            ReplyBody::Sync {
                path: "/app".into()
            }
        );
        // getAllChildrenNumber counts at every depth (`/zookeeper` and its
        // two nodes included, as ZooKeeper does); a missing path is NONODE.
        assert!(matches!(
            b.ok(OpRequest::GetAllChildrenNumber(PathRequest { path: "/".into() })),
            ReplyBody::AllChildrenNumber { total_number } if total_number >= 3
        ));
        b.fails(
            OpRequest::GetAllChildrenNumber(PathRequest {
                path: "/nowhere".into(),
            }),
            ErrorCode::NoNode,
        );
        b.fails(
            OpRequest::Create(CreateRequest {
                acl: vec![],
                ..create("/noacl", b"", CreateMode::Persistent)
            }),
            ErrorCode::InvalidAcl,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_come_before_the_answer_that_shows_the_change() {
    let cluster = Cluster::start(door_config()).await;
    // The watcher on a follower: its own writes are answered by the
    // leader, possibly before the follower applied them, and their events
    // must still come first.
    let leader = cluster
        .inner
        .leader(Duration::from_secs(20))
        .await
        .expect("a leader");
    let follower = if leader == 1 { 2 } else { 1 };
    let (watcher_addr, writer_addr) = (cluster.addr(follower), cluster.addr(leader as usize));
    client(move || {
        let mut watcher = Conn::connect(watcher_addr, 10_000);
        let mut writer = Conn::connect(writer_addr, 10_000);
        writer.ok(OpRequest::Create(create(
            "/w",
            b"1",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/w/gone",
            b"",
            CreateMode::Persistent,
        )));
        watcher.ok(OpRequest::GetData(pw("/w", true)));
        watcher.fails(OpRequest::Exists(pw("/later", true)), ErrorCode::NoNode);
        watcher.ok(OpRequest::GetChildren(pw("/w", true)));
        watcher.ok(OpRequest::Exists(pw("/w/gone", true)));
        assert!(watcher.take_events().is_empty());
        // Changes through another member.
        let set = OpRequest::SetData(SetDataRequest {
            path: "/w".into(),
            data: Some(b"2".to_vec()),
            version: -1,
        });
        writer.ok(set.clone());
        writer.ok(OpRequest::Create(create(
            "/later",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Delete(DeleteRequest {
            path: "/w/gone".into(),
            version: -1,
        }));
        // The watcher's next answer shows every change: each event first.
        let body = watcher.ok(OpRequest::GetData(pw("/w", false)));
        assert!(matches!(body, ReplyBody::GetData { data: Some(ref d), .. } if d == b"2"));
        assert_eq!(
            watcher.take_events(),
            [
                (EventType::NodeDataChanged, "/w".to_string()),
                (EventType::NodeCreated, "/later".to_string()),
                (EventType::NodeDeleted, "/w/gone".to_string()),
                (EventType::NodeChildrenChanged, "/w".to_string()),
            ]
        );
        // The watcher's own write: the event precedes the write's answer,
        // not only a later read's.
        watcher.ok(OpRequest::GetData(pw("/w", true)));
        let own = OpRequest::SetData(SetDataRequest {
            path: "/w".into(),
            data: Some(b"3".to_vec()),
            version: -1,
        });
        watcher.ok(own);
        assert_eq!(
            watcher.take_events(),
            [(EventType::NodeDataChanged, "/w".to_string())]
        );
        // One-shot: the same change again fires nothing.
        writer.ok(set);
        watcher.ok(OpRequest::Sync(PathRequest { path: "/".into() }));
        watcher.ok(OpRequest::GetData(pw("/w", false)));
        assert!(watcher.take_events().is_empty());
        // A watch fires without a request from the watcher too.
        watcher.ok(OpRequest::Exists(pw("/w", true)));
        writer.ok(OpRequest::Delete(DeleteRequest {
            path: "/later".into(),
            version: -1,
        }));
        writer.ok(OpRequest::Delete(DeleteRequest {
            path: "/w".into(),
            version: -1,
        }));
        let event = match watcher.read() {
            Some(ServerPacket::Reply(Reply {
                body: ReplyBody::Notification(e),
                ..
            })) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeDeleted, "/w")
        );
        // setWatches from a reconnect: what changed since the zxid fires at once.
        let zxid = writer.last_zxid;
        writer.ok(OpRequest::Create(create("/w", b"", CreateMode::Persistent)));
        let r = watcher.call_xid(
            xid::SET_WATCHES,
            OpRequest::SetWatches(SetWatches {
                relative_zxid: zxid,
                data_watches: vec![],
                exist_watches: vec!["/w".into(), "/never".into()],
                child_watches: vec![],
            }),
        );
        assert_eq!(r.header.err, ErrorCode::Ok);
        assert_eq!(
            watcher.take_events(),
            [(EventType::NodeCreated, "/w".to_string())]
        );
        writer.ok(OpRequest::Create(create(
            "/never",
            b"",
            CreateMode::Persistent,
        )));
        watcher.ok(OpRequest::Sync(PathRequest { path: "/".into() }));
        watcher.ok(OpRequest::Exists(pw("/never", false)));
        assert_eq!(
            watcher.take_events(),
            [(EventType::NodeCreated, "/never".to_string())]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_is_all_or_nothing_with_zookeepers_results() {
    let cluster = Cluster::start(door_config()).await;
    let addrs = cluster.addrs();
    client(move || {
        let mut c = Conn::connect(addrs[1], 10_000);
        c.ok(OpRequest::Create(create("/m", b"", CreateMode::Persistent)));
        c.ok(OpRequest::Create(create("/m/c2", b"x", CreateMode::Persistent)));
        let set = |path: &str, version| MultiOp::SetData(SetDataRequest { path: path.into(), data: Some(b"1".to_vec()), version });
        // The third operation fails: nothing applies, the results say which.
        let r = c.call(OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Check(CheckVersionRequest { path: "/m/c2".into(), version: 0 }),
                MultiOp::Create(create("/m/m1", b"", CreateMode::Persistent)),
                set("/m/c2", 99),
                MultiOp::Delete(DeleteRequest { path: "/m/c2".into(), version: -1 }),
            ],
        }));
        assert_eq!(r.header.err, ErrorCode::Ok);
        let expected: Vec<OpResult> = [ErrorCode::Ok, ErrorCode::Ok, ErrorCode::BadVersion, ErrorCode::RuntimeInconsistency]
            .into_iter()
            .map(|err| OpResult::Error { err })
            .collect();
        assert_eq!(r.body, ReplyBody::Multi(MultiResponse { results: expected }));
        c.fails(OpRequest::Exists(pw("/m/m1", false)), ErrorCode::NoNode);
        // A multi that succeeds: a create, then a child of it, in one go.
        let r = c.ok(OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Create(create("/m/m1", b"", CreateMode::Persistent)),
                MultiOp::Create2(create("/m/m1/k-", b"", CreateMode::PersistentSequential)),
                MultiOp::Check(CheckVersionRequest { path: "/m/c2".into(), version: 0 }),
                set("/m/m1", 0),
                MultiOp::Delete(DeleteRequest { path: "/m/c2".into(), version: 0 }),
            ],
        }));
        let ReplyBody::Multi(MultiResponse { results }) = r else {
            panic!("{r:?}");
        };
        assert_eq!(results[0], OpResult::Create { path: "/m/m1".into() });
        assert_eq!(results[1], OpResult::Create { path: "/m/m1/k-0000000000".into() });
        assert_eq!(results[2], OpResult::Check);
        assert!(matches!(&results[3], OpResult::SetData { stat } if stat.version == 1 && stat.num_children == 1));
        assert_eq!(results[4], OpResult::Delete);
        // Every operation of one multi commits at one zxid.
        let stat = stat_of(c.ok(OpRequest::Exists(pw("/m/m1/k-0000000000", false))));
        let parent = stat_of(c.ok(OpRequest::Exists(pw("/m/m1", false))));
        assert_eq!((stat.czxid, parent.czxid, parent.mzxid), (stat.czxid, stat.czxid, stat.czxid));
        // multiRead: per-read results, a missing node as its error.
        let r = c.ok(OpRequest::MultiRead(MultiRequest {
            ops: vec![MultiOp::GetChildren(pw("/m", false)), MultiOp::GetData(pw("/m/gone", false))],
        }));
        assert_eq!(
            r,
            ReplyBody::Multi(MultiResponse {
                results: vec![
                    OpResult::GetChildren { children: vec!["m1".into()] },
                    OpResult::Error { err: ErrorCode::NoNode },
                ]
            })
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_move_between_members_and_end_with_their_ephemerals() {
    let cluster = Cluster::start(door_config()).await;
    let addrs = cluster.addrs();
    client(move || {
        let mut a = Conn::connect(addrs[0], 10_000);
        let mut other = Conn::connect(addrs[1], 10_000);
        a.ok(OpRequest::Create(create(
            "/eph",
            b"",
            CreateMode::Ephemeral,
        )));
        let (id, passwd, zxid) = (a.session_id, a.passwd.clone(), a.last_zxid);
        drop(a);
        // The session resumes on another member with its id and password.
        let (mut moved, rsp) = Conn::resume(addrs[2], id, passwd.clone(), zxid);
        let rsp = rsp.expect("resumed");
        assert_eq!(
            (rsp.session_id, rsp.time_out > 0, rsp.read_only),
            (id, true, None)
        );
        let stat = stat_of(moved.ok(OpRequest::Exists(pw("/eph", false))));
        assert_eq!(stat.ephemeral_owner, id);
        // A wrong password names no session: timeout 0, then closed.
        let mut wrong = passwd.clone();
        wrong[15] ^= 1;
        let (mut refused, rsp) = Conn::resume(addrs[1], id, wrong, 0);
        assert_eq!(rsp.expect("an answer").time_out, 0);
        assert!(refused.is_closed());
        // A client that saw a later zxid than the member is refused.
        let (_, rsp) = Conn::resume(addrs[1], id, passwd.clone(), i64::MAX);
        assert!(rsp.is_none(), "{rsp:?}");
        // closeSession removes the ephemerals at once.
        let r = moved.call(OpRequest::CloseSession);
        assert_eq!(r.header.err, ErrorCode::Ok);
        assert!(moved.is_closed());
        other.fails(OpRequest::Exists(pw("/eph", false)), ErrorCode::NoNode);
        let (_, rsp) = Conn::resume(addrs[0], id, passwd, 0);
        assert_eq!(
            rsp.expect("an answer").time_out,
            0,
            "a closed session is expired"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_session_and_silence_expires_it() {
    let cluster = Cluster::start(door_config()).await;
    let addrs = cluster.addrs();
    client(move || {
        let mut observer = Conn::connect(addrs[1], 10_000);
        let mut c = Conn::connect(addrs[0], 400);
        c.ok(OpRequest::Create(create(
            "/short",
            b"",
            CreateMode::Ephemeral,
        )));
        // Pings for several TTLs keep it.
        let until = Instant::now() + Duration::from_millis(1_500);
        while Instant::now() < until {
            c.ping();
            std::thread::sleep(Duration::from_millis(100));
        }
        observer.ok(OpRequest::Exists(pw("/short", false)));
        // Silent: the door closes the connection, the leader expires the
        // session and its node goes.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = observer.call(OpRequest::Exists(pw("/short", false)));
            if r.header.err == ErrorCode::NoNode {
                break;
            }
            assert!(Instant::now() < deadline, "the session never expired");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(c.is_closed());
        let (_, rsp) = Conn::resume(addrs[2], c.session_id, c.passwd.clone(), 0);
        assert_eq!(rsp.expect("an answer").time_out, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_closes_only_its_connection_and_connections_are_capped() {
    let cluster = Cluster::start(door_config()).await;
    let addr = cluster.addr(1);
    // A second door on member 1 that serves one connection at a time.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let one = DoorConfig {
        max_connections: 1,
        ..door_config()
    };
    let capped =
        raftlock_zookeeper::door::Door::spawn(cluster.inner.node(1).clone(), listener, one)
            .expect("door");
    let capped = capped.local_addr();
    client(move || {
        let mut good = Conn::connect(addr, 10_000);
        // A frame over 1 MiB.
        let mut big = Conn::connect(addr, 10_000);
        big.stream
            .write_all(&(2 * 1024 * 1024i32).to_be_bytes())
            .expect("send");
        assert!(big.is_closed());
        // A frame whose request does not decode (a truncated create).
        let mut bad = Conn::connect(addr, 10_000);
        bad.stream
            .write_all(&[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0])
            .expect("send");
        assert!(bad.is_closed());
        // An opcode nobody knows is answered, and the connection goes on.
        let mut unknown = Conn::connect(addr, 10_000);
        unknown
            .stream
            .write_all(&[0, 0, 0, 8, 0, 0, 0, 7, 0, 0, 0, 77])
            .expect("send");
        let Some(ServerPacket::Reply(r)) = unknown.read() else {
            panic!("no answer");
        };
        assert_eq!((r.header.xid, r.header.err), (7, ErrorCode::Unimplemented));
        // So is a create whose flags name no mode (ZooKeeper: BADARGUMENTS).
        let mut frame = Vec::new();
        frame.extend_from_slice(&8i32.to_be_bytes()); // xid
        frame.extend_from_slice(&1i32.to_be_bytes()); // create
        frame.extend_from_slice(&2i32.to_be_bytes());
        frame.extend_from_slice(b"/f");
        frame.extend_from_slice(&(-1i32).to_be_bytes()); // no data
        frame.extend_from_slice(&0i32.to_be_bytes()); // no ACL
        frame.extend_from_slice(&99i32.to_be_bytes()); // flags
        let len = i32::try_from(frame.len()).expect("small");
        unknown.stream.write_all(&len.to_be_bytes()).expect("send");
        unknown.stream.write_all(&frame).expect("send");
        let Some(ServerPacket::Reply(r)) = unknown.read() else {
            panic!("no answer");
        };
        assert_eq!((r.header.xid, r.header.err), (8, ErrorCode::BadArguments));
        good.ok(OpRequest::Exists(pw("/", false)));
        // The capped door: its one connection is served, a second closed.
        let mut first = Conn::connect(capped, 10_000);
        let (mut second, rsp) = Conn::resume(capped, 0, vec![0; 16], 0);
        assert!(rsp.is_none() && second.is_closed());
        first.ok(OpRequest::Exists(pw("/", false)));
    })
    .await;
}

fn add_watch(conn: &mut Conn, path: &str, mode: AddWatchMode) {
    let body = conn.ok(OpRequest::AddWatch(AddWatchRequest {
        path: path.into(),
        mode,
    }));
    assert_eq!(body, ReplyBody::AddWatch { err: ErrorCode::Ok });
}

fn watches(path: &str, watcher_type: WatcherType) -> WatchesRequest {
    WatchesRequest {
        path: path.into(),
        watcher_type,
    }
}

fn set(path: &str, data: &[u8]) -> OpRequest {
    OpRequest::SetData(SetDataRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        version: -1,
    })
}

fn delete(path: &str) -> OpRequest {
    OpRequest::Delete(DeleteRequest {
        path: path.into(),
        version: -1,
    })
}

fn events(list: &[(EventType, &str)]) -> Vec<(EventType, String)> {
    list.iter().map(|(e, p)| (*e, p.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_watches_fire_every_time_until_removed() {
    let cluster = Cluster::start(door_config()).await;
    let (watcher_addr, writer_addr) = (cluster.addr(2), cluster.addr(3));
    client(move || {
        use EventType::*;
        let mut watcher = Conn::connect(watcher_addr, 10_000);
        let mut writer = Conn::connect(writer_addr, 10_000);
        // Set on paths that do not exist yet, as ZooKeeper allows.
        add_watch(&mut watcher, "/pw", AddWatchMode::Persistent);
        add_watch(&mut watcher, "/rw", AddWatchMode::PersistentRecursive);
        writer.ok(OpRequest::Create(create(
            "/pw",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(set("/pw", b"1"));
        writer.ok(set("/pw", b"2"));
        writer.ok(OpRequest::Create(create(
            "/pw/c",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/pw/c/g",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(set("/pw/c", b"x"));
        writer.ok(delete("/pw/c/g"));
        writer.ok(delete("/pw/c"));
        writer.ok(OpRequest::Create(create(
            "/rw",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/rw/a",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/rw/a/b",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(set("/rw/a/b", b"1"));
        writer.ok(delete("/rw/a/b"));
        writer.ok(OpRequest::Create(create(
            "/rwx",
            b"",
            CreateMode::Persistent,
        )));
        watcher.ok(OpRequest::Sync(PathRequest { path: "/".into() }));
        watcher.ok(OpRequest::Exists(pw("/", false)));
        // A persistent watch: the node's own events and its children's
        // list, every time, not grandchildren. A recursive one: every
        // node below, never NodeChildrenChanged.
        assert_eq!(
            watcher.take_events(),
            events(&[
                (NodeCreated, "/pw"),
                (NodeDataChanged, "/pw"),
                (NodeDataChanged, "/pw"),
                (NodeChildrenChanged, "/pw"),
                (NodeChildrenChanged, "/pw"),
                (NodeCreated, "/rw"),
                (NodeCreated, "/rw/a"),
                (NodeCreated, "/rw/a/b"),
                (NodeDataChanged, "/rw/a/b"),
                (NodeDeleted, "/rw/a/b"),
            ])
        );
        // A one-shot watch beside a persistent one: one event.
        watcher.ok(OpRequest::GetData(pw("/rw/a", true)));
        writer.ok(set("/rw/a", b"1"));
        watcher.ok(OpRequest::Exists(pw("/rw/a", false)));
        assert_eq!(watcher.take_events(), events(&[(NodeDataChanged, "/rw/a")]));
        // checkWatches and removeWatches address ZooKeeper's two lists:
        // data (with the persistent and recursive watches) and child
        // (with the persistent one).
        watcher.ok(OpRequest::CheckWatches(watches("/rw", WatcherType::Data)));
        watcher.fails(
            OpRequest::CheckWatches(watches("/rw", WatcherType::Children)),
            ErrorCode::NoWatcher,
        );
        watcher.ok(OpRequest::CheckWatches(watches(
            "/pw",
            WatcherType::Children,
        )));
        watcher.fails(
            OpRequest::CheckWatches(watches("/nowhere", WatcherType::Any)),
            ErrorCode::NoWatcher,
        );
        watcher.ok(OpRequest::RemoveWatches(watches("/pw", WatcherType::Any)));
        watcher.fails(
            OpRequest::RemoveWatches(watches("/pw", WatcherType::Any)),
            ErrorCode::NoWatcher,
        );
        watcher.ok(OpRequest::RemoveWatches(watches("/rw", WatcherType::Data)));
        writer.ok(set("/pw", b"3"));
        writer.ok(OpRequest::Create(create(
            "/rw/a/c",
            b"",
            CreateMode::Persistent,
        )));
        watcher.ok(OpRequest::Sync(PathRequest { path: "/".into() }));
        watcher.ok(OpRequest::Exists(pw("/", false)));
        assert!(watcher.take_events().is_empty());
        // A bad path is refused.
        watcher.fails(
            OpRequest::AddWatch(AddWatchRequest {
                path: "no-slash".into(),
                mode: AddWatchMode::Persistent,
            }),
            ErrorCode::BadArguments,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_watches2_brings_persistent_watches_to_another_member() {
    let cluster = Cluster::start(door_config()).await;
    let (first, second, writer_addr) = (cluster.addr(1), cluster.addr(2), cluster.addr(3));
    client(move || {
        use EventType::*;
        let mut writer = Conn::connect(writer_addr, 10_000);
        writer.ok(OpRequest::Create(create(
            "/s2",
            b"",
            CreateMode::Persistent,
        )));
        let old = Conn::connect(first, 10_000);
        let (id, passwd, zxid) = (old.session_id, old.passwd.clone(), writer.last_zxid);
        drop(old);
        // The client reconnects elsewhere and re-registers its watches.
        let (mut moved, rsp) = Conn::resume(second, id, passwd, zxid);
        assert!(rsp.is_some_and(|r| r.time_out > 0));
        let r = moved.call_xid(
            xid::SET_WATCHES,
            OpRequest::SetWatches2(SetWatches2 {
                relative_zxid: zxid,
                data_watches: vec![],
                exist_watches: vec![],
                child_watches: vec![],
                persistent_watches: vec!["/s2".into()],
                persistent_recursive_watches: vec!["/s2r".into()],
            }),
        );
        assert_eq!(r.header.err, ErrorCode::Ok);
        // Persistent watches are registered again without firing.
        assert!(moved.take_events().is_empty());
        writer.ok(OpRequest::Create(create(
            "/s2/k",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/s2r",
            b"",
            CreateMode::Persistent,
        )));
        writer.ok(OpRequest::Create(create(
            "/s2r/k",
            b"",
            CreateMode::Persistent,
        )));
        moved.ok(OpRequest::Sync(PathRequest { path: "/".into() }));
        moved.ok(OpRequest::Exists(pw("/", false)));
        assert_eq!(
            moved.take_events(),
            events(&[
                (NodeChildrenChanged, "/s2"),
                (NodeCreated, "/s2r"),
                (NodeCreated, "/s2r/k"),
            ])
        );
        moved.ok(OpRequest::CheckWatches(watches("/s2r", WatcherType::Data)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_ephemerals_lists_the_sessions_own_ephemerals() {
    let cluster = Cluster::start(door_config()).await;
    let (a_addr, b_addr) = (cluster.addr(1), cluster.addr(2));
    client(move || {
        let mut a = Conn::connect(a_addr, 10_000);
        let mut b = Conn::connect(b_addr, 10_000);
        a.ok(OpRequest::Create(create(
            "/eph",
            b"",
            CreateMode::Persistent,
        )));
        a.ok(OpRequest::Create(create(
            "/eph/x",
            b"",
            CreateMode::Ephemeral,
        )));
        a.ok(OpRequest::Create(create("/e1", b"", CreateMode::Ephemeral)));
        b.ok(OpRequest::Create(create(
            "/eph/y",
            b"",
            CreateMode::Ephemeral,
        )));
        let list =
            |conn: &mut Conn, prefix: &str| match conn.ok(OpRequest::GetEphemerals(PathRequest {
                path: prefix.into(),
            })) {
                ReplyBody::Ephemerals { ephemerals } => ephemerals,
                other => panic!("{other:?}"),
            };
        assert_eq!(list(&mut a, "/"), ["/e1", "/eph/x"]);
        assert_eq!(list(&mut a, "/eph"), ["/eph/x"]);
        assert_eq!(list(&mut b, "/"), ["/eph/y"]);
        assert!(list(&mut b, "/e1").is_empty());
        a.fails(
            OpRequest::GetEphemerals(PathRequest { path: "bad".into() }),
            ErrorCode::BadArguments,
        );
    })
    .await;
}

fn get_acl(conn: &mut Conn, path: &str) -> (Vec<Acl>, Stat) {
    match conn.ok(OpRequest::GetAcl(PathRequest { path: path.into() })) {
        ReplyBody::GetAcl { acl, stat } => (acl, stat),
        other => panic!("{other:?}"),
    }
}

fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> OpRequest {
    OpRequest::SetAcl(SetAclRequest {
        path: path.into(),
        acl,
        version,
    })
}

fn with_acl(path: &str, acl: Vec<Acl>) -> CreateRequest {
    CreateRequest {
        acl,
        ..create(path, b"", CreateMode::Persistent)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_are_stored_checked_as_zookeeper_does_and_not_enforced() {
    let cluster = Cluster::start(door_config()).await;
    let addrs = cluster.addrs();
    client(move || {
        let mut a = Conn::connect(addrs[0], 10_000);
        let mut b = Conn::connect(addrs[1], 10_000);
        let mixed = vec![
            Acl::new(perms::READ, "world", "anyone"),
            Acl::new(perms::ALL, "ip", "10.0.0.0/8"),
            Acl::new(perms::ADMIN, "digest", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="),
        ];
        a.ok(OpRequest::Create2(with_acl("/acl", mixed.clone())));
        // Another member returns it as given, with the stat.
        let (got, stat) = get_acl(&mut b, "/acl");
        assert_eq!((got, stat.aversion), (mixed.clone(), 0));
        // Duplicates are dropped, the first kept.
        let open = Acl::open_unsafe();
        let dup = vec![
            open.clone(),
            Acl::new(perms::READ, "world", "anyone"),
            open.clone(),
        ];
        a.ok(OpRequest::Create(with_acl("/dup", dup)));
        let (got, _) = get_acl(&mut b, "/dup");
        assert_eq!(
            got,
            [open.clone(), Acl::new(perms::READ, "world", "anyone")]
        );
        // setACL replaces it and counts aversion, with its version check.
        let read_only = vec![Acl::new(perms::READ, "world", "anyone")];
        assert_eq!(
            stat_of(b.ok(set_acl("/acl", read_only.clone(), 0))).aversion,
            1
        );
        b.fails(set_acl("/acl", mixed.clone(), 0), ErrorCode::BadVersion);
        assert_eq!(get_acl(&mut a, "/acl").0, read_only);
        // Not enforced: a read-only ACL still lets this client write.
        a.ok(set("/acl", b"written"));
        a.ok(OpRequest::Create(create(
            "/acl/child",
            b"",
            CreateMode::Persistent,
        )));
        // Refused before the tree is consulted, as ZooKeeper refuses them.
        let invalid = [
            vec![],
            vec![Acl::new(perms::ALL, "world", "nobody")],
            vec![Acl::new(perms::ALL, "digest", "bob")],
            vec![Acl::new(perms::ALL, "ip", "300.1.1.1")],
            vec![Acl::new(perms::ALL, "ip", "10.0.0.0/33")],
            vec![Acl::new(perms::ALL, "sasl", "bob")],
            vec![Acl::new(perms::ALL, "auth", "")],
            vec![open.clone(), Acl::new(perms::ALL, "nosuch", "x")],
        ];
        for bad in invalid {
            a.fails(
                OpRequest::Create(with_acl("/bad", bad.clone())),
                ErrorCode::InvalidAcl,
            );
            // Even where the parent is missing: the ACL is checked first.
            a.fails(
                OpRequest::Create(with_acl("/no/parent", bad.clone())),
                ErrorCode::InvalidAcl,
            );
            a.fails(set_acl("/acl", bad.clone(), -1), ErrorCode::InvalidAcl);
            a.fails(set_acl("/missing", bad, -1), ErrorCode::InvalidAcl);
        }
        let (got, stat) = get_acl(&mut b, "/acl");
        assert_eq!((got, stat.aversion), (read_only.clone(), 1));
        a.fails(OpRequest::Exists(pw("/bad", false)), ErrorCode::NoNode);
        // The open ACL set back reads as the open ACL.
        b.ok(set_acl("/acl", vec![open.clone()], 1));
        assert_eq!(get_acl(&mut a, "/acl").0, std::slice::from_ref(&open));
        // Inside a multi: stored with the create; an invalid one is
        // reported at its index and nothing applies.
        let r = a.ok(OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Create(with_acl("/macl", read_only.clone())),
                MultiOp::Create2(create("/macl/c", b"", CreateMode::Persistent)),
            ],
        }));
        assert!(
            matches!(r, ReplyBody::Multi(ref m) if m.results.len() == 2),
            "{r:?}"
        );
        assert_eq!(get_acl(&mut b, "/macl").0, read_only);
        assert_eq!(get_acl(&mut b, "/macl/c").0, std::slice::from_ref(&open));
        let r = a.ok(OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Create(create("/m2", b"", CreateMode::Persistent)),
                MultiOp::Create(with_acl("/m3", vec![Acl::new(perms::ALL, "ip", "x")])),
            ],
        }));
        let errors: Vec<OpResult> = [ErrorCode::Ok, ErrorCode::InvalidAcl]
            .into_iter()
            .map(|err| OpResult::Error { err })
            .collect();
        assert_eq!(r, ReplyBody::Multi(MultiResponse { results: errors }));
        a.fails(OpRequest::Exists(pw("/m2", false)), ErrorCode::NoNode);
        // An earlier operation that fails in the tree is reported first,
        // as ZooKeeper goes in order.
        let r = a.ok(OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Create(create("/m2", b"", CreateMode::Persistent)),
                MultiOp::Delete(DeleteRequest {
                    path: "/gone".into(),
                    version: -1,
                }),
                MultiOp::Create(with_acl("/m3", vec![])),
            ],
        }));
        let errors: Vec<OpResult> = [
            ErrorCode::Ok,
            ErrorCode::NoNode,
            ErrorCode::RuntimeInconsistency,
        ]
        .into_iter()
        .map(|err| OpResult::Error { err })
        .collect();
        assert_eq!(r, ReplyBody::Multi(MultiResponse { results: errors }));
        a.fails(OpRequest::Exists(pw("/m2", false)), ErrorCode::NoNode);
        // Without tokens `addauth digest` is accepted unchecked, and an
        // ACL's `auth` entry becomes the id ZooKeeper gives it:
        // `digest:user:base64(sha1("user:password"))`, each id once.
        let r = a.call_xid(
            xid::AUTH,
            OpRequest::Auth(AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"bob:secret".to_vec(),
            }),
        );
        assert_eq!(r.header.err, ErrorCode::Ok);
        let auth = vec![Acl::new(perms::READ | perms::WRITE, "auth", "")];
        a.ok(OpRequest::Create(with_acl("/mine", auth.clone())));
        let bob = Acl::new(
            perms::READ | perms::WRITE,
            "digest",
            "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=",
        );
        assert_eq!(get_acl(&mut b, "/mine").0, [bob]);
        // Another connection has authenticated as nobody.
        b.fails(set_acl("/mine", auth, -1), ErrorCode::InvalidAcl);
    })
    .await;
}
