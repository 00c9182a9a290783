//! Entry points for the ZooKeeper frame fuzz target
//! (`fuzz/fuzz_targets/zookeeper_frame.rs`) and its corpus replay in
//! `raftlock-fuzz-cases`: untrusted bytes through the decoders a
//! connection task uses. Not an API: hidden from the docs, and nothing
//! here may panic on any input.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::wire::*;

/// The fuzzer's frame limit: its inputs are at most 64 KiB.
pub const MAX_FRAME: usize = 64 * 1024;

/// Runs `bytes` through the server codec as a new connection, the server
/// codec with the handshake done, the client codec, and every frame in
/// them through the request decoder and the reply decoder for every
/// opcode. Returns how many items decoded.
pub fn frames(bytes: &[u8]) -> usize {
    let mut decoded = 0;
    let mut server = ServerCodec::new(MAX_FRAME);
    let mut buf = BytesMut::from(bytes);
    while let Ok(Some(_)) = server.decode(&mut buf) {
        decoded += 1;
    }
    let mut server = ServerCodec::new(MAX_FRAME);
    let mut buf = handshake();
    buf.extend_from_slice(bytes);
    while let Ok(Some(_)) = server.decode(&mut buf) {
        decoded += 1;
    }
    let mut client = ClientCodec::new(MAX_FRAME);
    let mut buf = BytesMut::from(bytes);
    while let Ok(Some(_)) = client.decode(&mut buf) {
        decoded += 1;
    }
    let mut buf = BytesMut::from(bytes);
    while let Ok(Some(frame)) = split_frame(&mut buf, MAX_FRAME) {
        decoded += usize::from(Request::decode(&frame).is_ok());
        for op in OpCode::ALL {
            decoded += usize::from(Reply::decode(&frame, |_| Some(*op)).is_ok());
        }
        decoded += usize::from(from_bytes::<ConnectRequest>(&frame).is_ok());
        decoded += usize::from(from_bytes::<ConnectResponse>(&frame).is_ok());
    }
    decoded
}

fn handshake() -> BytesMut {
    let mut buf = BytesMut::new();
    let connect = ConnectRequest {
        time_out: 30_000,
        passwd: vec![0; 16],
        read_only: Some(false),
        ..ConnectRequest::default()
    };
    // A connect request is far below the limit.
    let _ = ClientCodec::new(MAX_FRAME).encode(ClientPacket::Connect(connect), &mut buf);
    buf
}

