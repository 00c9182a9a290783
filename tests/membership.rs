//! Membership changes with real `raftlock serve` processes: grow 3 → 5
//! and shrink 5 → 3 (the leader among the removed) while one client holds
//! a lock and another waits; replace a killed member; the refusals.

mod support;

use serde_json::{json, Value};
use support::{ProcessCluster, RAFTLOCK};

/// Puts `count` nodes under `prefix` through member `via`; every one must
/// be acknowledged (201).
async fn write_acked(
    cluster: &ProcessCluster,
    via: u64,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    let mut acked = Vec::new();
    for i in 0..count {
        let path = format!("/v1/nodes/{prefix}/k{i}");
        let status = cluster.put(via, &path, json!({"data": "eA=="})).await;
        assert_eq!(status.ok(), Some(201), "write {path} via {via}");
        acked.push(path);
    }
    acked
}

/// Every acknowledged write is readable (linearizably) through `via`.
async fn assert_readable(cluster: &ProcessCluster, via: u64, acked: &[String]) {
    for path in acked {
        let (status, body) = cluster.get(via, path).await;
        assert_eq!(
            status, 200,
            "acknowledged {path} lost (read via {via}): {body}"
        );
    }
}

async fn lock_state(cluster: &ProcessCluster, via: u64) -> Value {
    let (status, lock) = cluster.get(via, "/v1/locks/job").await;
    assert_eq!(status, 200, "{lock}");
    lock
}

