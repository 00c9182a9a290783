//! The client against a scripted server on a real socket, for what a
//! correct server never does (answers out of order) and for a dropped
//! connection at a chosen moment. tests/client.rs runs it against the
//! door of a real cluster.

use super::*;
use crate::wire::{
    from_bytes, split_frame, ClientInfo, ConnectRequest, ConnectResponse, KeeperState, Record,
    Reply, ReplyHeader,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// The scripted server's side of one connection.
struct Script {
    stream: TcpStream,
    buf: BytesMut,
}

impl Script {
    async fn frame(&mut self) -> Option<BytesMut> {
        loop {
            if let Ok(Some(f)) = split_frame(&mut self.buf, DEFAULT_MAX_FRAME) {
                return Some(f);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// The next request, skipping pings.
    async fn request(&mut self) -> Option<Request> {
        loop {
            let f = self.frame().await?;
            let r = Request::decode(&f).ok()?;
            if r.op != OpRequest::Ping {
                return Some(r);
            }
        }
    }

    async fn send(&mut self, xid: i32, body: ReplyBody) {
        let reply = Reply {
            header: ReplyHeader {
                xid,
                zxid: 1,
                err: ErrorCode::Ok,
            },
            body,
        };
        let mut out = BytesMut::new();
        let _ = write_frame(&mut out, DEFAULT_MAX_FRAME, |b| reply.encode(b));
        let _ = self.stream.write_all(&out).await;
    }
}

/// Accepts one connection and answers its handshake with session `id`;
/// returns the id and password the client asked for.
async fn accept(l: &TcpListener, id: i64) -> (Script, (i64, Vec<u8>)) {
    let (stream, _) = l.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
    let mut s = Script {
        stream,
        buf: BytesMut::new(),
    };
    let connect = s.frame().await.unwrap_or_default();
    let asked = from_bytes::<ConnectRequest>(&connect)
        .map(|c| (c.session_id, c.passwd))
        .unwrap_or((-1, Vec::new()));
    let answer = ConnectResponse {
        protocol_version: 0,
        time_out: 4_000,
        session_id: id,
        passwd: vec![7; 16],
        read_only: Some(false),
    };
    let mut out = BytesMut::new();
    let _ = write_frame(&mut out, DEFAULT_MAX_FRAME, |b| answer.write(b));
    let _ = s.stream.write_all(&out).await;
    (s, asked)
}

async fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
    (l, addr)
}

fn config(addr: String) -> Config {
    Config {
        connect_for: Duration::from_secs(5),
        ..Config::new(vec![addr], Duration::from_secs(4))
    }
}

fn pipelined(c: &Client) -> impl std::future::Future<Output = Result<Vec<Pending>, Error>> + '_ {
    c.send(vec![
        Call::new(OpRequest::Create(create_request(
            "/l/n-",
            b"",
            CreateMode::EphemeralSequential,
        ))),
        Call::new(children_request("/l", false)),
    ])
}

/// The answers to [`pipelined`]'s two requests (none if they could not
/// be sent).
async fn pipelined_answers(c: &Client) -> Vec<Answer> {
    let mut answers = Vec::new();
    for p in pipelined(c).await.unwrap_or_default() {
        answers.push(c.answer(p).await);
    }
    answers
}

/// Two requests sent together are answered in order; after the server
/// drops the connection the client comes back with the same session id
/// and password (not a new session), failing what was in flight.
#[tokio::test]
async fn pipelines_and_resumes_the_session() {
    let (l, addr) = listener().await;
    let server = async {
        let (mut s, asked) = accept(&l, 42).await;
        assert_eq!(asked.0, 0, "a new session asks for id 0");
        let create = s.request().await;
        let list = s.request().await;
        let (Some(create), Some(list)) = (create, list) else {
            panic!("two requests");
        };
        assert!(matches!(create.op, OpRequest::Create(_)));
        assert!(matches!(list.op, OpRequest::GetChildren(_)));
        let path = "/l/n-0000000001".to_string();
        s.send(create.xid, ReplyBody::Create { path }).await;
        let children = vec!["n-0000000001".to_string()];
        s.send(list.xid, ReplyBody::GetChildren { children }).await;
        // A request the server never answers: the connection drops.
        let _ = s.request().await;
        drop(s);
        accept(&l, 42).await
    };
    let client = async {
        let c = Client::connect(config(addr))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let answers = pipelined_answers(&c).await;
        assert_eq!(
            answers,
            vec![
                Ok(ReplyBody::Create {
                    path: "/l/n-0000000001".into()
                }),
                Ok(ReplyBody::GetChildren {
                    children: vec!["n-0000000001".into()]
                }),
            ]
        );
        let mut state = c.state();
        assert_eq!(
            c.delete("/l/n-0000000001").await,
            Err(Error::ConnectionLoss)
        );
        let back = tokio::time::timeout(
            Duration::from_secs(10),
            state.wait_for(|s| *s == State::Connected),
        )
        .await;
        assert!(matches!(back, Ok(Ok(_))), "reconnected");
        c
    };
    let ((_s, asked), c) = tokio::join!(server, client);
    assert_eq!(
        asked,
        (42, vec![7; 16]),
        "the reconnect resumes the session"
    );
    drop(c);
}

/// ZooKeeper answers a session's requests in order; an answer that
/// skips the oldest request in flight is a broken server, and the
/// connection is dropped rather than the answer handed to the wrong call.
#[tokio::test]
async fn an_answer_out_of_order_drops_the_connection() {
    let (l, addr) = listener().await;
    let server = async {
        let (mut s, _) = accept(&l, 9).await;
        let first = s.request().await;
        let second = s.request().await;
        let (Some(_first), Some(second)) = (first, second) else {
            panic!("two requests");
        };
        let children = vec!["x".to_string()];
        s.send(second.xid, ReplyBody::GetChildren { children })
            .await;
        // Held open: the client must hang up by itself.
        let _ = s.frame().await;
    };
    let client = async {
        let mut c = config(addr);
        c.reconnect = false;
        let c = Client::connect(c)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let answers = pipelined_answers(&c).await;
        assert_eq!(
            answers,
            vec![Err(Error::ConnectionLoss), Err(Error::ConnectionLoss)]
        );
        assert_eq!(*c.state().borrow(), State::Disconnected);
        drop(c);
    };
    tokio::join!(server, client);
}

/// A watch fires for the events of its kind only, and once.
#[tokio::test]
async fn watches_fire_by_kind_once() {
    let (l, addr) = listener().await;
    let notify = |event_type, path: &str| {
        ReplyBody::Notification(crate::wire::WatcherEvent {
            event_type,
            state: KeeperState::SyncConnected,
            path: path.into(),
        })
    };
    let server = async {
        let (mut s, _) = accept(&l, 5).await;
        let exists = s.request().await.map(|r| r.xid).unwrap_or(0);
        s.send(exists, ReplyBody::Stat(Stat::default())).await;
        // A child event is not for an exists watch; a deletion is.
        s.send(
            xid::NOTIFICATION,
            notify(EventType::NodeChildrenChanged, "/a"),
        )
        .await;
        s.send(xid::NOTIFICATION, notify(EventType::NodeDeleted, "/a"))
            .await;
        let who = s.request().await.map(|r| r.xid).unwrap_or(0);
        let client_info = vec![ClientInfo::default()];
        s.send(who, ReplyBody::WhoAmI { client_info }).await;
        let _ = s.frame().await;
    };
    let client = async {
        let c = Client::connect(config(addr))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let w = c.exists_watch("/a").await;
        let Ok(Some(w)) = w else {
            panic!("a watch: {w:?}");
        };
        let fired = tokio::time::timeout(Duration::from_secs(5), w).await;
        assert_eq!(
            fired.ok().and_then(Result::ok),
            Some(EventType::NodeDeleted)
        );
        // Answered after both events: nothing left registered.
        let _ = c.call(OpRequest::WhoAmI).await;
        assert!(lock(&c.inner.outstanding).watches.is_empty());
        drop(c);
    };
    tokio::join!(server, client);
}

/// A connection that breaks while a write is under way (the server stops
/// reading, so the write blocks, then resets the connection): every call
/// in flight, the ones whose frames went out before and the ones in the
/// write that failed, gets exactly one answer, a connection loss, from
/// the reader; none gets another call's answer.
#[tokio::test]
async fn a_write_that_fails_leaves_every_call_to_the_reader() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|e| panic!("socket: {e}"));
    // A small receive window, so the big write cannot fit in flight.
    socket
        .set_recv_buffer_size(4096)
        .unwrap_or_else(|e| panic!("rcvbuf: {e}"));
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    socket.bind(any).unwrap_or_else(|e| panic!("bind: {e}"));
    let l = socket.listen(8).unwrap_or_else(|e| panic!("listen: {e}"));
    let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let (small_sent, small_seen) = oneshot::channel::<()>();
    let server = async {
        let (mut s, _) = accept(&l, 11).await;
        // The two pipelined requests, then the first bytes of the big
        // write: from here on the client is inside that write.
        let first = s.request().await;
        let second = s.request().await;
        assert!(first.is_some() && second.is_some(), "two requests");
        let _ = small_sent.send(());
        while s.buf.is_empty() {
            match s.stream.read_buf(&mut s.buf).await {
                Ok(0) | Err(_) => panic!("the big write never started"),
                Ok(_) => {}
            }
        }
        // Reset, not a clean close: the blocked write fails.
        s.stream
            .set_zero_linger()
            .unwrap_or_else(|e| panic!("linger: {e}"));
        drop(s);
    };
    let client = async {
        let mut config = config(addr);
        config.reconnect = false;
        config.auto_ping = false;
        let c = Client::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let early = pipelined(&c)
            .await
            .unwrap_or_else(|e| panic!("the first two went out: {e}"));
        let _ = small_seen.await;
        // Eight setData of 900 KB each in one write: more than the
        // socket buffers hold, so the write blocks until the reset.
        let big = vec![b'x'; 900 * 1024];
        let calls = (0..8)
            .map(|i| {
                Call::new(OpRequest::SetData(SetDataRequest {
                    path: format!("/big/{i}"),
                    data: Some(big.clone()),
                    version: -1,
                }))
            })
            .collect();
        let late = c
            .send(calls)
            .await
            .unwrap_or_else(|e| panic!("a failed write still hands back its calls: {e}"));
        assert_eq!(late.len(), 8);
        // Awaited on the channel itself, not `Client::answer` (whose own
        // timeout would also read as a connection loss): each answer
        // must come from the reader, and come once.
        let mut answers = Vec::new();
        for p in early.into_iter().chain(late) {
            let heard = tokio::time::timeout(Duration::from_secs(60), p.answer).await;
            answers.push(heard.map(|a| a.map_err(|_| "dropped unanswered")));
        }
        let loss = Ok(Ok(Err(Error::ConnectionLoss)));
        assert!(answers.iter().all(|a| *a == loss), "{answers:?}");
        assert_eq!(answers.len(), 10);
        assert!(lock(&c.inner.outstanding).calls.is_empty());
        // The connection is gone: a new call fails at once.
        assert_eq!(c.exists("/a").await, Err(Error::ConnectionLoss));
        drop(c);
    };
    tokio::join!(server, client);
}