/// Valid inputs to start from: a client's stream (handshake and a request
/// of every kind), a server's stream (handshake, answers, a
/// notification), and single request frames.
pub fn seeds() -> Vec<Vec<u8>> {
    let acl = vec![Acl::open_unsafe()];
    let create = |path: &str, mode| CreateRequest {
        path: path.into(),
        data: Some(b"seed".to_vec()),
        acl: acl.clone(),
        mode,
    };
    let pw = |path: &str| PathWatchRequest {
        path: path.into(),
        watch: true,
    };
    let ops = vec![
        OpRequest::Create(create("/a", CreateMode::Persistent)),
        OpRequest::Create2(create("/a/e-", CreateMode::EphemeralSequential)),
        OpRequest::CreateContainer(create("/c", CreateMode::Container)),
        OpRequest::CreateTtl(CreateTtlRequest {
            path: "/t".into(),
            data: None,
            acl: acl.clone(),
            mode: CreateMode::PersistentWithTtl,
            ttl: 60_000,
        }),
        OpRequest::GetData(pw("/a")),
        OpRequest::GetData(pw(request::CONFIG_NODE)),
        OpRequest::SetData(SetDataRequest {
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            version: 0,
        }),
        OpRequest::Exists(pw("/b")),
        OpRequest::GetChildren2(pw("/")),
        OpRequest::Multi(MultiRequest {
            ops: vec![
                MultiOp::Check(CheckVersionRequest {
                    path: "/a".into(),
                    version: 1,
                }),
                MultiOp::Create(create("/m", CreateMode::Persistent)),
                MultiOp::Delete(DeleteRequest {
                    path: "/a".into(),
                    version: -1,
                }),
            ],
        }),
        OpRequest::MultiRead(MultiRequest {
            ops: vec![MultiOp::GetData(pw("/a")), MultiOp::GetChildren(pw("/"))],
        }),
        OpRequest::SetWatches2(SetWatches2 {
            relative_zxid: 7,
            data_watches: vec!["/a".into()],
            persistent_recursive_watches: vec!["/".into()],
            ..SetWatches2::default()
        }),
        OpRequest::AddWatch(AddWatchRequest {
            path: "/a".into(),
            mode: AddWatchMode::PersistentRecursive,
        }),
        OpRequest::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: b"user:pw".to_vec(),
        }),
        OpRequest::Reconfig(ReconfigRequest {
            leaving_servers: Some("2".into()),
            cur_config_id: -1,
            ..ReconfigRequest::default()
        }),
        OpRequest::Ping,
        OpRequest::WhoAmI,
        OpRequest::CloseSession,
    ];
    let mut seeds = Vec::new();
    let mut client = ClientCodec::new(MAX_FRAME);
    let mut stream = BytesMut::new();
    let mut frames = Vec::new();
    let _ = client.encode(
        ClientPacket::Connect(ConnectRequest {
            time_out: 30_000,
            passwd: vec![0; 16],
            read_only: Some(false),
            ..ConnectRequest::default()
        }),
        &mut stream,
    );
    for (n, op) in ops.into_iter().enumerate() {
        let request = Request {
            xid: n as i32 + 1,
            op,
        };
        let mut frame = BytesMut::new();
        let _ = client.encode(ClientPacket::Request(request.clone()), &mut frame);
        stream.extend_from_slice(&frame);
        frames.push(frame.to_vec());
    }
    seeds.push(stream.to_vec());
    seeds.extend(frames.into_iter().step_by(3));

    let stat = Stat {
        czxid: 2,
        mzxid: 3,
        version: 1,
        data_length: 4,
        ..Stat::default()
    };
    let mut server = ServerCodec::new(MAX_FRAME);
    let mut stream = BytesMut::new();
    let _ = server.encode(
        ServerPacket::Connect(ConnectResponse {
            time_out: 30_000,
            session_id: 0x1000,
            passwd: vec![7; 16],
            read_only: Some(false),
            ..ConnectResponse::default()
        }),
        &mut stream,
    );
    let header = |xid, err| ReplyHeader { xid, zxid: 9, err };
    for reply in [
        Reply {
            header: header(1, ErrorCode::Ok),
            body: ReplyBody::Create2 {
                path: "/a/e-0000000001".into(),
                stat,
            },
        },
        Reply {
            header: header(2, ErrorCode::NoNode),
            body: ReplyBody::Empty,
        },
        Reply {
            header: header(3, ErrorCode::Ok),
            body: ReplyBody::Multi(MultiResponse {
                results: vec![
                    OpResult::Error { err: ErrorCode::Ok },
                    OpResult::Error {
                        err: ErrorCode::BadVersion,
                    },
                    OpResult::Error {
                        err: ErrorCode::RuntimeInconsistency,
                    },
                ],
            }),
        },
        Reply {
            header: header(xid::NOTIFICATION, ErrorCode::Ok),
            body: ReplyBody::Notification(WatcherEvent {
                event_type: EventType::NodeDataChanged,
                state: KeeperState::SyncConnected,
                path: "/a".into(),
            }),
        },
        Reply {
            header: header(xid::PING, ErrorCode::Ok),
            body: ReplyBody::Empty,
        },
    ] {
        let _ = server.encode(ServerPacket::Reply(reply), &mut stream);
    }
    seeds.push(stream.to_vec());
    seeds
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds_decode() {
        for seed in super::seeds() {
            assert!(super::frames(&seed) > 0);
        }
    }
}