/// `raftlock member remove ID` through member `via`'s API.
fn cli_remove(cluster: &ProcessCluster, via: u64, id: u64) {
    let out = std::process::Command::new(RAFTLOCK)
        .args(["member", "remove", &id.to_string(), "--endpoints"])
        .arg(cluster.url(via, ""))
        .output()
        .expect("run raftlock member remove");
    assert!(
        out.status.success(),
        "member remove {id}: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_to_five_and_shrink_to_three_while_a_lock_is_held_and_awaited() {
    let mut cluster = ProcessCluster::start_with_spares(3, 2);
    let leader = cluster.leader(&[1, 2, 3]).await;
    // The waiter long-polls on a follower that stays in the cluster.
    let stays = (1..=3).find(|id| *id != leader).expect("a follower");

    let support::HeldAndQueued {
        holder,
        waiter,
        token: held_token,
        waiting,
    } = cluster.hold_and_queue(stays, stays, 120_000).await;
    let mut acked = write_acked(&cluster, stays, "before", 20).await;

    // Grow: 4 and 5 join through the seed members' API.
    cluster.start_joining(4, &[1, 2, 3]);
    cluster.await_voters(&[1, 2, 3, 4], &[1, 2, 3, 4]).await;
    acked.extend(write_acked(&cluster, 4, "with-four", 20).await);
    cluster.start_joining(5, &[1, 2, 3]);
    cluster
        .await_voters(&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 5])
        .await;
    acked.extend(write_acked(&cluster, 5, "with-five", 20).await);
    assert_readable(&cluster, 5, &acked).await;

    // Shrink: remove the current leader (unless it is `stays`, which
    // hosts the waiter's long poll) and one more seed.
    let leader = cluster.leader(&[1, 2, 3, 4, 5]).await;
    let mut removed: Vec<u64> = Vec::new();
    if leader != stays && leader <= 3 {
        removed.push(leader);
    }
    for id in 1..=3 {
        if removed.len() < 2 && id != stays && !removed.contains(&id) {
            removed.push(id);
        }
    }
    println!("leader {leader}; removing {removed:?}; the waiter polls on {stays}");
    for id in &removed {
        cli_remove(&cluster, stays, *id);
    }
    let mut kept: Vec<u64> = vec![stays, 4, 5];
    kept.sort_unstable();
    cluster.await_voters(&kept, &kept).await;
    // The removed members are gone for good: the rest must not need them.
    for id in &removed {
        cluster.kill9(*id);
    }
    cluster.leader(&kept).await;
    acked.extend(write_acked(&cluster, 4, "after", 20).await);
    for via in &kept {
        assert_readable(&cluster, *via, &acked).await;
    }

    // The holder kept the lock through every change; the waiter is next.
    let lock = lock_state(&cluster, 4).await;
    assert_eq!(lock["holder"]["session_id"], json!(holder), "{lock}");
    assert_eq!(lock["holder"]["fencing_token"], json!(held_token), "{lock}");
    let (status, body) = cluster
        .post(4, "/v1/locks/job/release", json!({"session_id": holder}))
        .await;
    assert_eq!(status, 204, "release: {body}");
    let granted = waiting
        .await
        .expect("waiter task")
        .expect("waiter's long poll");
    assert_eq!(granted.status().as_u16(), 200);
    let granted: Value = granted.json().await.expect("grant body");
    let waiter_token = granted["fencing_token"].as_u64().expect("token");
    assert!(
        waiter_token > held_token,
        "{waiter_token} after {held_token}"
    );

    // A third session, through a member that joined at run time.
    let third = cluster.open_session(5, "third", 60_000).await;
    let (status, body) = cluster
        .post(
            stays,
            "/v1/locks/job/release",
            json!({"session_id": waiter}),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = cluster
        .post(
            5,
            "/v1/locks/job/acquire",
            json!({"session_id": third, "wait_ms": 10_000}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["fencing_token"].as_u64().expect("token") > waiter_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_is_replaced_and_the_replacement_counts_for_quorum() {
    let mut cluster = ProcessCluster::start_with_spares(3, 1);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let dead = (1..=3).find(|id| *id != leader).expect("a follower");
    let alive: Vec<u64> = (1..=3).filter(|id| *id != dead).collect();
    let mut acked = write_acked(&cluster, leader, "before", 10).await;
    cluster.kill9(dead);
    acked.extend(write_acked(&cluster, leader, "degraded", 10).await);

    // Refusals first: each changes nothing.
    let (status, body) = cluster.delete(leader, "/v1/cluster/members/42").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let (status, body) = cluster
        .post(
            leader,
            "/v1/cluster/members",
            json!({"id": alive[0], "api_addr": "127.0.0.1:1", "raft_addr": "127.0.0.1:2"}),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("member_exists")),
        "{body}"
    );
    let (status, body) = cluster
        .post(
            leader,
            "/v1/cluster/members",
            json!({"id": 9, "api_addr": "nowhere", "raft_addr": "127.0.0.1:2"}),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );

    // Replace: add the new member, then remove the dead one.
    let through: Vec<u64> = alive.clone();
    cluster.start_joining(4, &through);
    let mut with_new = vec![1, 2, 3, 4];
    with_new.sort_unstable();
    cluster
        .await_voters(&[alive[0], alive[1], 4], &with_new)
        .await;
    let follower = alive
        .iter()
        .copied()
        .find(|id| *id != leader)
        .expect("follower");
    let (status, body) = cluster
        .delete(follower, &format!("/v1/cluster/members/{dead}"))
        .await;
    assert_eq!(status, 200, "remove {dead} through a follower: {body}");
    let mut voters = vec![alive[0], alive[1], 4];
    voters.sort_unstable();
    cluster.await_voters(&voters, &voters).await;
    assert_readable(&cluster, 4, &acked).await;

    // The replacement is a real voter: with the old leader gone too, the
    // survivor and the replacement still form a quorum.
    let leader = cluster.leader(&voters).await;
    cluster.kill9(leader);
    let rest: Vec<u64> = voters.iter().copied().filter(|id| *id != leader).collect();
    cluster.leader(&rest).await;
    acked.extend(write_acked(&cluster, 4, "replaced", 10).await);
    assert_readable(&cluster, rest[0], &acked).await;

    // A restarted joiner (same command line) is a voter already and
    // starts without asking again.
    cluster.kill9(4);
    let other: Vec<u64> = rest.iter().copied().filter(|id| *id != 4).collect();
    cluster.start_joining(4, &other);
    cluster.leader(&rest).await;
    acked.extend(write_acked(&cluster, 4, "restarted", 5).await);
    assert_readable(&cluster, 4, &acked).await;

    // A seed member restarts with the membership of its log, not the
    // file's: with it and 4 the only live voters, they elect and commit.
    let seed = other[0];
    cluster.kill9(seed);
    cluster.start_member(seed);
    cluster.leader(&rest).await;
    acked.extend(write_acked(&cluster, seed, "seed-restarted", 5).await);
    assert_readable(&cluster, 4, &acked).await;
}

/// `raftlock member add ID` for member `id` at its configured addresses,
/// through member `via`'s API; returns what it printed.
fn cli_add(cluster: &ProcessCluster, via: u64, id: u64) -> String {
    let i = (id - 1) as usize;
    let out = std::process::Command::new(RAFTLOCK)
        .args(["member", "add", &id.to_string(), "--api-addr"])
        .arg(cluster.api[i].trim_start_matches("http://"))
        .arg("--raft-addr")
        .arg(&cluster.raft[i])
        .arg("--endpoints")
        .arg(cluster.url(via, ""))
        .output()
        .expect("run raftlock member add");
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "member add {id}: {printed}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
    printed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_member_is_refused_then_removed_and_added_back() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let wiped = (1..=3).find(|id| *id != leader).expect("a follower");
    let others: Vec<u64> = (1..=3).filter(|id| *id != wiped).collect();
    let mut acked = write_acked(&cluster, leader, "before", 10).await;
    let queued = cluster.hold_and_queue(leader, leader, 60_000).await;
    let (_, before) = cluster.membership(leader).await;
    let old_incarnation = before["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["id"] == wiped))
        .and_then(|m| m["incarnation"].as_str())
        .expect("incarnation listed")
        .to_string();

    // Its disk is wiped; it restarts from the same config.
    cluster.kill9(wiped);
    std::fs::remove_dir_all(cluster.data_dir(wiped)).expect("wipe");
    cluster.start_member(wiped);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let refusal = loop {
        let (status, body) = cluster.get(wiped, "/v1/health").await;
        if status == 503 && body["error"] == "member_replaced" {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the wiped member was not refused: {status} {body}\n{}",
            cluster.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let message = refusal["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("raftlock member remove {wiped}")),
        "{message}"
    );
    assert!(
        cluster
            .logs()
            .contains(&format!("Run `raftlock member remove {wiped}`")),
        "the wiped member logs the fix\n{}",
        cluster.logs()
    );
    let (status, body) = cluster
        .post(wiped, "/v1/sessions", json!({"ttl_ms": 5_000}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("member_replaced"))
    );

    // The leader's member list says which member refuses, and why.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, view) = cluster.membership(leader).await;
        let state = view["members"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["id"] == wiped))
            .map(|m| m["state"].clone());
        if state == Some(json!("member_replaced")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the leader does not show the refusal: {view}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The others keep their leader, the lock and its queue.
    assert_eq!(cluster.leader(&others).await, leader);
    let lock = lock_state(&cluster, leader).await;
    assert_eq!(lock["holder"]["session_id"], queued.holder, "{lock}");
    acked.extend(write_acked(&cluster, leader, "while-refused", 10).await);

    // The fix the message names.
    cli_remove(&cluster, leader, wiped);
    cluster.await_voters(&others, &others).await;
    let printed = cli_add(&cluster, leader, wiped);
    assert!(!printed.contains(&old_incarnation), "{printed}");
    cluster.await_voters(&[1, 2, 3], &[1, 2, 3]).await;
    assert_eq!(cluster.leader(&[1, 2, 3]).await, leader);
    assert_readable(&cluster, wiped, &acked).await;
    let lock = lock_state(&cluster, wiped).await;
    assert_eq!(lock["holder"]["session_id"], queued.holder, "{lock}");
    queued.waiting.abort();
}
