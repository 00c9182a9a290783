//! Property tests of the wire codec: every record decodes to what was
//! encoded, whole streams survive arbitrary chunking through the codecs,
//! and no byte string makes a decoder panic.

use bytes::BytesMut;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use raftlock_zookeeper::wire::*;
use tokio_util::codec::{Decoder, Encoder};

fn path() -> impl Strategy<Value = String> {
    prop_oneof!["/[a-z0-9/_-]{0,24}", "\\PC{0,12}"]
}

fn data() -> impl Strategy<Value = Option<Vec<u8>>> {
    option::of(vec(any::<u8>(), 0..40))
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..24)
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(path(), 0..4)
}

fn stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion),
                (ephemeral_owner, data_length, num_children, pzxid),
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                data_length,
                num_children,
                pzxid,
            },
        )
}

fn id() -> impl Strategy<Value = Id> {
    (path(), path()).prop_map(|(scheme, id)| Id { scheme, id })
}

fn acl() -> impl Strategy<Value = Acl> {
    (any::<i32>(), id()).prop_map(|(perms, id)| Acl { perms, id })
}

fn acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(acl(), 0..3)
}

fn mode() -> impl Strategy<Value = CreateMode> {
    select(CreateMode::ALL)
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    select(ErrorCode::ALL)
}

fn connect_request() -> impl Strategy<Value = ConnectRequest> {
    (
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        bytes(),
        option::of(any::<bool>()),
    )
        .prop_map(
            |(protocol_version, last_zxid_seen, time_out, session_id, passwd, read_only)| {
                ConnectRequest {
                    protocol_version,
                    last_zxid_seen,
                    time_out,
                    session_id,
                    passwd,
                    read_only,
                }
            },
        )
}

fn connect_response() -> impl Strategy<Value = ConnectResponse> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        bytes(),
        option::of(any::<bool>()),
    )
        .prop_map(
            |(protocol_version, time_out, session_id, passwd, read_only)| ConnectResponse {
                protocol_version,
                time_out,
                session_id,
                passwd,
                read_only,
            },
        )
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (path(), data(), acls(), mode()).prop_map(|(path, data, acl, mode)| CreateRequest {
        path,
        data,
        acl,
        mode,
    })
}

fn create_ttl() -> impl Strategy<Value = CreateTtlRequest> {
    (path(), data(), acls(), mode(), any::<i64>()).prop_map(|(path, data, acl, mode, ttl)| {
        CreateTtlRequest {
            path,
            data,
            acl,
            mode,
            ttl,
        }
    })
}

fn path_watch() -> impl Strategy<Value = PathWatchRequest> {
    (path(), any::<bool>()).prop_map(|(path, watch)| PathWatchRequest { path, watch })
}

fn path_only() -> impl Strategy<Value = PathRequest> {
    path().prop_map(|path| PathRequest { path })
}

fn delete() -> impl Strategy<Value = DeleteRequest> {
    (path(), any::<i32>()).prop_map(|(path, version)| DeleteRequest { path, version })
}

fn set_data() -> impl Strategy<Value = SetDataRequest> {
    (path(), data(), any::<i32>()).prop_map(|(path, data, version)| SetDataRequest {
        path,
        data,
        version,
    })
}

fn check() -> impl Strategy<Value = CheckVersionRequest> {
    (path(), any::<i32>()).prop_map(|(path, version)| CheckVersionRequest { path, version })
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create().prop_map(MultiOp::Create),
        create().prop_map(MultiOp::Create2),
        create().prop_map(MultiOp::CreateContainer),
        create_ttl().prop_map(MultiOp::CreateTtl),
        delete().prop_map(MultiOp::Delete),
        set_data().prop_map(MultiOp::SetData),
        check().prop_map(MultiOp::Check),
        path_watch().prop_map(MultiOp::GetChildren),
        path_watch().prop_map(MultiOp::GetData),
    ]
}

