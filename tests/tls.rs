//! TLS against real `raftlock serve` processes and real handshakes: the
//! client API over HTTPS (plain-HTTP and foreign-CA clients refused,
//! client certificates when `client_auth = "required"`), and mutual TLS
//! on the Raft port (a peer or raw client without a certificate signed
//! by the cluster CA refused at the handshake).

mod support;

use std::time::Duration;

use serde_json::json;
use support::tls::{https_client, TestCa};
use support::ProcessCluster;

/// `GET url`: the status, or the error's whole chain (the TLS reason is
/// at its end).
async fn get(client: &reqwest::Client, url: &str) -> Result<u16, String> {
    match client.get(url).send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text += &format!(": {s}");
                source = s.source();
            }
            Err(text)
        }
    }
}

/// A Raft route on member `id`'s Raft port, over HTTPS.
fn raft_url(cluster: &ProcessCluster, id: u64) -> String {
    format!(
        "https://{}/internal/initialized",
        cluster.raft[(id - 1) as usize]
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_elects_serves_locks_and_refuses_strangers() {
    let mut cluster = ProcessCluster::configure(3);
    let tls = cluster.enable_tls("none");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    // Members reach each other only over mutual TLS: an elected leader
    // and a granted lock prove the Raft port works with the cluster CA.
    let leader = cluster.leader(&[1, 2, 3]).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let session = cluster.open_session(follower, "tls", 30_000).await;
    let (status, grant) = cluster
        .post(
            follower,
            "/v1/locks/job/acquire",
            json!({"session_id": session, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{grant}\n{}", cluster.logs());
    assert!(grant["fencing_token"].as_u64().is_some(), "{grant}");

    // The API: trusting the cluster CA is enough (client_auth = "none").
    let health = cluster.url(1, "/v1/health");
    let trusting = https_client(&tls.ca_path(), None);
    assert_eq!(get(&trusting, &health).await, Ok(200));
    // Plain HTTP to the HTTPS port gets no answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let plain_url = health.replacen("https://", "http://", 1);
    let answer = get(&plain, &plain_url).await;
    assert!(answer.is_err(), "plain HTTP answered: {answer:?}");
    // A client trusting another CA refuses the member's certificate.
    let foreign = TestCa::create(&cluster.dir.path().join("foreign"), "foreign CA");
    let stranger = https_client(&foreign.ca_path(), None);
    let answer = get(&stranger, &health).await;
    assert!(
        answer.as_ref().is_err_and(|e| e.contains("UnknownIssuer")),
        "a foreign-CA client got {answer:?}"
    );

    // The Raft port: the member certificate gets through the handshake
    // (whatever the route answers); no certificate, or one from another
    // CA, does not.
    let url = raft_url(&cluster, leader);
    let member = https_client(&tls.ca_path(), Some(&tls.member));
    let answer = get(&member, &url).await;
    assert!(
        answer.is_ok(),
        "a member certificate was refused: {answer:?}"
    );
    let anonymous = get(&trusting, &url).await;
    assert!(anonymous.is_err(), "no certificate got {anonymous:?}");
    let impostor = https_client(&tls.ca_path(), Some(&foreign.member));
    let answer = get(&impostor, &url).await;
    assert!(answer.is_err(), "a foreign certificate got {answer:?}");
    // A client certificate from the cluster CA (for `client_auth`) is for
    // the API only: the Raft port wants one good for serving too.
    let api_client = https_client(&tls.ca_path(), Some(&tls.client));
    assert_eq!(get(&api_client, &health).await, Ok(200));
    let answer = get(&api_client, &url).await;
    assert!(answer.is_err(), "a client-only certificate got {answer:?}");
    assert!(
        cluster
            .logs()
            .lines()
            .any(|l| l.contains("TLS handshake refused") && l.contains("raft")),
        "no refusal logged:\n{}",
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_auth_required_refuses_clients_without_a_cluster_certificate() {
    let mut cluster = ProcessCluster::configure(1);
    let tls = cluster.enable_tls("required");
    cluster.start_member(1);
    // `cluster.http` presents the client certificate.
    cluster.leader(&[1]).await;
    let health = cluster.url(1, "/v1/health");
    assert_eq!(get(&cluster.http, &health).await, Ok(200));

    let anonymous = https_client(&tls.ca_path(), None);
    let answer = get(&anonymous, &health).await;
    assert!(answer.is_err(), "no client certificate got {answer:?}");
    let foreign = TestCa::create(&cluster.dir.path().join("foreign"), "foreign CA");
    let impostor = https_client(&tls.ca_path(), Some(&foreign.client));
    let answer = get(&impostor, &health).await;
    assert!(
        answer.is_err(),
        "a foreign client certificate got {answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_auth_optional_lets_anonymous_clients_in_but_checks_presented_certificates() {
    let mut cluster = ProcessCluster::configure(1);
    let tls = cluster.enable_tls("optional");
    cluster.start_member(1);
    cluster.leader(&[1]).await;
    let health = cluster.url(1, "/v1/health");
    assert_eq!(get(&cluster.http, &health).await, Ok(200));
    let anonymous = https_client(&tls.ca_path(), None);
    assert_eq!(get(&anonymous, &health).await, Ok(200));
    let foreign = TestCa::create(&cluster.dir.path().join("foreign"), "foreign CA");
    let impostor = https_client(&tls.ca_path(), Some(&foreign.client));
    let answer = get(&impostor, &health).await;
    assert!(
        answer.is_err(),
        "a foreign client certificate got {answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_a_tls_cluster_with_client_certificates_required() {
    // `serve --join` asks the cluster's HTTPS API to add it, presenting
    // its member certificate (the API wants one); the leader then
    // replicates to it over mutual TLS until it votes.
    let mut cluster = ProcessCluster::configure_with_spares(3, 1);
    cluster.enable_tls("required");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    cluster.start_joining(4, &[1, 2, 3]);
    cluster.await_voters(&[1, 2, 3, 4], &[1, 2, 3, 4]).await;
    let (status, _) = cluster.get(4, "/v1/health").await;
    assert_eq!(status, 200, "{}", cluster.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_foreign_certificate_is_refused_by_its_peers() {
    let mut cluster = ProcessCluster::configure(3);
    let tls = cluster.enable_tls("none");
    // Member 3 trusts the cluster CA but shows a certificate another CA
    // signed: its peers must refuse it at the handshake.
    let foreign = TestCa::create(&cluster.dir.path().join("foreign"), "foreign CA");
    let text = std::fs::read_to_string(&cluster.config).expect("config");
    let text = text
        .replace(
            &format!("{:?}", tls.member.cert),
            &format!("{:?}", foreign.member.cert),
        )
        .replace(
            &format!("{:?}", tls.member.key),
            &format!("{:?}", foreign.member.key),
        );
    let impostor_config = cluster.dir.path().join("impostor.toml");
    std::fs::write(&impostor_config, text).expect("impostor config");
    // The first start needs every seed (docs/design.md "Member identity"),
    // so the cluster is founded with the real member 3, which then comes
    // back, on its own data, with the foreign certificate.
    for id in 1..=3 {
        cluster.start_member(id);
    }
    cluster.leader(&[1, 2, 3]).await;
    cluster.kill9(3);
    let leader = cluster.leader(&[1, 2]).await;
    cluster.start_member_with_config(3, &impostor_config);
    let seen_by_3 = https_client(&foreign.ca_path(), None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen_by_3
        .get(cluster.url(3, "/v1/cluster"))
        .send()
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the impostor's API never came up:\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // From here on, the leader's replication errors to member 3 are
    // handshakes with the impostor.
    let leader_log = cluster.dir.path().join(format!("node-{leader}.log"));
    let seen_before = std::fs::read_to_string(&leader_log)
        .unwrap_or_default()
        .len();

    let session = cluster.open_session(leader, "tls", 30_000).await;
    let (status, grant) = cluster
        .post(
            leader,
            "/v1/locks/job/acquire",
            json!({"session_id": session, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{grant}");
    // The leader keeps dialing member 3, whose certificate it refuses.
    while !std::fs::read_to_string(&leader_log)
        .unwrap_or_default()
        .get(seen_before..)
        .is_some_and(|after| after.contains("error replication to target=3"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the leader never tried member 3:\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing the leader committed since reached the impostor. (Its
    // `leader_id` is no evidence: openraft restores it from the vote the
    // member saved before the restart.)
    let view: serde_json::Value = seen_by_3
        .get(cluster.url(3, "/v1/locks/job?consistency=stale"))
        .send()
        .await
        .expect("member 3's API")
        .json()
        .await
        .expect("json");
    assert!(view["holder"].is_null(), "member 3 got the grant: {view}");
}

/// A base port P with P..P+2 and P+100..P+102 free (the layout `raftlock
/// up --base-port P` uses).
fn free_base_port() -> u16 {
    for candidate in (20_500..60_000).step_by(991) {
        // `up` takes the API (+0), Raft (+100), ZooKeeper (+200) and
        // etcd (+300) ports of three members.
        let ports = [0, 1, 2, 100, 101, 102, 200, 201, 202, 300, 301, 302].map(|o| candidate + o);
        if ports
            .iter()
            .all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return candidate;
        }
    }
    panic!("no free port range");
}

/// `raftlock ARGS`, its output.
fn raftlock(args: &[&str]) -> std::process::Output {
    std::process::Command::new(support::RAFTLOCK)
        .args(args)
        .output()
        .expect("run raftlock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_tls_starts_a_tls_cluster_the_cli_talks_to_with_cacert() {
    use std::io::BufRead;
    let base = free_base_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut up = std::process::Command::new(support::RAFTLOCK)
        .args([
            "up",
            "--tls",
            "--base-port",
            &base.to_string(),
            "--data-dir",
        ])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("raftlock up --tls");
    let stdout = up.stdout.take().expect("stdout");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    // Reads every line, so `up` never writes into a closed pipe.
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let mut printed = String::new();
    while !printed.contains("Ctrl-C stops") {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => printed += &(line + "\n"),
            Err(e) => panic!("raftlock up --tls never got ready ({e}): {printed}"),
        }
    }
    let ca = data.join("tls").join("ca.pem");
    let ca = ca.to_str().expect("utf-8 path");
    assert!(printed.contains("cluster ready"), "{printed}");
    assert!(printed.contains(&format!("--cacert {ca}")), "{printed}");
    assert!(
        printed.contains(&format!("https://127.0.0.1:{base}")),
        "{printed}"
    );

    let endpoints = (0..3)
        .map(|i| format!("http://127.0.0.1:{}", base + i))
        .collect::<Vec<_>>()
        .join(",");
    // With the CA the CLI switches to https; without it, plain HTTP gets
    // no answer from the HTTPS ports.
    let status = raftlock(&["status", "--cacert", ca, "--endpoints", &endpoints]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(text.contains("leader:"), "{text}");
    let plain = raftlock(&["status", "--endpoints", &endpoints]);
    assert!(
        !plain.status.success(),
        "plain HTTP status worked: {plain:?}"
    );
    let locked = raftlock(&[
        "lock",
        "tls-job",
        "--cacert",
        ca,
        "--endpoints",
        &endpoints,
        "--",
        "true",
    ]);
    assert!(locked.status.success(), "{locked:?}");

    // Stop `up` the way a user does: Ctrl-C.
    let pid = nix::unistd::Pid::from_raw(up.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let stopped = up.wait().expect("up exits");
    assert!(
        stopped.success(),
        "raftlock up did not stop cleanly: {stopped:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_with_a_missing_key_naming_the_file() {
    let mut cluster = ProcessCluster::configure(1);
    let tls = cluster.enable_tls("none");
    std::fs::remove_file(&tls.member.key).expect("remove the key");
    let config = cluster.config.to_str().expect("utf-8 path").to_string();
    let output = raftlock(&["serve", "--config", &config, "--id", "1"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "started without its key: {output:?}"
    );
    assert!(
        stderr.contains("private key") && stderr.contains("member-key.pem"),
        "{stderr}"
    );
}
