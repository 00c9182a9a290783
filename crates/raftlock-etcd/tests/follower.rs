//! A follower's door: its writes are forwarded to the leader, which
//! answers once it applied them, and the follower applies them a little
//! later. What the door answers must still follow every change it
//! acknowledged, as an etcd member's answers follow its own writes.

use std::time::Duration;

use raftlock_api::auth::AuthConfig;
use raftlock_etcd::pb::etcdserverpb as pb;
use raftlock_etcd::Door;
use raftlock_node::{ClusterSettings, LocalCluster};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

const WAIT: Duration = Duration::from_secs(10);

fn revision(header: Option<pb::ResponseHeader>) -> i64 {
    header.expect("a response header").revision
}

/// Put, lease grant, watch from now, put, lease revoke through a
/// follower's door, many times over (the follower lags only now and
/// then): the grant's and the revoke's headers are at least their own
/// revisions, and the watch from now sees the second put and never the
/// first, which the door had acknowledged before the watch was asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_door_answers_after_the_writes_it_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = ClusterSettings {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        ..ClusterSettings::default()
    };
    let cluster = LocalCluster::start(dir.path(), 3, settings)
        .await
        .expect("start the cluster");
    let leader = cluster.leader(WAIT).await.expect("a leader");
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let door = Door::start(
        cluster.node(follower).clone(),
        listener,
        Vec::new(),
        &AuthConfig::default(),
    )
    .expect("start the door");
    let channel: Channel = Endpoint::from_shared(format!("http://{}", door.local_addr()))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut kv = pb::kv_client::KvClient::new(channel.clone());
    let mut lease = pb::lease_client::LeaseClient::new(channel.clone());
    let mut watch = pb::watch_client::WatchClient::new(channel);
    for i in 0..100 {
        let key = format!("k/{i}").into_bytes();
        let put = |value: &[u8]| pb::PutRequest {
            key: key.clone(),
            value: value.to_vec(),
            ..Default::default()
        };
        let first = kv.put(put(b"1")).await.expect("put").into_inner();
        let first = revision(first.header);

        let granted = lease
            .lease_grant(pb::LeaseGrantRequest { ttl: 60, id: 0 })
            .await
            .expect("grant")
            .into_inner();
        let granted_at = revision(granted.header);
        assert!(
            granted_at > first,
            "round {i}: grant answered at {granted_at}, after a put at {first}"
        );

        let (requests, rx) = mpsc::channel(4);
        let create = pb::WatchCreateRequest {
            key: key.clone(),
            ..Default::default()
        };
        requests
            .send(pb::WatchRequest {
                request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
            })
            .await
            .expect("send the create");
        let mut stream = watch
            .watch(ReceiverStream::new(rx))
            .await
            .expect("watch")
            .into_inner();
        let created = tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("created in time")
            .expect("created")
            .expect("a created response");
        assert!(created.created && !created.canceled, "{created:?}");
        assert!(
            revision(created.header) >= granted_at,
            "round {i}: {created:?}"
        );

        let second = kv.put(put(b"2")).await.expect("put").into_inner();
        let second = revision(second.header);
        let events = tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("an event in time")
            .expect("events")
            .expect("an events response");
        let revisions: Vec<i64> = events
            .events
            .iter()
            .map(|e| e.kv.as_ref().map_or(0, |kv| kv.mod_revision))
            .collect();
        assert_eq!(
            revisions.first(),
            Some(&second),
            "round {i}: the put at {first} came before the watch (created at {})",
            revision(created.header)
        );
        drop(requests);

        let revoked = lease
            .lease_revoke(pb::LeaseRevokeRequest { id: granted.id })
            .await
            .expect("revoke")
            .into_inner();
        let revoked_at = revision(revoked.header);
        assert!(
            revoked_at > second,
            "round {i}: revoke answered at {revoked_at}, after a put at {second}"
        );
    }
    door.stop();
}