fn multi() -> impl Strategy<Value = MultiRequest> {
    vec(multi_op(), 0..5).prop_map(|ops| MultiRequest { ops })
}

fn set_watches() -> impl Strategy<Value = SetWatches> {
    (any::<i64>(), strings(), strings(), strings()).prop_map(
        |(relative_zxid, data_watches, exist_watches, child_watches)| SetWatches {
            relative_zxid,
            data_watches,
            exist_watches,
            child_watches,
        },
    )
}

fn set_watches2() -> impl Strategy<Value = SetWatches2> {
    (set_watches(), strings(), strings()).prop_map(|(w, persistent, recursive)| SetWatches2 {
        relative_zxid: w.relative_zxid,
        data_watches: w.data_watches,
        exist_watches: w.exist_watches,
        child_watches: w.child_watches,
        persistent_watches: persistent,
        persistent_recursive_watches: recursive,
    })
}

fn watches() -> impl Strategy<Value = WatchesRequest> {
    (path(), select(WatcherType::ALL))
        .prop_map(|(path, watcher_type)| WatchesRequest { path, watcher_type })
}

fn op_request() -> impl Strategy<Value = OpRequest> {
    prop_oneof![
        create().prop_map(OpRequest::Create),
        create().prop_map(OpRequest::Create2),
        create().prop_map(OpRequest::CreateContainer),
        create_ttl().prop_map(OpRequest::CreateTtl),
        delete().prop_map(OpRequest::Delete),
        path_watch().prop_map(OpRequest::Exists),
        path_watch().prop_map(OpRequest::GetData),
        set_data().prop_map(OpRequest::SetData),
        path_only().prop_map(OpRequest::GetAcl),
        (path(), acls(), any::<i32>()).prop_map(|(path, acl, version)| OpRequest::SetAcl(
            SetAclRequest { path, acl, version }
        )),
        path_watch().prop_map(OpRequest::GetChildren),
        path_only().prop_map(OpRequest::Sync),
        Just(OpRequest::Ping),
        path_watch().prop_map(OpRequest::GetChildren2),
        check().prop_map(OpRequest::Check),
        multi().prop_map(OpRequest::Multi),
        multi().prop_map(OpRequest::MultiRead),
        (
            option::of(path()),
            option::of(path()),
            option::of(path()),
            any::<i64>()
        )
            .prop_map(|(j, l, n, c)| OpRequest::Reconfig(ReconfigRequest {
                joining_servers: j,
                leaving_servers: l,
                new_members: n,
                cur_config_id: c,
            })),
        watches().prop_map(OpRequest::CheckWatches),
        watches().prop_map(OpRequest::RemoveWatches),
        (any::<i32>(), path(), bytes()).prop_map(|(auth_type, scheme, auth)| {
            OpRequest::Auth(AuthPacket {
                auth_type,
                scheme,
                auth,
            })
        }),
        set_watches().prop_map(OpRequest::SetWatches),
        bytes().prop_map(|token| OpRequest::Sasl(SaslRequest { token })),
        path_only().prop_map(OpRequest::GetEphemerals),
        path_only().prop_map(OpRequest::GetAllChildrenNumber),
        set_watches2().prop_map(OpRequest::SetWatches2),
        (path(), select(AddWatchMode::ALL))
            .prop_map(|(path, mode)| OpRequest::AddWatch(AddWatchRequest { path, mode })),
        Just(OpRequest::WhoAmI),
        Just(OpRequest::CloseSession),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    (any::<i32>(), op_request()).prop_map(|(xid, op)| Request { xid, op })
}

fn op_result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        path().prop_map(|path| OpResult::Create { path }),
        (path(), stat()).prop_map(|(path, stat)| OpResult::Create2 { path, stat }),
        Just(OpResult::Delete),
        stat().prop_map(|stat| OpResult::SetData { stat }),
        Just(OpResult::Check),
        strings().prop_map(|children| OpResult::GetChildren { children }),
        (data(), stat()).prop_map(|(data, stat)| OpResult::GetData { data, stat }),
        error_code().prop_map(|err| OpResult::Error { err }),
    ]
}

