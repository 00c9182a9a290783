//! A member's disk really fills up (its data directory is a small tmpfs,
//! filled by a ballast file), first on the leader, then on a follower:
//! the cluster serves on (reads, writes through the others, the held lock
//! with its fencing token and holder unchanged), the full member answers
//! writes `503 disk_full`, and once the ballast is removed it reopens its
//! log and rejoins by itself, in this same process: back as a voter,
//! caught up, every acknowledged write readable on it (docs/design.md,
//! "A full disk"; `crates/raftlock-node/src/disk/storage_watch.rs`).
//!
//! Needs root to mount the tmpfs (CI runs as root); without it each test
//! says SKIPPED on stderr and passes.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::common::{eventually, TestCluster, WAIT};
use crate::tmpfs::Ballast;

/// Size of each member's tmpfs. The member waits for 4 MiB free before it
/// reopens (`disk_space.rs`); the ballast leaves none.
const TMPFS_MB: u64 = 16;
/// Short enough that a session kept alive only through the others would
/// expire during the test if its keepalives were refused.
const SESSION_TTL_MS: u64 = 3_000;

#[derive(Clone, Copy, Debug)]
enum Role {
    Leader,
    Follower,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_disk_fills_up_rejoins_in_place_once_there_is_room() {
    full_disk_round(Role::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_disk_fills_up_rejoins_in_place_once_there_is_room() {
    full_disk_round(Role::Follower).await;
}

/// Snapshots in [`a_snapshot_that_meets_the_full_disk_first_recovers_in_place`]:
/// often, so the next one comes within a few writes of the disk filling.
const SNAPSHOT_EVERY: u64 = 20;
/// What the ballast leaves free there: eight of the log's 64 KiB
/// zero-filled chunks (thousands of small entries), far less than the
/// snapshot, which holds [`BIG_NODES`] nodes of [`BIG_NODE_BYTES`].
const ROOM_LEFT: u64 = 512 * 1024;
const BIG_NODES: usize = 3;
const BIG_NODE_BYTES: usize = 399_999;

/// The first write that meets the full disk is a snapshot, not the log:
/// openraft stops at the snapshot's error while the log's barriers still
/// succeed. The member must still leave the Raft group saying
/// `disk_full`, and come back in place once there is room, as it does
/// when its log meets the full disk first (state_machine.rs,
/// `StateMachineStore::snapshot_not_stored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_that_meets_the_full_disk_first_recovers_in_place() {
    let Some(cluster) = TestCluster::start_on_tmpfs_snapshotting(TMPFS_MB, SNAPSHOT_EVERY).await
    else {
        return;
    };
    let leader = cluster.leader().await;
    let full = (leader + 1) % 3;
    let full_id = full as u64 + 1;

    // A state whose snapshot cannot fit in the room the ballast leaves.
    let big = "AAAA".repeat(BIG_NODE_BYTES / 3);
    let mut acked = Vec::new();
    for i in 0..BIG_NODES {
        let path = format!("acked/big-{i}");
        cluster
            .call(
                leader,
                Method::PUT,
                &format!("/v1/nodes/{path}"),
                Some(json!({ "data": big })),
            )
            .await
            .expect(201, "a large node");
        acked.push(path);
    }

    let ballast = cluster.tmpfs[full].fill_leaving(ROOM_LEFT);
    let deadline = Instant::now() + WAIT;
    let failure = loop {
        let path = format!("acked/small-{}", acked.len());
        if put(&cluster, leader, &path).await.status.as_u16() == 201 {
            acked.push(path);
        }
        let health = cluster.get(full, "/v1/health").await;
        if health.status.as_u16() == 503 && health.body["error"] == "disk_full" {
            break health.body["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        assert!(
            Instant::now() < deadline,
            "n{full_id} never said its disk is full: {}",
            health.body
        );
    };
    assert!(
        failure.contains("snapshot"),
        "the snapshot, not the log, met the full disk: {failure}"
    );
    rejoins_once_the_ballast_is_gone(&cluster, full, ballast).await;
    for path in &acked {
        cluster
            .get(full, &format!("/v1/nodes/{path}"))
            .await
            .expect(200, &format!("{path} through the recovered member"));
    }
    put(&cluster, full, "acked/after")
        .await
        .expect(201, "a write through the recovered member");
    cluster.shutdown().await;
}

async fn full_disk_round(role: Role) {
    let Some(cluster) = TestCluster::start_on_tmpfs(TMPFS_MB).await else {
        return;
    };
    let leader = cluster.leader().await;
    let full = match role {
        Role::Leader => leader,
        Role::Follower => (leader + 1) % 3,
    };
    let healthy: Vec<usize> = (0..3).filter(|i| *i != full).collect();
    let full_id = full as u64 + 1;

    // A held lock, kept alive through the healthy members only.
    let session = cluster
        .post(
            healthy[0],
            "/v1/sessions",
            json!({"ttl_ms": SESSION_TTL_MS, "owner": "holder"}),
        )
        .await
        .expect(201, "open session")["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let grant = cluster
        .acquire(healthy[0], "held", &session, 1_000)
        .await
        .expect(200, "acquire before the disk fills")
        .clone();
    let token = grant["fencing_token"].as_u64().expect("fencing token");
    let keepalive = keep_alive(&cluster, &healthy, &session);

    let mut acked = Vec::new();
    for i in 0..5 {
        let path = format!("acked/before-{i}");
        put(&cluster, leader, &path)
            .await
            .expect(201, "a write before");
        acked.push(path);
    }

    // The disk fills up. The full member notices at its next log write:
    // through it if it leads, through the leader if it follows.
    let ballast = cluster.tmpfs[full].fill();
    let deadline = Instant::now() + WAIT;
    for i in 0.. {
        let path = format!("acked/filling-{i}");
        if put(&cluster, leader, &path).await.status.as_u16() == 201 {
            acked.push(path);
        }
        let health = cluster.get(full, "/v1/health").await;
        if health.status.as_u16() == 503 && health.body["error"] == "disk_full" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "n{full_id} never noticed its full disk: {}",
            health.body
        );
    }

    // The others lead and serve; the held lock is as it was.
    eventually("a leader among the members with room", || async {
        let seen: Vec<_> = healthy
            .iter()
            .map(|i| cluster.node(*i).status().leader_id)
            .collect();
        seen[0].is_some_and(|l| l != full_id) && seen[0] == seen[1]
    })
    .await;
    for i in 0..5 {
        let path = format!("acked/while-full-{i}");
        write_eventually(&cluster, healthy[i % 2], &path).await;
        acked.push(path);
    }
    for i in &healthy {
        assert_holder(
            &cluster,
            *i,
            &session,
            token,
            "a member with room, while full",
        )
        .await;
    }

    // The full member refuses writes, saying why; it still answers stale
    // reads from memory.
    let refused = put(&cluster, full, "acked/on-the-full-one").await;
    assert_eq!(
        refused.headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..]),
        "a disk_full answer says when to retry"
    );
    refused.expect_error(503, "disk_full", "a write on the full member");
    cluster
        .acquire(full, "another", &session, 0)
        .await
        .expect_error(503, "disk_full", "an acquire on the full member");
    cluster.get(full, "/v1/health").await.expect_error(
        503,
        "disk_full",
        "health of the full member",
    );
    cluster
        .get(full, "/v1/nodes/acked/before-0?consistency=stale")
        .await
        .expect(200, "a stale read on the full member");
    rejoins_once_the_ballast_is_gone(&cluster, full, ballast).await;
    let leader_now = cluster.leader().await;
    let members = cluster.get(leader_now, "/v1/cluster/members").await;
    let me = members.expect(200, "membership")["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|m| m["id"] == full_id)
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(me["voter"], true, "still a voter: {me}");

    // Nothing lost: every acknowledged write is on the member (its own
    // state, stale read) and readable through it (linearizable).
    eventually(
        "every acknowledged write in the member's own state",
        || async {
            for path in &acked {
                let url = format!("/v1/nodes/{path}?consistency=stale");
                if cluster.get(full, &url).await.status.as_u16() != 200 {
                    return false;
                }
            }
            true
        },
    )
    .await;
    for path in &acked {
        cluster
            .get(full, &format!("/v1/nodes/{path}"))
            .await
            .expect(200, &format!("{path} through the recovered member"));
    }
    assert_holder(&cluster, full, &session, token, "the recovered member").await;
    put(&cluster, full, "acked/after")
        .await
        .expect(201, "a write through the recovered member");

    keepalive.abort();
    cluster.shutdown().await;
}

/// Space returns: the full member comes back by itself, in this process,
/// rebuilding its Raft exactly once.
async fn rejoins_once_the_ballast_is_gone(cluster: &TestCluster, full: usize, ballast: Ballast) {
    assert_eq!(cluster.node(full).storage_recoveries(), 0);
    ballast.remove();
    eventually("the member to rejoin and catch up", || async {
        cluster.get(full, "/v1/health").await.status.as_u16() == 200
    })
    .await;
    assert_eq!(
        cluster.node(full).storage_recoveries(),
        1,
        "the member rebuilt its Raft in place exactly once"
    );
}

async fn put(cluster: &TestCluster, i: usize, path: &str) -> crate::common::Reply {
    cluster
        .call(
            i,
            Method::PUT,
            &format!("/v1/nodes/{path}"),
            Some(json!({"data": "AQID"})),
        )
        .await
}

/// Writes `path` through member `i`, retrying the refusals of an election
/// (`no_leader`); fails on anything else or after `WAIT`.
async fn write_eventually(cluster: &TestCluster, i: usize, path: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let reply = put(cluster, i, path).await;
        match reply.status.as_u16() {
            201 | 200 => return,
            503 if reply.body["error"] == "no_leader" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => panic!("writing {path} through n{}: {}", i + 1, reply.body),
        }
    }
}

/// The lock `held` is held by `session` with fencing token `token`, read
/// linearizably through member `i`.
async fn assert_holder(cluster: &TestCluster, i: usize, session: &str, token: u64, what: &str) {
    let reply = cluster.get(i, "/v1/locks/held").await;
    let holder = &reply.expect(200, what)["holder"];
    assert_eq!(holder["session_id"], session, "{what}: {holder}");
    assert_eq!(holder["fencing_token"], token, "{what}: {holder}");
}

/// Keeps `session` alive through the members in `via`, in turn, every
/// 300 ms (a tenth of its TTL) until aborted. Failures are left to show
/// as a lost lock.
fn keep_alive(cluster: &TestCluster, via: &[usize], session: &str) -> tokio::task::JoinHandle<()> {
    let http = cluster.http.clone();
    let urls: Vec<String> = via
        .iter()
        .map(|i| format!("{}/v1/sessions/{session}/keepalive", cluster.urls[*i]))
        .collect();
    tokio::spawn(async move {
        for url in urls.iter().cycle() {
            let _ = http.post(url).send().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}
