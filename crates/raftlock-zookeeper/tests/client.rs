//! raftlock's ZooKeeper client (`raftlock_zookeeper::client`) against the
//! door of a real three-member in-process cluster: the lock recipe's
//! steps across two members, pipelined, with watches; the session's
//! close and its expiry.

mod common;

use std::time::Duration;

use common::*;
use raftlock_zookeeper::client::{create_request, Call, Client, Config, Error, State};
use raftlock_zookeeper::wire::{
    CreateMode, ErrorCode, EventType, OpRequest, PathWatchRequest, ReplyBody,
};

fn config(addr: std::net::SocketAddr, timeout_ms: u64) -> Config {
    Config {
        connect_for: Duration::from_secs(10),
        ..Config::new(vec![addr.to_string()], Duration::from_millis(timeout_ms))
    }
}

async fn connect(addr: std::net::SocketAddr, timeout_ms: u64) -> Client {
    Client::connect(config(addr, timeout_ms))
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

/// The session owning the node at `path`, as `reader` sees it.
async fn owner_of(reader: &Client, path: &str) -> Option<i64> {
    reader
        .exists(path)
        .await
        .ok()
        .flatten()
        .map(|s| s.ephemeral_owner)
}

/// Create and list in one write; the lowest node holds; the next waits
/// on it through an exists-watch on another member, which fires with
/// its deletion; the czxids (fencing tokens) follow the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_recipe_across_members() {
    let cluster = Cluster::start(door_config()).await;
    let a = connect(cluster.addr(1), 10_000).await;
    let b = connect(cluster.addr(2), 10_000).await;
    assert_eq!(
        a.create("/lock", b"", CreateMode::Persistent).await,
        Ok("/lock".into())
    );
    let sent = a
        .send(vec![
            Call::new(OpRequest::Create2(create_request(
                "/lock/n-",
                b"",
                CreateMode::EphemeralSequential,
            ))),
            Call::new(OpRequest::GetChildren(PathWatchRequest {
                path: "/lock".into(),
                watch: false,
            })),
        ])
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    let mut answers = Vec::new();
    for p in sent {
        answers.push(a.answer(p).await);
    }
    let (a_node, a_stat) = match &answers[0] {
        Ok(ReplyBody::Create2 { path, stat }) => (path.clone(), *stat),
        other => panic!("create2: {other:?}"),
    };
    // The listing was answered after the create: it sees it.
    assert_eq!(
        answers[1],
        Ok(ReplyBody::GetChildren {
            children: vec![a_node.trim_start_matches("/lock/").to_string()]
        })
    );
    assert_eq!(a_stat.ephemeral_owner, a.session_id());
    let (b_node, b_stat) = b
        .create2("/lock/n-", b"", CreateMode::EphemeralSequential)
        .await
        .unwrap_or_else(|e| panic!("create2: {e}"));
    assert!(b_stat.czxid > a_stat.czxid, "tokens follow the queue");
    assert!(b_node > a_node);
    let watch = b.exists_watch(&a_node).await;
    let Ok(Some(watch)) = watch else {
        panic!("a watch on the predecessor: {watch:?}");
    };
    assert_eq!(a.delete(&a_node).await, Ok(()));
    let fired = tokio::time::timeout(Duration::from_secs(10), watch).await;
    assert_eq!(
        fired.ok().and_then(Result::ok),
        Some(EventType::NodeDeleted)
    );
    let children = b.children("/lock").await;
    assert_eq!(
        children,
        Ok(vec![b_node.trim_start_matches("/lock/").to_string()])
    );
    // A watch on a node that is gone: none.
    assert_eq!(
        b.exists_watch(&a_node).await.map(|w| w.is_some()),
        Ok(false)
    );
    // Closing b's session deletes its ephemeral node, as a reader elsewhere sees.
    b.close().await;
    assert_eq!(a.exists(&b_node).await, Ok(None));
    assert_eq!(
        a.delete("/nowhere").await,
        Err(Error::Code(ErrorCode::NoNode))
    );
    a.close().await;
}

/// Every request renews the session, as ZooKeeper's server counts every
/// packet: a client that never pings but sends a read every quarter of
/// its timeout keeps its session and its ephemeral node through several
/// timeouts, while one that sends nothing loses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_alone_keep_a_session() {
    let cluster = Cluster::start(door_config()).await;
    let unpinged = |addr| {
        Client::connect(Config {
            auto_ping: false,
            reconnect: false,
            ..config(addr, 600)
        })
    };
    let busy = unpinged(cluster.addr(1))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let silent = unpinged(cluster.addr(2))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let timeout = busy.session_timeout();
    assert_eq!(timeout, Duration::from_millis(600), "negotiated as asked");
    let reader = connect(cluster.addr(3), 2_000).await;
    let busy_node = busy
        .create("/busy", b"", CreateMode::Ephemeral)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    let silent_node = silent
        .create("/silent", b"", CreateMode::Ephemeral)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    assert_eq!(owner_of(&reader, &busy_node).await, Some(busy.session_id()));
    // Five timeouts of reads only, one every quarter of the timeout.
    let start = tokio::time::Instant::now();
    while start.elapsed() < timeout * 5 {
        tokio::time::sleep(timeout / 4).await;
        assert!(
            busy.children("/").await.is_ok(),
            "a read after {:?}",
            start.elapsed()
        );
    }
    // The silent session is gone by now (its timeout passed five times
    // over); the busy one's node is still there, as another member sees.
    assert_eq!(reader.exists(&silent_node).await, Ok(None));
    assert_eq!(
        owner_of(&reader, &busy_node).await,
        Some(busy.session_id()),
        "the busy session's node stays"
    );
    assert_eq!(*busy.state().borrow(), State::Connected);
    assert_ne!(*silent.state().borrow(), State::Connected);
    busy.close().await;
    assert_eq!(reader.exists(&busy_node).await, Ok(None));
    reader.close().await;
}

/// A session nobody pings expires: its ephemeral node goes, as another
/// member's reader sees, and the silent client sees its connection gone;
/// a pinged session outlives several timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpinged_session_expires() {
    let cluster = Cluster::start(door_config()).await;
    let silent = Client::connect(Config {
        auto_ping: false,
        reconnect: false,
        ..config(cluster.addr(1), 500)
    })
    .await
    .unwrap_or_else(|e| panic!("connect: {e}"));
    let reader = connect(cluster.addr(2), 2_000).await;
    let node = silent
        .create("/mine", b"", CreateMode::Ephemeral)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match reader.exists(&node).await {
            Ok(None) => break,
            Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("the unpinged session's node: {other:?}"),
        }
    }
    assert_ne!(*silent.state().borrow(), State::Connected);
    assert!(silent.children("/").await.is_err());
    // The reader, pinged by its client, lived through all of it.
    let mut seen = reader.state();
    let outlived = tokio::time::timeout(
        Duration::from_secs(5),
        seen.wait_for(|s| *s != State::Connected),
    )
    .await
    .is_err();
    assert!(outlived, "a pinged session stays: {:?}", *seen.borrow());
    assert!(reader.children("/").await.is_ok());
    reader.close().await;
}