/// A successful answer's body for `op`, of the shape ZooKeeper sends.
fn body_for(op: OpCode) -> BoxedStrategy<ReplyBody> {
    match op {
        OpCode::Create => path().prop_map(|path| ReplyBody::Create { path }).boxed(),
        OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer => (path(), stat())
            .prop_map(|(path, stat)| ReplyBody::Create2 { path, stat })
            .boxed(),
        OpCode::Exists | OpCode::SetData | OpCode::SetAcl | OpCode::Check => {
            stat().prop_map(ReplyBody::Stat).boxed()
        }
        OpCode::GetData | OpCode::Reconfig => (data(), stat())
            .prop_map(|(data, stat)| ReplyBody::GetData { data, stat })
            .boxed(),
        OpCode::GetAcl => (acls(), stat())
            .prop_map(|(acl, stat)| ReplyBody::GetAcl { acl, stat })
            .boxed(),
        OpCode::GetChildren => strings()
            .prop_map(|children| ReplyBody::GetChildren { children })
            .boxed(),
        OpCode::GetChildren2 => (strings(), stat())
            .prop_map(|(children, stat)| ReplyBody::GetChildren2 { children, stat })
            .boxed(),
        OpCode::Sync => path().prop_map(|path| ReplyBody::Sync { path }).boxed(),
        OpCode::Multi | OpCode::MultiRead => vec(op_result(), 0..5)
            .prop_map(|results| ReplyBody::Multi(MultiResponse { results }))
            .boxed(),
        OpCode::GetAllChildrenNumber => any::<i32>()
            .prop_map(|total_number| ReplyBody::AllChildrenNumber { total_number })
            .boxed(),
        OpCode::GetEphemerals => strings()
            .prop_map(|ephemerals| ReplyBody::Ephemerals { ephemerals })
            .boxed(),
        OpCode::WhoAmI => vec(
            (path(), path()).prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user }),
            0..3,
        )
        .prop_map(|client_info| ReplyBody::WhoAmI { client_info })
        .boxed(),
        OpCode::AddWatch => error_code()
            .prop_map(|err| ReplyBody::AddWatch { err })
            .boxed(),
        OpCode::Sasl => bytes().prop_map(|token| ReplyBody::Sasl { token }).boxed(),
        _ => Just(ReplyBody::Empty).boxed(),
    }
}

/// An answer to an ordinary xid: `(request type, reply)`. Errors carry no
/// body, as ZooKeeper sends them.
fn reply() -> impl Strategy<Value = (OpCode, Reply)> {
    (select(OpCode::ALL), 0..i32::MAX, any::<i64>(), error_code()).prop_flat_map(
        |(op, xid, zxid, err)| {
            let header = ReplyHeader { xid, zxid, err };
            let body = if err.is_ok() {
                body_for(op)
            } else {
                Just(ReplyBody::Empty).boxed()
            };
            body.prop_map(move |body| (op, Reply { header, body }))
        },
    )
}

fn notification() -> impl Strategy<Value = Reply> {
    (
        any::<i64>(),
        select(EventType::ALL),
        select(KeeperState::ALL),
        path(),
    )
        .prop_map(|(zxid, event_type, state, path)| Reply {
            header: ReplyHeader {
                xid: xid::NOTIFICATION,
                zxid,
                err: ErrorCode::Ok,
            },
            body: ReplyBody::Notification(WatcherEvent {
                event_type,
                state,
                path,
            }),
        })
}

fn round_trip<T: Record + PartialEq + std::fmt::Debug>(value: &T) {
    let bytes = to_bytes(value);
    assert_eq!(&from_bytes::<T>(&bytes).expect("decodes"), value);
}

