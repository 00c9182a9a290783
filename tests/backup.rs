//! Backups with real processes: `raftlock snapshot save` from a live
//! cluster holding locks, queued waiters, an election, generic nodes and
//! sessions; `raftlock snapshot restore` into a fresh three-member cluster
//! (new ports, new data directories); the new cluster serves the same
//! locks (holders, fencing tokens, waiters), nodes and revision. Corrupt
//! files and non-empty data directories are refused.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use raftlock_node::Backup;
use serde_json::{json, Value};
use support::{ProcessCluster, RAFTLOCK};

/// Node data that ends up verbatim in the backup's body: the corruption
/// test flips a byte inside it, where decoding alone cannot notice.
const CANARY: &str = "backup-canary-data";
/// `CANARY` in base64, as the API takes node data.
const CANARY_B64: &str = "YmFja3VwLWNhbmFyeS1kYXRh";

fn run(args: &[&str]) -> Output {
    Command::new(RAFTLOCK)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run raftlock")
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn save(cluster: &ProcessCluster, member: u64, file: &Path) {
    let out = run(&[
        "snapshot",
        "save",
        path(file),
        "--endpoints",
        &cluster.url(member, ""),
    ]);
    assert!(out.status.success(), "save: {}", text(&out));
}

fn restore(cluster: &ProcessCluster, file: &Path, id: u64) -> Output {
    run(&[
        "snapshot",
        "restore",
        path(file),
        "--config",
        path(&cluster.config),
        "--id",
        &id.to_string(),
    ])
}

/// POSTs `body` and checks the answer's status; returns the answer.
async fn post(cluster: &ProcessCluster, member: u64, path: &str, body: Value, want: u16) -> Value {
    let (status, answer) = cluster.post(member, path, body).await;
    assert_eq!(status, want, "POST {path}: {answer}");
    answer
}

/// An acquire's body.
fn acquire(session: &str, wait_ms: u64, keep_queued: bool) -> Value {
    json!({"session_id": session, "wait_ms": wait_ms, "keep_queued": keep_queued})
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Polls (bounded) until `member` reports the wanted value of a gauge.
async fn wait_for_metric(cluster: &ProcessCluster, member: u64, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = None;
    while Instant::now() < deadline {
        let response = cluster.http.get(cluster.url(member, "/metrics")).send();
        if let Ok(response) = response.await {
            let body = response.text().await.unwrap_or_default();
            last = body
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<u64>().ok());
            if last == Some(want) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} on member {member} is {last:?}, want {want}");
}

/// Everything the test compares between the source and the restored
/// cluster, read through the API (linearizable reads).
async fn observe(cluster: &ProcessCluster, member: u64, sessions: &[&str]) -> Value {
    let mut seen = serde_json::Map::new();
    for path in [
        "/v1/locks?prefix=",
        "/v1/locks/orders/42",
        "/v1/locks/jobs/nightly",
        "/v1/elections/app/leader",
        "/v1/nodes/config/a",
        "/v1/nodes/queue?children=true",
        "/v1/nodes/services/alice",
    ] {
        let (status, body) = cluster.get(member, path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        seen.insert(path.to_string(), body);
    }
    for session in sessions {
        let path = format!("/v1/sessions/{session}");
        let (status, body) = cluster.get(member, &path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        seen.insert(path, body);
    }
    Value::Object(seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restores_into_a_new_cluster_with_the_same_locks_nodes_and_revision() {
    let source = ProcessCluster::start(3);
    let leader = source.leader(&[1, 2, 3]).await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");

    // Long TTLs: the sessions must outlive the whole test unrenewed.
    let alice = source.open_session(follower, "alice", 600_000).await;
    let bob = source.open_session(leader, "bob", 600_000).await;
    let carol = source.open_session(follower, "carol", 600_000).await;
    post(
        &source,
        follower,
        "/v1/locks/orders/42/acquire",
        acquire(&alice, 0, false),
        200,
    )
    .await;
    // Bob and Carol queue behind Alice: their waits end, their nodes stay.
    for waiter in [&bob, &carol] {
        post(
            &source,
            leader,
            "/v1/locks/orders/42/acquire",
            acquire(waiter, 100, true),
            408,
        )
        .await;
    }
    post(
        &source,
        leader,
        "/v1/locks/jobs/nightly/acquire",
        acquire(&carol, 0, false),
        200,
    )
    .await;
    post(
        &source,
        follower,
        "/v1/elections/app/leader/campaign",
        json!({"session_id": bob, "value": "host-b:8080", "wait_ms": 0}),
        200,
    )
    .await;
    for (path, body) in [
        ("/v1/nodes/config/a", json!({"data": "Zmlyc3Q="})),
        ("/v1/nodes/config/a", json!({"data": CANARY_B64})),
        (
            "/v1/nodes/services/alice",
            json!({"data": "MTAuMC4wLjE=", "session_id": alice}),
        ),
        (
            "/v1/nodes/queue/job",
            json!({"data": "ag==", "sequential": true}),
        ),
    ] {
        let status = source.put(leader, path, body).await.expect("put");
        assert!(status == 200 || status == 201, "PUT {path}: {status}");
    }
    // Written on the leader just before the save goes to a follower: a
    // linearizable backup must contain it.
    let status = source
        .put(leader, "/v1/nodes/last-write", json!({"data": "eA=="}))
        .await
        .expect("put");
    assert_eq!(status, 201);

    let sessions = [alice.as_str(), bob.as_str(), carol.as_str()];
    let before = observe(&source, leader, &sessions).await;
    // Outside the source's directory, which goes with it.
    let backups = tempfile::tempdir().expect("tempdir");
    let file = backups.path().join("cluster.backup");
    save(&source, follower, &file);

    let out = run(&["snapshot", "inspect", path(&file), "--json"]);
    assert!(out.status.success(), "inspect: {}", text(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("inspect --json");
    assert_eq!(summary["sessions"], 3, "{summary}");
    assert_eq!(summary["locks"], 2, "{summary}");
    assert_eq!(summary["elections"], 1, "{summary}");
    assert_eq!(summary["waiters"], 2, "{summary}");
    let out = run(&["snapshot", "inspect", path(&file)]);
    assert!(out.status.success(), "inspect: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("revision:"));

    let backup = Backup::read_file(&file).expect("a valid backup");
    let state = backup.state().expect("its state");
    assert!(
        state.node("/last-write").is_some(),
        "the last write is missing"
    );
    let revision = backup.header().revision;
    // The new cluster's first leader checkpoints sessions that have no
    // checkpoint yet (one entry, one revision), exactly as after a
    // failover; nothing else is written.
    let unchecked = state
        .session_leases()
        .any(|l| l.checkpoint_remaining_ms.is_none());
    let expected_revision = revision + u64::from(unchecked);
    drop(source);

    // A new cluster: new ports, new (absent) data directories.
    let mut target = ProcessCluster::configure(3);
    for id in 1..=3 {
        let out = restore(&target, &file, id);
        assert!(out.status.success(), "restore {id}: {}", text(&out));
        assert!(target.data_dir(id).join("snapshot.bin").exists());
    }
    // A second restore into a seeded member is refused and changes nothing.
    let seeded = std::fs::read(target.data_dir(1).join("snapshot.bin")).expect("read");
    let out = restore(&target, &file, 1);
    assert!(!out.status.success(), "restored twice: {}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        text(&out)
    );
    let after_refusal = std::fs::read(target.data_dir(1).join("snapshot.bin")).expect("read");
    assert_eq!(seeded, after_refusal);

    for id in 1..=3 {
        target.start_member(id);
    }
    let new_leader = target.leader(&[1, 2, 3]).await;
    wait_for_metric(&target, new_leader, "raftlock_revision", expected_revision).await;
    let new_follower = (1..=3).find(|id| *id != new_leader).expect("a follower");
    let after = observe(&target, new_follower, &sessions).await;
    assert_eq!(before, after, "restored state differs\n{}", target.logs());
    // The members restored one by one agree on each other's identity:
    // the membership names a real incarnation for each (a member wiped
    // later is refused, as in any cluster).
    let (_, view) = target.membership(new_follower).await;
    let incarnations: std::collections::BTreeSet<&str> = view["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m["incarnation"].as_str())
        .filter(|i| *i != "0000000000000000")
        .collect();
    assert_eq!(incarnations.len(), 3, "{view}");

    // The restored sessions are live: renewable, and Alice's release hands
    // the lock to Bob's queued node with its original fencing token.
    post(
        &target,
        new_follower,
        &format!("/v1/sessions/{alice}/keepalive"),
        json!({}),
        200,
    )
    .await;
    let bob_node = &before["/v1/locks/orders/42"]["waiters"][0];
    assert_eq!(bob_node["session_id"], bob.as_str());
    post(
        &target,
        new_leader,
        "/v1/locks/orders/42/release",
        json!({"session_id": alice}),
        204,
    )
    .await;
    let granted = post(
        &target,
        new_follower,
        "/v1/locks/orders/42/acquire",
        acquire(&bob, 0, false),
        200,
    )
    .await;
    assert_eq!(granted["node"], bob_node["node"]);
    let bob_token = bob_node["node"]
        .as_str()
        .and_then(|n| n.rsplit('-').next())
        .and_then(|seq| seq.parse::<u64>().ok())
        .expect("sequence in the node name");
    assert_eq!(granted["fencing_token"], bob_token);
    // New grants continue past the backup's revision: tokens never repeat.
    let fresh = post(
        &target,
        new_follower,
        "/v1/locks/fresh/acquire",
        acquire(&carol, 0, false),
        200,
    )
    .await;
    assert!(fresh["fencing_token"].as_u64().expect("token") > expected_revision);

    // A restored member is an ordinary one: kill -9 and restart every
    // member (snapshot + the log written since) and nothing is lost.
    let (_, fresh_lock) = target.get(new_follower, "/v1/locks/fresh").await;
    for id in 1..=3 {
        target.kill9(id);
    }
    for id in 1..=3 {
        target.start_member(id);
    }
    let leader = target.leader(&[1, 2, 3]).await;
    let (status, again) = target.get(leader, "/v1/locks/fresh").await;
    assert_eq!(status, 200);
    assert_eq!(again, fresh_lock, "{}", target.logs());
    let (_, orders) = target.get(leader, "/v1/locks/orders/42").await;
    assert_eq!(orders["holder"]["node"], bob_node["node"], "{orders}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_backups_and_non_empty_data_dirs_are_refused() {
    let source = ProcessCluster::start(1);
    source.leader(&[1]).await;
    let status = source
        .put(1, "/v1/nodes/canary", json!({"data": CANARY_B64}))
        .await
        .expect("put");
    assert_eq!(status, 201);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("one.backup");
    save(&source, 1, &file);
    drop(source);
    let good = std::fs::read(&file).expect("read backup");
    let target = ProcessCluster::configure(3);

    // One flipped byte inside node data: the state still decodes, so only
    // the checksum can tell. Another in the header's revision field.
    let canary_at = good
        .windows(CANARY.len())
        .position(|w| w == CANARY.as_bytes())
        .expect("node data is stored verbatim");
    for (what, at) in [("body", canary_at + 3), ("header", 12)] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        let corrupt = dir.path().join(format!("corrupt-{what}.backup"));
        std::fs::write(&corrupt, &bad).expect("write");
        let out = run(&["snapshot", "inspect", path(&corrupt)]);
        assert!(
            !out.status.success(),
            "inspect took a corrupt {what}: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("corrupt"),
            "{}",
            text(&out)
        );
        let out = restore(&target, &corrupt, 1);
        assert!(
            !out.status.success(),
            "restore took a corrupt {what}: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("corrupt"),
            "{}",
            text(&out)
        );
        assert!(!target.data_dir(1).exists(), "a refused restore wrote");
    }

    // A member directory that holds anything is refused, untouched.
    std::fs::create_dir_all(target.data_dir(2)).expect("mkdir");
    std::fs::write(target.data_dir(2).join("keep.txt"), "mine").expect("write");
    let out = restore(&target, &file, 2);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        text(&out)
    );
    let entries: Vec<_> = std::fs::read_dir(target.data_dir(2))
        .expect("read dir")
        .collect();
    assert_eq!(entries.len(), 1);
    // An existing empty directory is fine.
    std::fs::create_dir_all(target.data_dir(3)).expect("mkdir");
    let out = restore(&target, &file, 3);
    assert!(out.status.success(), "{}", text(&out));
}
