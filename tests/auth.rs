//! Bearer tokens end to end, against real `raftlock serve` processes:
//! tokens made by `raftlock token new`, used by the CLI (`--token-file`,
//! `RAFTLOCK_TOKEN`), and session principals that survive a snapshot and
//! a restart of every member (docs/security.md).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{ProcessCluster, RAFTLOCK};

/// `raftlock token new NAME --allow … --out DIR/NAME.token`; returns the
/// token file and the printed config block.
fn new_token(dir: &Path, name: &str, allow: &[&str]) -> (PathBuf, String) {
    let file = dir.join(format!("{name}.token"));
    let mut command = Command::new(RAFTLOCK);
    command.args(["token", "new", name]).arg("--out").arg(&file);
    for grant in allow {
        command.args(["--allow", grant]);
    }
    let output = command.output().expect("raftlock token new");
    assert!(output.status.success(), "{output:?}");
    let block = String::from_utf8(output.stdout).expect("utf-8");
    assert!(block.contains("[[auth.tokens]]"), "{block}");
    (file, block)
}

fn secret(file: &Path) -> String {
    std::fs::read_to_string(file)
        .expect("token file")
        .trim()
        .to_string()
}

/// A configured, not yet started cluster whose config holds the tokens
/// `ops` (cluster admin), `jobs` and `shop` (each its own prefix);
/// returns it with the three token files, and its client `http` sends the
/// ops token.
fn cluster_with_tokens(size: usize, cluster_keys: &str) -> (ProcessCluster, [PathBuf; 3]) {
    cluster_with_tokens_and_spares(size, 0, cluster_keys)
}

fn cluster_with_tokens_and_spares(
    size: usize,
    spares: usize,
    cluster_keys: &str,
) -> (ProcessCluster, [PathBuf; 3]) {
    let mut cluster = ProcessCluster::configure_with_spares(size, spares);
    let dir = cluster.dir.path().to_path_buf();
    let (ops, ops_block) = new_token(&dir, "ops", &["=admin"]);
    let (jobs, jobs_block) = new_token(&dir, "jobs", &["jobs/=read,lock,write"]);
    let (shop, shop_block) = new_token(&dir, "shop", &["shop/=read,lock", "jobs/=lock"]);
    let text = std::fs::read_to_string(&cluster.config).expect("config");
    let text = text.replacen("[cluster]\n", &format!("[cluster]\n{cluster_keys}"), 1);
    std::fs::write(
        &cluster.config,
        format!("{text}\n{ops_block}\n{jobs_block}\n{shop_block}"),
    )
    .expect("write config");
    cluster.use_token(&secret(&ops));
    (cluster, [ops, jobs, shop])
}

fn raftlock(cluster: &ProcessCluster, args: &[&str]) -> Command {
    let mut command = Command::new(RAFTLOCK);
    command
        .args(args)
        .env("RAFTLOCK_ENDPOINTS", cluster.api.join(","))
        .env_remove("RAFTLOCK_TOKEN")
        .stdin(Stdio::null());
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run raftlock")
}

#[track_caller]
fn fails_with(output: &Output, text: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "should fail: {output:?}");
    assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_authenticates_with_token_files_and_the_environment() {
    let (cluster, [ops, jobs, _shop]) = cluster_with_tokens(3, "");
    let mut cluster = cluster;
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    let jobs_file = jobs.to_str().expect("path");
    let ops_file = ops.to_str().expect("path");

    // No token: every client command is refused with 401.
    let cmd = ["lock", "jobs/nightly", "--", "true"];
    fails_with(&run(&mut raftlock(&cluster, &cmd)), "unauthorized");
    fails_with(&run(&mut raftlock(&cluster, &["status"])), "unauthorized");

    // jobs, from a file: locks under jobs/ and reads the cluster.
    let echo = "echo token=$RAFTLOCK_FENCING_TOKEN";
    let ok = run(&mut raftlock(
        &cluster,
        &[
            "lock",
            "jobs/nightly",
            "--token-file",
            jobs_file,
            "--",
            "sh",
            "-c",
            echo,
        ],
    ));
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("token="));
    let status = run(&mut raftlock(
        &cluster,
        &["status", "--token-file", jobs_file],
    ));
    assert!(status.status.success(), "{status:?}");
    let members = run(&mut raftlock(
        &cluster,
        &["member", "list", "--token-file", jobs_file],
    ));
    assert!(members.status.success(), "{members:?}");

    // jobs, from the environment: nothing outside jobs/, no backups.
    let mut outside = raftlock(&cluster, &["lock", "other/x", "--", "true"]);
    outside.env("RAFTLOCK_TOKEN", secret(&jobs));
    fails_with(&run(&mut outside), "forbidden");
    let backup = cluster.dir.path().join("backup.rlb");
    let backup_arg = backup.to_str().expect("path");
    let mut save = raftlock(&cluster, &["snapshot", "save", backup_arg]);
    save.env("RAFTLOCK_TOKEN", secret(&jobs));
    fails_with(&run(&mut save), "403");
    assert!(!backup.exists());

    // ops is cluster admin: backups and membership.
    let saved = run(&mut raftlock(
        &cluster,
        &["snapshot", "save", backup_arg, "--token-file", ops_file],
    ));
    assert!(saved.status.success(), "{saved:?}");
    assert!(backup.exists());

    // A wrong token is no token.
    let mut wrong = raftlock(&cluster, &["locks"]);
    wrong.env("RAFTLOCK_TOKEN", "rlt_0000");
    fails_with(&run(&mut wrong), "unauthorized");
    // --token and --token-file together are refused by the parser.
    let both = run(&mut raftlock(
        &cluster,
        &["status", "--token", "x", "--token-file", jobs_file],
    ));
    assert!(!both.status.success());
}