/// Feeds `bytes` to `decoder` in chunks of `chunk` bytes, collecting
/// every item.
fn decode_chunked<D: Decoder>(decoder: &mut D, bytes: &[u8], chunk: usize) -> Vec<D::Item>
where
    D::Error: std::fmt::Debug,
{
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        while let Some(item) = decoder.decode(&mut buf).expect("decodes") {
            out.push(item);
        }
    }
    assert!(buf.is_empty(), "bytes left undecoded");
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn shared_records_round_trip(s in stat(), a in acl(), i in id()) {
        round_trip(&s);
        round_trip(&a);
        round_trip(&i);
    }

    #[test]
    fn connect_records_round_trip(req in connect_request(), rsp in connect_response()) {
        round_trip(&req);
        round_trip(&rsp);
        // The optional trailing byte is there exactly when it was set.
        prop_assert_eq!(to_bytes(&req).len(), 28 + req.passwd.len() + usize::from(req.read_only.is_some()));
        prop_assert_eq!(to_bytes(&rsp).len(), 20 + rsp.passwd.len() + usize::from(rsp.read_only.is_some()));
    }

    #[test]
    fn requests_round_trip(req in request()) {
        let mut bytes = BytesMut::new();
        req.encode(&mut bytes);
        prop_assert_eq!(i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]), req.op.opcode().code());
        prop_assert_eq!(Request::decode(&bytes), Ok(req));
    }

    #[test]
    fn replies_round_trip((op, reply) in reply(), event in notification()) {
        let mut bytes = BytesMut::new();
        reply.encode(&mut bytes);
        prop_assert_eq!(Reply::decode(&bytes, |x| (x == reply.header.xid).then_some(op)), Ok(reply));
        let mut bytes = BytesMut::new();
        event.encode(&mut bytes);
        prop_assert_eq!(Reply::decode(&bytes, |_| None), Ok(event));
    }

    #[test]
    fn client_to_server_streams_survive_any_chunking(
        connect in connect_request(),
        requests in vec(request(), 0..8),
        chunk in 1usize..64,
    ) {
        let mut client = ClientCodec::default();
        let mut wire = BytesMut::new();
        client.encode(ClientPacket::Connect(connect.clone()), &mut wire).expect("encodes");
        for r in &requests {
            client.encode(ClientPacket::Request(r.clone()), &mut wire).expect("encodes");
        }
        let got = decode_chunked(&mut ServerCodec::default(), &wire, chunk);
        let mut want = vec![Incoming::Connect(connect)];
        want.extend(requests.into_iter().map(Incoming::Request));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn server_to_client_streams_survive_any_chunking(
        connect in connect_response(),
        replies in vec(reply(), 0..8),
        events in vec(notification(), 0..3),
        chunk in 1usize..64,
    ) {
        // The client must have sent each request for its reply to decode:
        // give every reply its own xid.
        let mut client = ClientCodec::default();
        let mut sink = BytesMut::new();
        let mut server = ServerCodec::default();
        let mut wire = BytesMut::new();
        server.encode(ServerPacket::Connect(connect.clone()), &mut wire).expect("encodes");
        let mut want = vec![ServerPacket::Connect(connect)];
        for (n, (op, mut reply)) in replies.into_iter().enumerate() {
            reply.header.xid = n as i32 + 1;
            client.encode(ClientPacket::Request(Request { xid: reply.header.xid, op: placeholder(op) }), &mut sink).expect("encodes");
            server.encode(ServerPacket::Reply(reply.clone()), &mut wire).expect("encodes");
            want.push(ServerPacket::Reply(reply));
        }
        for event in events {
            server.encode(ServerPacket::Reply(event.clone()), &mut wire).expect("encodes");
            want.push(ServerPacket::Reply(event));
        }
        let got = decode_chunked(&mut client, &wire, chunk);
        prop_assert_eq!(got, want);
        prop_assert_eq!(client.outstanding(), 0);
    }

    #[test]
    fn no_input_makes_a_decoder_panic(bytes in vec(any::<u8>(), 0..512), max in 0usize..600) {
        // Whole streams, as a connection task would see them.
        for connected in [false, true] {
            let mut server = ServerCodec::new(max);
            let mut buf = BytesMut::from(&bytes[..]);
            if connected {
                let mut hello = BytesMut::new();
                ClientCodec::default().encode(ClientPacket::Connect(ConnectRequest::default()), &mut hello).expect("encodes");
                hello.extend_from_slice(&bytes);
                buf = hello;
            }
            while let Ok(Some(_)) = server.decode(&mut buf) {}
            let mut client = ClientCodec::new(max);
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = client.decode(&mut buf) {}
        }
        // Single records and frames.
        let _ = Request::decode(&bytes);
        for op in OpCode::ALL {
            let _ = Reply::decode(&bytes, |_| Some(*op));
        }
        let _ = from_bytes::<ConnectRequest>(&bytes);
        let _ = from_bytes::<ConnectResponse>(&bytes);
        let _ = from_bytes::<MultiRequest>(&bytes);
        let _ = from_bytes::<MultiResponse>(&bytes);
    }

    #[test]
    fn corrupted_valid_requests_do_not_panic(req in request(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = BytesMut::new();
        req.encode(&mut bytes);
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let _ = Request::decode(&bytes);
        let _ = Request::decode(&bytes[..i]);
    }
}

/// Some request of type `op` (only its type matters to the client codec).
fn placeholder(op: OpCode) -> OpRequest {
    let mut buf = BytesMut::new();
    // Every type with a body reads one from zeros, except the few whose
    // enumerations have no 0: give those their first value.
    let body: &[u8] = match op {
        OpCode::CheckWatches | OpCode::RemoveWatches => &[0, 0, 0, 0, 0, 0, 0, 1],
        OpCode::Multi | OpCode::MultiRead => &[0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff],
        _ => &[0; 64],
    };
    buf.extend_from_slice(body);
    let mut r = Reader::new(&buf);
    OpRequest::read_body(op.code(), &mut r).unwrap_or(OpRequest::Ping)
}

#[test]
fn unknown_create_flags_are_a_typed_error_with_the_xid() {
    let req = Request {
        xid: 7,
        op: OpRequest::Create(CreateRequest {
            path: "/a".into(),
            data: None,
            acl: vec![Acl::open_unsafe()],
            mode: CreateMode::Persistent,
        }),
    };
    let mut bytes = BytesMut::new();
    req.encode(&mut bytes);
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&9i32.to_be_bytes());
    assert_eq!(
        Request::decode(&bytes),
        Err(RequestError {
            xid: Some(7),
            op_type: Some(1),
            error: WireError::UnknownCreateMode(9)
        })
    );
}

