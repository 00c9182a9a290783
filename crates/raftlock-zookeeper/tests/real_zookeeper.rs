//! The codec against a real ZooKeeper 3.8 server (Debian's `zookeeper`
//! package): used as a client, every request it encodes must be accepted
//! and every answer the server gives must decode to what ZooKeeper's docs
//! promise; and the bytes the real kazoo client sends (recorded by a
//! proxy between kazoo and the server) must decode as requests.
//!
//! Each test starts its own standalone server on a free port (TTL nodes
//! enabled; `support/zookeeper_server.rs`), waits for it by polling its
//! port, and kills it at the end. Without `java` or ZooKeeper's jar the
//! tests print why and return, except in CI (`CI=true`), where they fail.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use raftlock_zookeeper::wire::*;
use tokio_util::codec::{Decoder, Encoder};

#[path = "support/zookeeper_server.rs"]
mod zookeeper_server;
use zookeeper_server::ZooKeeper;

#[path = "support/wire_client.rs"]
mod wire_client;
use wire_client::*;

/// A new session on `addr`, as `read_only` asks.
fn connect(addr: &str, read_only: Option<bool>) -> (Conn, ConnectResponse) {
    let (conn, rsp) = Conn::handshake(
        addr,
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out: 30_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only,
        },
    );
    (conn, rsp.expect("a connect response"))
}

fn is_sequential(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| n.len() == 10 && n.bytes().all(|b| b.is_ascii_digit()))
}

