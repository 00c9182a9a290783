//! The day-2 commands (`session`, `lock-info`, `election`, `node`,
//! `fencing-check`, `--json`) end to end, against real member processes.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use support::{ProcessCluster, RAFTLOCK};

fn raftlock(cluster: &ProcessCluster, args: &[&str]) -> Command {
    let mut command = Command::new(RAFTLOCK);
    command
        .args(args)
        .env("RAFTLOCK_ENDPOINTS", cluster.api.join(","))
        .stdin(Stdio::null());
    command
}

/// Runs `raftlock args…`, asserting success; returns stdout.
fn ok(cluster: &ProcessCluster, args: &[&str]) -> String {
    let output = raftlock(cluster, args).output().expect("run raftlock");
    assert!(output.status.success(), "raftlock {args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("utf-8")
}

/// Runs `raftlock args… --json`, asserting success; returns the JSON.
fn json_of(cluster: &ProcessCluster, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let text = ok(cluster, &args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

fn run(cluster: &ProcessCluster, args: &[&str]) -> Output {
    raftlock(cluster, args).output().expect("run raftlock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_lock_is_found_and_broken_without_curl() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    // `job` held by a session with a long TTL (its process gone, say),
    // another session queued behind it.
    let held = cluster.hold_and_queue(1, 2, 60_000).await;

    let info = json_of(&cluster, &["lock-info", "job"]);
    assert_eq!(info["holder"]["session_id"], held.holder.as_str(), "{info}");
    assert_eq!(info["holder"]["fencing_token"], held.token, "{info}");
    assert_eq!(
        info["waiters"][0]["session_id"],
        held.waiter.as_str(),
        "{info}"
    );
    let text = ok(&cluster, &["lock-info", "job"]);
    assert!(
        text.contains(&held.holder) && text.contains("waiters: 1"),
        "{text}"
    );
    assert!(
        text.contains(&format!("raftlock session close {}", held.holder)),
        "{text}"
    );

    let listed = json_of(&cluster, &["session", "list"]);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert!(
        ids.contains(&held.holder.as_str()) && ids.contains(&held.waiter.as_str()),
        "{listed}"
    );
    let table = ok(&cluster, &["session", "list"]);
    assert!(
        table.contains(&held.holder) && table.contains("holder"),
        "{table}"
    );

    let shown = json_of(&cluster, &["session", "show", &held.holder]);
    assert_eq!(shown["owner"], "holder", "{shown}");
    let nodes = shown["nodes"].as_array().expect("nodes");
    assert!(
        nodes
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.starts_with("/locks/job/"))),
        "{shown}"
    );
    assert!(ok(&cluster, &["session", "show", &held.holder]).contains("/locks/job/"));

    // Break it: the waiter's long poll is granted, with a newer token.
    let closed = ok(&cluster, &["session", "close", &held.holder]);
    assert!(closed.contains("closed"), "{closed}");
    let granted = held.waiting.await.expect("join").expect("waiter's request");
    assert_eq!(granted.status().as_u16(), 200);
    let grant: Value = granted.json().await.expect("grant");
    assert!(
        grant["fencing_token"].as_u64() > Some(held.token),
        "{grant}"
    );
    let after = json_of(&cluster, &["lock-info", "job"]);
    assert_eq!(
        after["holder"]["session_id"],
        held.waiter.as_str(),
        "{after}"
    );
    // The closed session is gone: `show` fails, naming the code.
    let gone = run(&cluster, &["session", "show", &held.holder]);
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("session_not_found"),
        "{gone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_are_shown_and_observed() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let session = cluster.open_session(1, "candidate", 60_000).await;
    let (status, body) = cluster
        .post(
            1,
            "/v1/elections/svc/campaign",
            json!({"session_id": session, "value": "host-a", "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let shown = json_of(&cluster, &["election", "show", "svc"]);
    assert_eq!(shown["leader"]["value"], "host-a", "{shown}");
    assert_eq!(shown["leader"]["session_id"], session.as_str(), "{shown}");
    assert!(ok(&cluster, &["election", "show", "svc"]).contains("leader: host-a"));
    assert!(ok(&cluster, &["election", "show", "nobody"]).contains("no leader"));

    let mut observer = raftlock(
        &cluster,
        &["election", "observe", "svc", "--count", "2", "--json"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn observe");
    let mut lines = BufReader::new(observer.stdout.take().expect("stdout")).lines();
    // The first event is the current state; only then proclaim, so the
    // second is the change.
    let first = tokio::task::spawn_blocking(move || {
        let line = lines.next().expect("a first event").expect("read");
        (line, lines)
    });
    let (first, mut lines) = first.await.expect("join");
    let first: Value = serde_json::from_str(&first).expect("json line");
    assert_eq!(first["leader"]["value"], "host-a", "{first}");
    let (status, body) = cluster
        .post(
            2,
            "/v1/elections/svc/proclaim",
            json!({"session_id": session, "value": "host-b"}),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let second =
        tokio::task::spawn_blocking(move || lines.next().expect("a second event").expect("read"))
            .await
            .expect("join");
    let second: Value = serde_json::from_str(&second).expect("json line");
    assert_eq!(second["election"], "svc");
    assert_eq!(second["leader"]["value"], "host-b", "{second}");
    assert!(
        observer.wait().expect("observe exits").success(),
        "--count 2 ends it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_written_read_and_listed() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let put = ok(
        &cluster,
        &["node", "put", "config/db", "postgres://db:5432"],
    );
    assert!(put.contains("/config/db version 1"), "{put}");
    assert_eq!(
        ok(&cluster, &["node", "get", "config/db"]),
        "postgres://db:5432"
    );
    let node = json_of(&cluster, &["node", "get", "/config/db"]);
    assert_eq!(node["version"], 1, "{node}");
    let updated = json_of(
        &cluster,
        &["node", "put", "config/db", "x", "--expected-version", "1"],
    );
    assert_eq!(updated["version"], 2, "{updated}");
    let refused = run(
        &cluster,
        &["node", "put", "config/db", "y", "--expected-version", "1"],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("version_mismatch"),
        "{refused:?}"
    );

    let seq = ok(
        &cluster,
        &["node", "put", "queue/item-", "a", "--sequential"],
    );
    // ZooKeeper's spelling: the counter right after the `-`, ten digits.
    let created = seq.split(' ').next().expect("a path");
    let counter = created.strip_prefix("/queue/item-").expect("under queue/");
    assert!(
        counter.len() == 10 && counter.bytes().all(|b| b.is_ascii_digit()),
        "{seq}"
    );
    assert_eq!(ok(&cluster, &["node", "ls", "config"]), "db\n");
    let top = ok(&cluster, &["node", "ls"]);
    assert!(
        top.lines().any(|l| l == "config") && top.lines().any(|l| l == "queue"),
        "{top}"
    );
    let children = json_of(&cluster, &["node", "ls", "queue"]);
    assert_eq!(
        children["children"],
        json!([&created["/queue/".len()..]]),
        "{children}"
    );
    let missing = run(&cluster, &["node", "get", "nope"]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not_found"),
        "{missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_check_and_json_on_the_other_read_commands() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let session = cluster.open_session(1, "writer", 60_000).await;
    let (status, grant) = cluster
        .post(
            1,
            "/v1/locks/orders/42/acquire",
            json!({"session_id": session, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{grant}");
    let token = grant["fencing_token"].as_u64().expect("token");

    let current = run(
        &cluster,
        &["fencing-check", "orders/42", &token.to_string()],
    );
    assert_eq!(current.status.code(), Some(0), "{current:?}");
    assert!(String::from_utf8_lossy(&current.stdout).starts_with("valid"));
    let stale = run(
        &cluster,
        &["fencing-check", "orders/42", &(token - 1).to_string()],
    );
    assert_eq!(stale.status.code(), Some(3), "{stale:?}");
    assert!(String::from_utf8_lossy(&stale.stdout).contains(&format!("is {token}")));
    let answer = run(
        &cluster,
        &["fencing-check", "orders/42", &token.to_string(), "--json"],
    );
    let answer: Value = serde_json::from_slice(&answer.stdout).expect("json");
    assert_eq!(answer, json!({"valid": true, "current_token": token}));

    let status = json_of(&cluster, &["status"]);
    assert_eq!(
        status["members"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );
    let locks = json_of(&cluster, &["locks", "orders/"]);
    assert_eq!(locks["locks"][0]["lock"], "orders/42", "{locks}");
    let members = json_of(&cluster, &["member", "list"]);
    assert_eq!(
        members["members"].as_array().map(Vec::len),
        Some(3),
        "{members}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_and_semaphore_holders_are_shown() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let (r1, r2) = (
        cluster.open_session(1, "reader-1", 60_000).await,
        cluster.open_session(2, "reader-2", 60_000).await,
    );
    for (via, session) in [(1, &r1), (2, &r2)] {
        let (status, body) = cluster
            .post(
                via,
                "/v1/rwlocks/reports/acquire",
                json!({"session_id": session, "mode": "read", "wait_ms": 0}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = cluster
        .post(
            1,
            "/v1/semaphores/gpu/acquire",
            json!({"session_id": r1, "permits": 2, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let info = json_of(&cluster, &["lock-info", "--rwlock", "reports"]);
    let holders = info["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 2, "{info}");
    assert_eq!(holders[0]["session_id"], r1.as_str(), "{info}");
    assert_eq!(holders[1]["mode"], "read", "{info}");
    let text = ok(&cluster, &["lock-info", "--rwlock", "reports"]);
    assert!(
        text.contains("holders: 2") && text.contains(&r2) && text.contains("read "),
        "{text}"
    );
    let text = ok(&cluster, &["lock-info", "--semaphore", "gpu"]);
    assert!(
        text.contains("permits: 2") && text.contains("holders: 1") && text.contains(&r1),
        "{text}"
    );
    let listed = ok(&cluster, &["locks", "--rwlocks"]);
    assert!(
        listed.contains("reports") && listed.contains("read") && listed.contains("reader-2"),
        "{listed}"
    );
    let listed = json_of(&cluster, &["locks", "--semaphores", "gp"]);
    assert_eq!(listed["semaphores"][0]["permits"], 2, "{listed}");
    assert!(ok(&cluster, &["locks", "--semaphores", "x"]).contains("no semaphores"));
    // The lock of the same name is another queue: nobody holds it.
    assert!(ok(&cluster, &["lock-info", "reports"]).contains("holder: none"));
    let both = run(&cluster, &["lock-info", "--rwlock", "--semaphore", "x"]);
    assert!(!both.status.success(), "the flags exclude each other");
}