#[test]
fn unknown_opcodes_keep_the_connection() {
    let mut server = ServerCodec::default();
    let mut wire = BytesMut::new();
    let mut client = ClientCodec::default();
    client
        .encode(ClientPacket::Connect(ConnectRequest::default()), &mut wire)
        .unwrap();
    write_frame(&mut wire, DEFAULT_MAX_FRAME, |w| {
        w.int(5);
        w.int(99);
    })
    .unwrap();
    client
        .encode(
            ClientPacket::Request(Request {
                xid: 6,
                op: OpRequest::Ping,
            }),
            &mut wire,
        )
        .unwrap();
    let got = decode_chunked(&mut server, &wire, 7);
    assert_eq!(got.len(), 3);
    assert_eq!(
        got[1],
        Incoming::Undecodable(RequestError {
            xid: Some(5),
            op_type: Some(99),
            error: WireError::UnknownOpcode(99)
        })
    );
    assert!(matches!(&got[2], Incoming::Request(r) if r.xid == 6));
}

#[test]
fn an_oversized_frame_ends_the_stream_with_a_typed_error() {
    let mut server = ServerCodec::new(100);
    let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
    match server.decode(&mut buf) {
        Err(CodecError::Wire(WireError::FrameTooLarge { len: 101, max: 100 })) => {}
        other => panic!("{other:?}"),
    }
}