#[test]
fn the_codec_speaks_to_a_real_zookeeper() {
    let Some(zk) = ZooKeeper::start() else {
        return;
    };
    let addr = zk.addr();

    // Handshake: the readOnly byte comes back exactly when it was sent.
    let (mut c, rsp) = connect(&addr, Some(false));
    assert_eq!(rsp.read_only, Some(false));
    assert_eq!(rsp.time_out, 30_000);
    assert_ne!(rsp.session_id, 0);
    assert_eq!(rsp.passwd.len(), 16);
    let (mut old, old_rsp) = connect(&addr, None);
    assert_eq!(
        old_rsp.read_only, None,
        "no readOnly byte for a client that sent none"
    );
    assert_ne!(old_rsp.session_id, rsp.session_id);

    // create (opcode 1) in each mode create accepts.
    let body = c.ok(OpRequest::Create(create(
        "/zkw",
        b"",
        CreateMode::Persistent,
    )));
    assert_eq!(
        body,
        ReplyBody::Create {
            path: "/zkw".into()
        }
    );
    let body = c.ok(OpRequest::Create(create(
        "/zkw/p",
        b"p",
        CreateMode::Persistent,
    )));
    assert_eq!(
        body,
        ReplyBody::Create {
            path: "/zkw/p".into()
        }
    );
    let body = c.ok(OpRequest::Create(create(
        "/zkw/e",
        b"e",
        CreateMode::Ephemeral,
    )));
    assert_eq!(
        body,
        ReplyBody::Create {
            path: "/zkw/e".into()
        }
    );
    for (prefix, mode) in [
        ("/zkw/ps-", CreateMode::PersistentSequential),
        ("/zkw/es-", CreateMode::EphemeralSequential),
    ] {
        match c.ok(OpRequest::Create(create(prefix, b"", mode))) {
            ReplyBody::Create { path } => assert!(is_sequential(&path, prefix), "{path}"),
            other => panic!("{other:?}"),
        }
    }
    // Flags outside CreateMode: the server answers BADARGUMENTS (and our
    // decoder refuses them as a typed error).
    let mut raw = BytesMut::new();
    Request {
        xid: 0,
        op: OpRequest::Create(create("/zkw/bad", b"", CreateMode::Persistent)),
    }
    .encode(&mut raw);
    let n = raw.len();
    raw[n - 4..].copy_from_slice(&7i32.to_be_bytes());
    assert_eq!(
        Request::decode(&raw).map_err(|e| e.error),
        Err(WireError::UnknownCreateMode(7))
    );
    let bad_xid = 9_000;
    let mut framed = BytesMut::new();
    write_frame(&mut framed, DEFAULT_MAX_FRAME, |w| {
        w.int(bad_xid);
        w.extend_from_slice(&raw[4..]);
    })
    .expect("frame");
    c.stream.write_all(&framed).expect("send");
    // The codec did not see this request go out: give it the xid's type.
    let mut sink = BytesMut::new();
    c.codec
        .encode(
            ClientPacket::Request(Request {
                xid: bad_xid,
                op: OpRequest::Create(create("/x", b"", CreateMode::Persistent)),
            }),
            &mut sink,
        )
        .expect("encode");
    match c.read() {
        Some(ServerPacket::Reply(r)) => {
            assert_eq!(r.header.xid, bad_xid);
            assert_eq!(r.header.err, ErrorCode::BadArguments);
            assert_eq!(r.body, ReplyBody::Empty);
        }
        other => panic!("{other:?}"),
    }

    // create2 (15), createContainer (19), createTTL (21): Create2Response.
    let r = c.call(OpRequest::Create2(create(
        "/zkw/c2",
        b"hi",
        CreateMode::Persistent,
    )));
    assert_eq!(r.header.err, ErrorCode::Ok);
    let ReplyBody::Create2 { path: p, stat } = r.body else {
        panic!("{:?}", r.body);
    };
    assert_eq!(p, "/zkw/c2");
    assert_eq!(
        (stat.version, stat.data_length, stat.num_children),
        (0, 2, 0)
    );
    assert_eq!(stat.czxid, r.header.zxid);
    assert_eq!(stat.mzxid, stat.czxid);
    assert_eq!(stat.ephemeral_owner, 0);
    let created = stat;
    match c.ok(OpRequest::Create2(create(
        "/zkw/e2",
        b"",
        CreateMode::Ephemeral,
    ))) {
        ReplyBody::Create2 { stat, .. } => assert_eq!(stat.ephemeral_owner, c.session_id),
        other => panic!("{other:?}"),
    }
    match c.ok(OpRequest::CreateContainer(create(
        "/zkw/box",
        b"",
        CreateMode::Container,
    ))) {
        ReplyBody::Create2 { path, .. } => assert_eq!(path, "/zkw/box"),
        other => panic!("{other:?}"),
    }
    for (p, mode) in [
        ("/zkw/ttl", CreateMode::PersistentWithTtl),
        ("/zkw/ttls-", CreateMode::PersistentSequentialWithTtl),
    ] {
        let req = CreateTtlRequest {
            path: p.into(),
            data: Some(b"t".to_vec()),
            acl: vec![Acl::open_unsafe()],
            mode,
            ttl: 600_000,
        };
        match c.ok(OpRequest::CreateTtl(req)) {
            ReplyBody::Create2 { path, stat } => {
                assert!(path == p || is_sequential(&path, p), "{path}");
                // The server keeps the TTL in the node's ephemeralOwner
                // but shows clients 0 there for TTL and container nodes.
                assert_eq!(stat.ephemeral_owner, 0, "{stat:?}");
                assert_eq!(stat.data_length, 1);
            }
            other => panic!("{other:?}"),
        }
    }
    c.fails(
        OpRequest::Create(create("/zkw/p", b"", CreateMode::Persistent)),
        ErrorCode::NodeExists,
    );
    c.fails(
        OpRequest::Create(create("/zkw/e/child", b"", CreateMode::Persistent)),
        ErrorCode::NoChildrenForEphemerals,
    );
    c.fails(
        OpRequest::Create(create("/nope/x", b"", CreateMode::Persistent)),
        ErrorCode::NoNode,
    );

    // getData with a watch, then setData fires it.
    let body = c.ok(OpRequest::GetData(pw("/zkw/c2", true)));
    assert_eq!(
        body,
        ReplyBody::GetData {
            data: Some(b"hi".to_vec()),
            stat: created
        }
    );
    let stat = stat_of(c.ok(OpRequest::SetData(SetDataRequest {
        path: "/zkw/c2".into(),
        data: Some(b"hello".to_vec()),
        version: 0,
    })));
    assert_eq!((stat.version, stat.data_length), (1, 5));
    assert_eq!(stat.czxid, created.czxid);
    assert!(stat.mzxid > created.mzxid);
    assert_eq!(
        c.event(),
        WatcherEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: "/zkw/c2".into()
        }
    );
    c.fails(
        OpRequest::SetData(SetDataRequest {
            path: "/zkw/c2".into(),
            data: None,
            version: 0,
        }),
        ErrorCode::BadVersion,
    );

    // exists: a stat, or NONODE with no body.
    assert_eq!(stat_of(c.ok(OpRequest::Exists(pw("/zkw/c2", false)))), stat);
    c.fails(OpRequest::Exists(pw("/zkw/nope", true)), ErrorCode::NoNode);
    // ... which left a watch on the missing node: creating it fires.
    c.ok(OpRequest::Create(create(
        "/zkw/nope",
        b"",
        CreateMode::Persistent,
    )));
    assert_eq!(c.event().event_type, EventType::NodeCreated);

    // getChildren2 and getChildren.
    let (children, parent) = match c.ok(OpRequest::GetChildren2(pw("/zkw", true))) {
        ReplyBody::GetChildren2 { children, stat } => (children, stat),
        other => panic!("{other:?}"),
    };
    assert_eq!(parent.num_children as usize, children.len());
    for name in ["p", "e", "c2", "e2", "box", "ttl", "nope"] {
        assert!(children.iter().any(|c| c == name), "{name} in {children:?}");
    }
    assert_eq!(
        children.iter().filter(|c| is_sequential(c, "ps-")).count(),
        1
    );
    match c.ok(OpRequest::GetChildren(pw("/zkw", false))) {
        ReplyBody::GetChildren { children: again } => {
            let (mut a, mut b) = (again, children.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
        other => panic!("{other:?}"),
    }

    // A multi whose third operation fails: nothing applies, the results
    // say which one failed.
    let r = c.call(OpRequest::Multi(MultiRequest {
        ops: vec![
            MultiOp::Check(CheckVersionRequest {
                path: "/zkw/c2".into(),
                version: 1,
            }),
            MultiOp::Create(create("/zkw/m1", b"", CreateMode::Persistent)),
            MultiOp::SetData(SetDataRequest {
                path: "/zkw/c2".into(),
                data: None,
                version: 99,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/zkw/p".into(),
                version: -1,
            }),
        ],
    }));
    assert_eq!(r.header.err, ErrorCode::Ok, "the header of a failed multi");
    assert_eq!(
        r.body,
        ReplyBody::Multi(MultiResponse {
            results: vec![
                OpResult::Error { err: ErrorCode::Ok },
                OpResult::Error { err: ErrorCode::Ok },
                OpResult::Error {
                    err: ErrorCode::BadVersion
                },
                OpResult::Error {
                    err: ErrorCode::RuntimeInconsistency
                },
            ]
        })
    );
    c.fails(OpRequest::Exists(pw("/zkw/m1", false)), ErrorCode::NoNode);
    // A multi that succeeds: each result in its own shape.
    let r = c.call(OpRequest::Multi(MultiRequest {
        ops: vec![
            MultiOp::Create(create("/zkw/m1", b"", CreateMode::Persistent)),
            MultiOp::Create2(create("/zkw/m2", b"22", CreateMode::Persistent)),
            MultiOp::Check(CheckVersionRequest {
                path: "/zkw/c2".into(),
                version: 1,
            }),
            MultiOp::SetData(SetDataRequest {
                path: "/zkw/m1".into(),
                data: Some(b"1".to_vec()),
                version: 0,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/zkw/nope".into(),
                version: 0,
            }),
        ],
    }));
    assert_eq!(r.header.err, ErrorCode::Ok);
    let ReplyBody::Multi(MultiResponse { results }) = r.body else {
        panic!("{:?}", r.body);
    };
    assert_eq!(results.len(), 5);
    assert_eq!(
        results[0],
        OpResult::Create {
            path: "/zkw/m1".into()
        }
    );
    // ZooKeeper 3.8 answers a create2 inside a multi with a plain
    // create result (type 1, no stat), though the schema has a type-15
    // result with a stat; clients read either.
    assert_eq!(
        results[1],
        OpResult::Create {
            path: "/zkw/m2".into()
        }
    );
    assert_eq!(results[2], OpResult::Check);
    assert!(matches!(&results[3], OpResult::SetData { stat } if stat.version == 1));
    assert_eq!(results[4], OpResult::Delete);
    // The child watch set by getChildren2 fired on the first change.
    assert_eq!(
        c.event(),
        WatcherEvent {
            event_type: EventType::NodeChildrenChanged,
            state: KeeperState::SyncConnected,
            path: "/zkw".into()
        }
    );
    // multiRead: per-read results, a failed read as its error.
    let r = c.call(OpRequest::MultiRead(MultiRequest {
        ops: vec![
            MultiOp::GetData(pw("/zkw/c2", false)),
            MultiOp::GetChildren(pw("/zkw/box", false)),
            MultiOp::GetData(pw("/zkw/gone", false)),
        ],
    }));
    assert_eq!(r.header.err, ErrorCode::Ok);
    assert_eq!(
        r.body,
        ReplyBody::Multi(MultiResponse {
            results: vec![
                OpResult::GetData {
                    data: Some(b"hello".to_vec()),
                    stat
                },
                OpResult::GetChildren { children: vec![] },
                OpResult::Error {
                    err: ErrorCode::NoNode
                },
            ]
        })
    );

    // setWatches from the other session with an older zxid: the server
    // fires at once for what changed since.
    let r = old.call_xid(
        xid::SET_WATCHES,
        OpRequest::SetWatches(SetWatches {
            relative_zxid: created.mzxid,
            data_watches: vec!["/zkw/c2".into()],
            exist_watches: vec!["/zkw/later".into()],
            child_watches: vec![],
        }),
    );
    assert_eq!((r.header.err, r.body), (ErrorCode::Ok, ReplyBody::Empty));
    assert_eq!(
        old.event(),
        WatcherEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: "/zkw/c2".into()
        }
    );
    // The exist watch stays armed until the node appears.
    c.ok(OpRequest::Create(create(
        "/zkw/later",
        b"",
        CreateMode::Persistent,
    )));
    assert_eq!(old.event().event_type, EventType::NodeCreated);
    // setWatches2 with a persistent recursive watch, which then fires.
    let r = old.call_xid(
        xid::SET_WATCHES,
        OpRequest::SetWatches2(SetWatches2 {
            relative_zxid: r.header.zxid,
            persistent_recursive_watches: vec!["/zkw/box".into()],
            ..SetWatches2::default()
        }),
    );
    assert_eq!((r.header.err, r.body), (ErrorCode::Ok, ReplyBody::Empty));
    c.ok(OpRequest::Create(create(
        "/zkw/box/a",
        b"",
        CreateMode::Persistent,
    )));
    assert_eq!(old.event().path, "/zkw/box/a");

    // addWatch answers with an ErrorResponse body of 0.
    let body = old.ok(OpRequest::AddWatch(AddWatchRequest {
        path: "/zkw/p".into(),
        mode: AddWatchMode::Persistent,
    }));
    assert_eq!(body, ReplyBody::AddWatch { err: ErrorCode::Ok });
    old.ok(OpRequest::CheckWatches(WatchesRequest {
        path: "/zkw/p".into(),
        watcher_type: WatcherType::Any,
    }));
    old.ok(OpRequest::RemoveWatches(WatchesRequest {
        path: "/zkw/p".into(),
        watcher_type: WatcherType::Any,
    }));
    // (The server sends no event for a removal: the Java client makes its
    // "watch removed" events itself.)
    old.fails(
        OpRequest::CheckWatches(WatchesRequest {
            path: "/zkw/p".into(),
            watcher_type: WatcherType::Data,
        }),
        ErrorCode::NoWatcher,
    );

    // delete: bad version, not empty, then with any version.
    c.fails(
        OpRequest::Delete(DeleteRequest {
            path: "/zkw/p".into(),
            version: 5,
        }),
        ErrorCode::BadVersion,
    );
    c.fails(
        OpRequest::Delete(DeleteRequest {
            path: "/zkw".into(),
            version: -1,
        }),
        ErrorCode::NotEmpty,
    );
    let body = c.ok(OpRequest::Delete(DeleteRequest {
        path: "/zkw/p".into(),
        version: 0,
    }));
    assert_eq!(body, ReplyBody::Empty);

    // The remaining reads.
    match c.ok(OpRequest::Sync(path("/zkw"))) {
        ReplyBody::Sync { path } => assert_eq!(path, "/zkw"),
        other => panic!("{other:?}"),
    }
    match c.ok(OpRequest::GetAcl(path("/zkw/c2"))) {
        ReplyBody::GetAcl { acl, stat: s } => {
            assert_eq!(acl, vec![Acl::open_unsafe()]);
            assert_eq!(s, stat);
        }
        other => panic!("{other:?}"),
    }
    let s = stat_of(c.ok(OpRequest::SetAcl(SetAclRequest {
        path: "/zkw/c2".into(),
        acl: vec![Acl::new(perms::READ | perms::WRITE, "world", "anyone")],
        version: 0,
    })));
    assert_eq!(s.aversion, 1);
    match c.ok(OpRequest::GetAllChildrenNumber(path("/zkw/box"))) {
        ReplyBody::AllChildrenNumber { total_number } => assert_eq!(total_number, 1),
        other => panic!("{other:?}"),
    }
    match c.ok(OpRequest::GetEphemerals(path("/zkw"))) {
        ReplyBody::Ephemerals { mut ephemerals } => {
            ephemerals.sort();
            assert_eq!(ephemerals.len(), 3, "{ephemerals:?}");
            assert_eq!(ephemerals[0], "/zkw/e");
            assert_eq!(ephemerals[1], "/zkw/e2");
            assert!(is_sequential(&ephemerals[2], "/zkw/es-"));
        }
        other => panic!("{other:?}"),
    }
    match c.ok(OpRequest::WhoAmI) {
        ReplyBody::WhoAmI { client_info } => {
            assert_eq!(client_info.len(), 1, "{client_info:?}");
            assert_eq!(client_info[0].auth_scheme, "ip");
            assert_eq!(client_info[0].user, "127.0.0.1");
        }
        other => panic!("{other:?}"),
    }
    // The config read: a getData of /zookeeper/config.
    let config = Request {
        xid: 0,
        op: OpRequest::GetData(pw(request::CONFIG_NODE, false)),
    };
    assert!(config.is_get_config());
    assert!(matches!(c.ok(config.op), ReplyBody::GetData { .. }));
    // reconfig on a standalone server without reconfigEnabled.
    c.fails(
        OpRequest::Reconfig(ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some("2".into()),
            new_members: None,
            cur_config_id: -1,
        }),
        ErrorCode::ReconfigDisabled,
    );

    // auth (xid -4): a digest identity, then whoAmI lists it.
    let r = c.call_xid(
        xid::AUTH,
        OpRequest::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: b"alice:secret".to_vec(),
        }),
    );
    assert_eq!((r.header.err, r.body), (ErrorCode::Ok, ReplyBody::Empty));
    match c.ok(OpRequest::WhoAmI) {
        ReplyBody::WhoAmI { client_info } => {
            assert!(
                client_info
                    .iter()
                    .any(|i| i.auth_scheme == "digest" && i.user == "alice"),
                "{client_info:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // ping (xid -2).
    let r = c.call_xid(xid::PING, OpRequest::Ping);
    assert_eq!((r.header.err, r.body), (ErrorCode::Ok, ReplyBody::Empty));
    assert!(r.header.zxid > 0);

    // closeSession: an empty answer, then the server hangs up, and the
    // session's ephemeral nodes are gone.
    let r = c.call(OpRequest::CloseSession);
    assert_eq!((r.header.err, r.body), (ErrorCode::Ok, ReplyBody::Empty));
    assert_eq!(c.read(), None, "the server closes the connection");
    assert_eq!(c.codec.outstanding(), 0);
    old.fails(OpRequest::Exists(pw("/zkw/e", false)), ErrorCode::NoNode);
    old.fails(OpRequest::Exists(pw("/zkw/e2", false)), ErrorCode::NoNode);
    assert!(stat_of(old.ok(OpRequest::Exists(pw("/zkw/c2", false)))).version == 1);
    let r = old.call(OpRequest::CloseSession);
    assert_eq!(r.header.err, ErrorCode::Ok);
    drop(zk);
}

/// What went through the recording proxy, each direction.
#[derive(Default)]
struct Recording {
    to_server: Vec<u8>,
    to_client: Vec<u8>,
}

/// Accepts one connection on `listener`, connects it to `upstream`, and
/// copies both ways, recording the bytes, until either side closes.
fn record_one(listener: TcpListener, upstream: String, rec: Arc<Mutex<Recording>>) {
    let Ok((client, _)) = listener.accept() else {
        return;
    };
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let pump = |mut from: TcpStream, mut to: TcpStream, rec: Arc<Mutex<Recording>>, up: bool| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut r) = rec.lock() {
                            if up {
                                r.to_server.extend_from_slice(&buf[..n]);
                            } else {
                                r.to_client.extend_from_slice(&buf[..n]);
                            }
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        })
    };
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let a = pump(client, s2, rec.clone(), true);
    let b = pump(server, c2, rec, false);
    let _ = a.join();
    let _ = b.join();
}

