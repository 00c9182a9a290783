//! The recipes over `HttpClient` against three real nodes, each behind
//! the real HTTP API on a port-0 listener.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{dead_endpoint, scenarios, within, Cluster};
use raftlock_client::{ClientError, HttpClient, LockClient, Mutex, Session};

/// A client whose first endpoint is down, so every test also exercises
/// failover; `rotate` picks which live node it prefers next.
async fn client(cluster: &Cluster, rotate: usize) -> Arc<dyn LockClient> {
    let mut endpoints = cluster.endpoints();
    let live = endpoints.len();
    endpoints.rotate_left(rotate % live);
    endpoints.insert(0, dead_endpoint().await);
    Arc::new(HttpClient::new(endpoints).expect("client"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_changes_after_a_read() {
    use futures::StreamExt;
    use raftlock_client::WatchEvent;
    let cluster = common::start(true).await;
    let endpoints = cluster.endpoints();
    let http = HttpClient::new(endpoints).expect("client");
    let client: Arc<dyn LockClient> = Arc::new(http.clone());
    client.put_node("/svc/a", b"1", None).await.expect("put a");
    let (node, revision) = http.read_node("/svc").await.expect("read");
    assert_eq!(node.version, 1);
    assert!(revision > 0);
    client.put_node("/svc/b", b"2", None).await.expect("put b");
    let mut watch = http.watch("/svc", Some(revision));
    client
        .put_node("/svc/a", b"3", None)
        .await
        .expect("update a");
    let mut seen = Vec::new();
    for _ in 0..2 {
        match within("a watch event", watch.next()).await {
            Some(Ok(WatchEvent::Put {
                path,
                node,
                revision: r,
            })) => {
                assert!(r > revision);
                seen.push((path, node.data, node.version));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("/svc/b".to_string(), b"2".to_vec(), 1),
            ("/svc/a".to_string(), b"3".to_vec(), 2)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_with_characters_a_url_gives_meaning_to_round_trip() {
    use futures::StreamExt;
    use raftlock_client::WatchEvent;
    // Tree paths take ZooKeeper's characters; `?`, `#`, `%` and spaces
    // must reach the server escaped, not cut the URL.
    let cluster = common::start(true).await;
    let http = HttpClient::new(cluster.endpoints()).expect("client");
    let client: Arc<dyn LockClient> = Arc::new(http.clone());
    let dir = "/odd dir?x=1#y";
    let path = "/odd dir?x=1#y/100% é";
    client.put_node(path, b"v1", None).await.expect("put");
    let (node, revision) = http.read_node(path).await.expect("read");
    assert_eq!((node.data.as_slice(), node.version), (&b"v1"[..], 1));
    let mut watch = http.watch(dir, Some(revision));
    client.put_node(path, b"v2", None).await.expect("update");
    match within("a watch event", watch.next()).await {
        Some(Ok(WatchEvent::Put {
            path: seen, node, ..
        })) => {
            assert_eq!((seen.as_str(), node.data.as_slice()), (path, &b"v2"[..]));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_read_misses_nothing_and_reports_compaction() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 2).await, client(&cluster, 0).await);
    scenarios::watch_after_read(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_mutex_counts_holds() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 1).await, client(&cluster, 2).await);
    scenarios::reentrant_hold_count(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_and_transactions() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 0).await, client(&cluster, 2).await);
    scenarios::guarded_writes(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_delay_holds_off_after_a_close() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 0).await, client(&cluster, 1).await);
    scenarios::lock_delay(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_excludes_and_tokens_increase() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 0).await, client(&cluster, 1).await);
    scenarios::mutual_exclusion(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_guard_releases() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 1).await, client(&cluster, 2).await);
    scenarios::guard_drop_releases(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_over_sse() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 2).await, client(&cluster, 0).await);
    scenarios::election(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_not_found_fires_lost_at_once() {
    let cluster = common::start(true).await;
    scenarios::session_not_found_fires_lost(client(&cluster, 0).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_cluster_stops() {
    let mut cluster = common::start(true).await;
    let ttl = Duration::from_millis(1500);
    let session = Session::open(client(&cluster, 0).await, "doomed", ttl)
        .await
        .expect("open");
    let guard = Mutex::new(&session, "orders/1").lock().await.expect("lock");
    cluster.stop_all().await;
    scenarios::assert_lost_in_window(&session).await;
    drop(guard);
}

/// The node a client talks to goes away mid-session (API and Raft, so
/// possibly the leader): the session, its lock and new locks carry on
/// through the other endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_when_its_node_stops() {
    let mut cluster = common::start(true).await;
    let client = HttpClient::new(cluster.endpoints()).expect("client");
    let session = Session::open(Arc::new(client.clone()), "survivor", Duration::from_secs(5))
        .await
        .expect("open");
    let guard = Mutex::new(&session, "orders/9").lock().await.expect("lock");
    cluster.stop(1).await;
    within("keepalive via another node", session.keepalive())
        .await
        .expect("keepalive after failover");
    let state = client.lock_state("orders/9").await.expect("state");
    assert_eq!(state.holder.and_then(|h| h.session), Some(session.id()));
    let other = within("a second lock", Mutex::new(&session, "orders/10").lock())
        .await
        .expect("lock after failover");
    assert!(other.fencing_token() > guard.fencing_token());
    assert!(session.lost_reason().is_none());
    other.unlock().await.expect("unlock");
    guard.unlock().await.expect("unlock");
    session.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_errors_and_no_endpoint() {
    let cluster = common::start(true).await;
    let client = client(&cluster, 0).await;
    let bad = client.acquire(
        "../etc",
        raftlock_client::SessionId(1),
        Duration::ZERO.into(),
    );
    assert!(matches!(bad.await, Err(ClientError::BadRequest(_))));
    let unknown = client.keepalive(raftlock_client::SessionId(7)).await;
    assert!(
        matches!(unknown, Err(ClientError::SessionNotFound(_))),
        "{unknown:?}"
    );
    let ttl = client.open_session("x", Duration::from_millis(10)).await;
    assert!(matches!(ttl, Err(ClientError::BadRequest(_))), "{ttl:?}");
    let nobody = HttpClient::new([dead_endpoint().await, dead_endpoint().await]).expect("client");
    let down = nobody.open_session("x", Duration::from_secs(5)).await;
    assert!(matches!(down, Err(ClientError::Unavailable(_))), "{down:?}");
    assert!(!down.expect_err("down").outcome_unknown());
}

/// The read-only views tools use: typed, with failover past a dead
/// endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_and_lock_listing_are_typed() {
    let cluster = common::start(true).await;
    let mut endpoints = cluster.endpoints();
    endpoints.insert(0, dead_endpoint().await);
    let client = HttpClient::new(endpoints).expect("client");
    let session = Session::open(Arc::new(client.clone()), "lister", Duration::from_secs(5))
        .await
        .expect("open");
    let guard = Mutex::new(&session, "reports/daily")
        .lock()
        .await
        .expect("lock");

    let info = client.cluster().await.expect("cluster");
    assert_eq!(info.members.len(), 3, "{info:?}");
    assert!(info.leader_id.is_some(), "{info:?}");
    assert!(info.members.iter().all(|m| m.voter), "{info:?}");

    let listed = client.locks("reports/").await.expect("locks");
    assert_eq!(listed.len(), 1, "{listed:?}");
    let holder = listed[0].holder.as_ref().expect("held");
    assert_eq!(listed[0].name, "reports/daily");
    assert_eq!(holder.session, Some(session.id()));
    assert_eq!(holder.owner, "lister");
    assert_eq!(holder.fencing_token, guard.fencing_token());
    assert_eq!(listed[0].waiters, 0);
    assert!(client.locks("other/").await.expect("locks").is_empty());
    drop(guard);
}

/// A member whose disk is full answers `503 disk_full` having applied
/// nothing: the client moves on to another endpoint by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_from_a_member_whose_disk_is_full() {
    let cluster = common::start(true).await;
    let full = cluster
        .running()
        .find(|n| n.status().leader_id.is_some_and(|l| l != n.id()))
        .expect("a follower")
        .clone();
    let mut endpoints = cluster.endpoints();
    let full_endpoint = endpoints.remove((full.id() - 1) as usize);
    let others = HttpClient::new(endpoints.clone()).expect("client");

    full.fail_log_sync_out_of_space();
    // A write anywhere reaches the full member's barrier.
    others
        .open_session("fill", Duration::from_secs(5))
        .await
        .expect("the other two are a majority");
    within("the full member to notice", async {
        while full.check_storage().is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    endpoints.insert(0, full_endpoint);
    let client = HttpClient::new(endpoints).expect("client");
    client
        .open_session("past-the-full-one", Duration::from_secs(5))
        .await
        .expect("served by another member after disk_full");
}

/// The member serving an observe stream stops: the stream reconnects to
/// another member and goes on with the next state, instead of ending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_moves_to_another_member_when_its_member_stops() {
    use futures::StreamExt;
    use raftlock_client::Election;

    let mut cluster = common::start(true).await;
    let leader = cluster
        .node(1)
        .wait_for_leader(common::PATIENCE)
        .await
        .expect("a leader");
    // A follower serves the stream, so stopping it keeps a quorum.
    let served_by = (1..=3).find(|id| *id != leader).expect("a follower");
    let mut endpoints = cluster.endpoints();
    endpoints.rotate_left((served_by - 1) as usize);
    let observer = HttpClient::new(endpoints).expect("observer");
    let writer = client(&cluster, leader as usize - 1).await;

    let session = Session::open(writer, "a", Duration::from_secs(5))
        .await
        .expect("open");
    let election = Election::new(&session, "scheduler");
    election.campaign("host-a").await.expect("campaign");
    let mut watch = observer.observe("scheduler");
    let first = within("the first state", watch.next()).await;
    let first = first
        .expect("a state")
        .expect("no error")
        .expect("a leader");
    assert_eq!(first.value, "host-a");

    within("stopping the member", cluster.stop(served_by)).await;
    election.proclaim("host-a2").await.expect("proclaim");
    let next = within("the state after the stop", watch.next()).await;
    let next = next.expect("the stream goes on").expect("no error");
    assert_eq!(next.map(|l| l.value).as_deref(), Some("host-a2"));
    session.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_semaphore_and_multilock() {
    let cluster = common::start(true).await;
    let (a, b) = (client(&cluster, 0).await, client(&cluster, 1).await);
    scenarios::primitives(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlocks_and_semaphores_are_listed() {
    use raftlock_client::{Mode, RwLock, Semaphore};
    let cluster = common::start(true).await;
    let http = HttpClient::new(cluster.endpoints()).expect("client");
    let client: Arc<dyn LockClient> = Arc::new(http.clone());
    let session = Session::open(client, "lister", Duration::from_secs(5))
        .await
        .expect("open");
    let read = RwLock::new(&session, "docs/1").read().await.expect("read");
    let permit = Semaphore::new(&session, "pool/gpu", 3)
        .acquire()
        .await
        .expect("permit");
    let rwlocks = http.rwlocks("docs/").await.expect("list read-write locks");
    assert_eq!(rwlocks.len(), 1, "{rwlocks:?}");
    assert_eq!(rwlocks[0].name, "docs/1");
    assert_eq!(rwlocks[0].waiters, 0);
    let holder = &rwlocks[0].holders[..];
    assert_eq!(holder.len(), 1, "{rwlocks:?}");
    assert_eq!(holder[0].mode, Mode::Read);
    assert_eq!(holder[0].holder.session, Some(session.id()));
    assert_eq!(holder[0].holder.fencing_token, read.fencing_token());
    let semaphores = http.semaphores("").await.expect("list semaphores");
    assert_eq!(semaphores.len(), 1, "{semaphores:?}");
    assert_eq!(semaphores[0].name, "pool/gpu");
    assert_eq!(semaphores[0].permits, Some(3));
    assert_eq!(
        semaphores[0].holders[0].fencing_token,
        permit.fencing_token()
    );
    assert!(http.rwlocks("pool").await.expect("list").is_empty());
    read.unlock().await.expect("unlock");
    permit.release().await.expect("release");
    assert!(http.rwlocks("").await.expect("list").is_empty());
    assert!(http.semaphores("").await.expect("list").is_empty());
    session.close().await.expect("close");
}

/// The operator tools' reads parse what the real server sends, and keep
/// the body exactly as it came (`raftlock … --json` prints it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_reads_are_typed_and_keep_the_body_as_sent() {
    use raftlock_client::NodeWrite;
    let cluster = common::start(true).await;
    let mut endpoints = cluster.endpoints();
    endpoints.insert(0, dead_endpoint().await);
    let http = HttpClient::new(endpoints).expect("client");
    let session = Session::open(Arc::new(http.clone()), "tools", Duration::from_secs(30))
        .await
        .expect("session");
    let guard = Mutex::new(&session, "tools/a").lock().await.expect("lock");

    let lock = http.lock_view("tools/a").await.expect("lock view");
    let holder = lock.value.holder.as_ref().expect("held");
    assert_eq!(holder.fencing_token, guard.fencing_token());
    assert_eq!(holder.owner, "tools");
    let raw: serde_json::Value = serde_json::from_slice(&lock.body).expect("json body");
    assert_eq!(raw["holder"]["fencing_token"], guard.fencing_token());

    let sessions = http.sessions(10).await.expect("sessions");
    let me = session.id().to_string();
    let line = sessions.value.sessions.iter().find(|s| s.session_id == me);
    assert_eq!(line.map(|s| s.owner.as_str()), Some("tools"));
    let shown = http.session(session.id()).await.expect("session view");
    assert_eq!(shown.value.nodes, std::slice::from_ref(&holder.node));

    let fencing = http
        .fencing("tools/a", guard.fencing_token())
        .await
        .expect("fencing check");
    assert!(fencing.value.valid);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&fencing.body).expect("json"),
        serde_json::json!({"valid": true, "current_token": guard.fencing_token()})
    );

    let how = NodeWrite {
        sequential: true,
        expected_version: None,
    };
    let written = http
        .write_node("/tools/item-", b"x", how)
        .await
        .expect("sequential put");
    assert!(
        written.value.path.starts_with("/tools/item-0"),
        "{:?}",
        written.value
    );
    let read = http.node(&written.value.path).await.expect("node");
    assert_eq!((read.value.data.as_str(), read.value.version), ("eA==", 1));
    let children = http.children("/tools").await.expect("children");
    assert_eq!(
        children.value.children,
        [&written.value.path["/tools/".len()..]]
    );
    let top = http.children("/").await.expect("top level");
    assert!(top.value.children.iter().any(|c| c == "tools"), "{top:?}");
    let refused = http
        .write_node(
            &written.value.path,
            b"y",
            NodeWrite {
                sequential: false,
                expected_version: Some(7),
            },
        )
        .await
        .expect_err("stale version");
    assert_eq!(
        refused.code(),
        Some(raftlock_client::ErrorCode::VersionMismatch)
    );

    let membership = http.membership().await.expect("membership");
    assert_eq!(membership.value.members.len(), 3);
    assert!(membership.value.members.iter().all(|m| m.voter));
    let election = http.election("tools/none").await.expect("election");
    assert_eq!(election.value.leader, None);
    let rwlock = http.rwlock("tools/r").await.expect("rwlock");
    assert!(rwlock.value.holders.is_empty());
    let semaphore = http.semaphore("tools/s").await.expect("semaphore");
    assert_eq!(semaphore.value.permits, None);
    let cluster_view = http.cluster_answered().await.expect("cluster");
    let raw: serde_json::Value = serde_json::from_slice(&cluster_view.body).expect("json");
    assert_eq!(raw["term"], cluster_view.value.term);
    let listed = http.locks_answered("tools/").await.expect("locks");
    assert_eq!(listed.value.len(), 1);
    let raw: serde_json::Value = serde_json::from_slice(&listed.body).expect("json");
    assert_eq!(raw["locks"][0]["lock"], "tools/a");

    guard.unlock().await.expect("unlock");
    session.close().await.expect("close");
}