/// `POST`/`GET` with a bearer token; (status, JSON body or Null).
/// `no_leader` is retried for up to 10 s, as clients do (docs/api.md: it
/// is always safe to retry): a member starved of CPU right after a
/// restart can miss heartbeats and see an election, which is not what
/// these tests are about.
async fn call(
    http: &reqwest::Client,
    token: &str,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, Value) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut request = http.request(method.clone(), &url).bearer_auth(token);
        if let Some(body) = &body {
            request = request.json(body);
        }
        let answer = match request.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                (status, r.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        };
        let no_leader = answer.0 == 503 && answer.1["error"] == "no_leader";
        if !no_leader || tokio::time::Instant::now() >= give_up {
            return answer;
        }
        // The client's back-off before asking again (a retry schedule,
        // not a wait for some event).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_survive_a_snapshot_and_a_restart_of_every_member() {
    // Snapshots every few entries, so the sessions below end up in one.
    let (mut cluster, [_ops, jobs, shop]) =
        cluster_with_tokens(3, "snapshot_every_entries = 8\nfsync = true\n");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    let (jobs, shop) = (secret(&jobs), secret(&shop));
    let http = reqwest::Client::new();
    let post = reqwest::Method::POST;
    let open = json!({"ttl_ms": 600_000, "owner": "w"});
    let (status, body) = call(
        &http,
        &jobs,
        post.clone(),
        cluster.url(1, "/v1/sessions"),
        Some(open.clone()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let j = body["session_id"].as_str().expect("id").to_string();
    let (status, body) = call(
        &http,
        &shop,
        post.clone(),
        cluster.url(1, "/v1/sessions"),
        Some(open),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let s = body["session_id"].as_str().expect("id").to_string();
    let acquire = json!({"session_id": j, "wait_ms": 0});
    let (status, body) = call(
        &http,
        &jobs,
        post.clone(),
        cluster.url(1, "/v1/locks/jobs/a/acquire"),
        Some(acquire),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Enough entries for a snapshot on every member.
    for i in 0..20 {
        let path = format!("/v1/nodes/jobs/n{i}");
        let (status, body) = call(
            &http,
            &jobs,
            reqwest::Method::PUT,
            cluster.url(1, &path),
            Some(json!({"data": ""})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(1..=3).all(|id| cluster.data_dir(id).join("snapshot.bin").exists()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshots\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for id in 1..=3 {
        cluster.kill9(id);
    }
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;

    // Each member restarted from its snapshot (plus the log after it):
    // the principals are still there, on every member.
    for id in 1..=3 {
        let keepalive = cluster.url(id, &format!("/v1/sessions/{j}/keepalive"));
        let (status, body) = call(&http, &shop, post.clone(), keepalive.clone(), None).await;
        assert_eq!(
            status, 403,
            "shop keeps jobs' session alive via {id}: {body}"
        );
        let (status, body) = call(&http, &jobs, post.clone(), keepalive, None).await;
        assert_eq!(status, 200, "jobs keeps its session alive via {id}: {body}");
        let lock = cluster.url(id, "/v1/locks/jobs/a?consistency=stale");
        let (status, body) = call(&http, &shop, reqwest::Method::GET, lock, None).await;
        // shop may lock under jobs/ but not read it.
        assert_eq!(status, 403, "{body}");
        let lock = cluster.url(id, "/v1/locks/jobs/a?consistency=stale");
        let (status, body) = call(&http, &jobs, reqwest::Method::GET, lock, None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["holder"]["principal"], "jobs", "{body}");
        assert_eq!(body["holder"]["session_id"], j.as_str(), "{body}");
        let release = cluster.url(id, "/v1/locks/jobs/a/release");
        let (status, body) = call(
            &http,
            &shop,
            post.clone(),
            release,
            Some(json!({"session_id": j})),
        )
        .await;
        assert_eq!(status, 403, "shop releases jobs' lock via {id}: {body}");
    }
    let (status, body) = cluster.get(1, &format!("/v1/sessions/{s}")).await;
    assert_eq!(status, 200, "ops sees every session: {body}");
    assert_eq!(body["principal"], "shop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_a_cluster_with_tokens_with_an_admin_token_only() {
    let (mut cluster, [ops, jobs, _shop]) = cluster_with_tokens_and_spares(3, 2, "");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    let file = |path: &PathBuf| vec!["--token-file".to_string(), path.display().to_string()];
    // A token that is not cluster admin cannot add the member: serve
    // --join gives up with the server's answer.
    cluster.start_joining_with(4, &[1, 2, 3], &file(&jobs));
    let refused = cluster.wait_exit(4, Duration::from_secs(60));
    assert!(
        refused.is_some_and(|s| !s.success()),
        "member 4 should fail to join: {refused:?}\n{}",
        cluster.logs()
    );
    let log = std::fs::read_to_string(cluster.dir.path().join("node-4.log")).expect("log");
    assert!(log.contains("403"), "{log}");
    assert_eq!(cluster.voters(1).await, [1, 2, 3]);
    // The admin token adds it.
    cluster.start_joining_with(5, &[1, 2, 3], &file(&ops));
    cluster.await_voters(&[1, 2, 3, 5], &[1, 2, 3, 5]).await;
}