/// A python3 that can import kazoo: `$RAFTLOCK_KAZOO_PYTHON`, or the
/// venv with kazoo from PyPI that the kazoo tests share.
fn kazoo_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RAFTLOCK_KAZOO_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kazoo-2.11.0-venv");
    raftlock_testkit::python::venv("kazoo against real ZooKeeper", &dir, &["kazoo==2.11.0"])
}

const KAZOO_SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
zk.start(timeout=15)
zk.ensure_path("/kz/a")
me = zk.create("/kz/lock-", b"me", ephemeral=True, sequence=True)
zk.create("/kz/c2", b"two", include_data=True)
data, stat = zk.get("/kz/a", watch=lambda e: None)
zk.set("/kz/a", b"x", version=stat.version)
zk.get_children("/kz", include_data=True)
zk.exists("/kz/none", watch=lambda e: None)
t = zk.transaction()
t.check("/kz/a", 1)
t.create("/kz/t1", b"1")
t.delete("/kz/none")
print(t.commit())
zk.add_auth("digest", "bob:pw")
zk.get_acls("/kz/a")
zk.sync("/kz")
zk.delete(me)
zk.stop()
zk.close()
"#;

#[test]
fn kazoos_bytes_decode() {
    let Some(zk) = ZooKeeper::start() else {
        return;
    };
    let Some(python) = kazoo_python() else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let proxy = listener.local_addr().expect("addr").to_string();
    let rec = Arc::new(Mutex::new(Recording::default()));
    let recorder = {
        let rec = rec.clone();
        let upstream = zk.addr();
        std::thread::spawn(move || record_one(listener, upstream, rec))
    };
    let out = Command::new(&python)
        .args(["-c", KAZOO_SCRIPT, &proxy])
        .output()
        .expect("run kazoo");
    assert!(
        out.status.success(),
        "kazoo failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    recorder.join().expect("recorder");
    let rec = rec.lock().expect("recording");

    // Everything kazoo sent decodes, with nothing left over.
    let mut server = ServerCodec::default();
    let mut buf = BytesMut::from(&rec.to_server[..]);
    let mut incoming = Vec::new();
    while let Some(item) = server.decode(&mut buf).expect("kazoo's frames") {
        incoming.push(item);
    }
    assert!(
        buf.is_empty(),
        "{} bytes of kazoo's left undecoded",
        buf.len()
    );
    let Some(Incoming::Connect(connect)) = incoming.first() else {
        panic!("first frame: {:?}", incoming.first());
    };
    assert_eq!(
        connect.read_only,
        Some(false),
        "kazoo sends the readOnly byte"
    );
    let requests: Vec<&Request> = incoming[1..]
        .iter()
        .map(|i| match i {
            Incoming::Request(r) => r,
            other => panic!("kazoo sent something undecodable: {other:?}"),
        })
        .collect();
    let ops: Vec<OpCode> = requests.iter().map(|r| r.op.opcode()).collect();
    for op in [
        OpCode::Create,
        OpCode::Create2,
        OpCode::GetData,
        OpCode::SetData,
        OpCode::GetChildren2,
        OpCode::Exists,
        OpCode::Multi,
        OpCode::Auth,
        OpCode::GetAcl,
        OpCode::Sync,
        OpCode::Delete,
        OpCode::CloseSession,
    ] {
        assert!(ops.contains(&op), "kazoo sent no {op:?}: {ops:?}");
    }
    let lock = requests
        .iter()
        .find_map(|r| match &r.op {
            OpRequest::Create(c) if c.path == "/kz/lock-" => Some(c),
            _ => None,
        })
        .expect("the lock node's create");
    assert_eq!(lock.mode, CreateMode::EphemeralSequential);
    assert_eq!(lock.data.as_deref(), Some(&b"me"[..]));
    let multi = requests
        .iter()
        .find_map(|r| match &r.op {
            OpRequest::Multi(m) => Some(m),
            _ => None,
        })
        .expect("the transaction");
    assert_eq!(
        multi.ops.iter().map(MultiOp::opcode).collect::<Vec<_>>(),
        vec![OpCode::Check, OpCode::Create, OpCode::Delete]
    );

    // And every answer the server gave kazoo decodes too.
    let mut client = ClientCodec::default();
    let mut sink = BytesMut::new();
    client
        .encode(ClientPacket::Connect(connect.clone()), &mut sink)
        .expect("encode");
    for r in &requests {
        client
            .encode(ClientPacket::Request((*r).clone()), &mut sink)
            .expect("encode");
    }
    let mut buf = BytesMut::from(&rec.to_client[..]);
    let mut replies = Vec::new();
    while let Some(item) = client.decode(&mut buf).expect("the server's frames") {
        replies.push(item);
    }
    assert!(buf.is_empty());
    assert!(
        matches!(replies.first(), Some(ServerPacket::Connect(c)) if c.read_only == Some(false))
    );
    assert!(
        replies.iter().any(
            |p| matches!(p, ServerPacket::Reply(Reply { body: ReplyBody::Multi(m), .. })
            if m.results.iter().all(|r| matches!(r, OpResult::Error { .. })))
        ),
        "the failed transaction's results"
    );
    assert!(replies.iter().any(|p| matches!(p,
        ServerPacket::Reply(Reply { body: ReplyBody::Notification(e), .. })
            if e.event_type == EventType::NodeDataChanged && e.path == "/kz/a")));
    drop(zk);
}
