//! The `raftlock` command end to end, against real member processes.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{ProcessCluster, RAFTLOCK};

fn raftlock(cluster: &ProcessCluster, args: &[&str]) -> Command {
    let mut command = Command::new(RAFTLOCK);
    command
        .args(args)
        .env("RAFTLOCK_ENDPOINTS", cluster.api.join(","))
        .stdin(Stdio::null());
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run raftlock")
}

/// A command that appends `start <ns> <token>` and `end <ns>` around a
/// short piece of work to `log`.
fn critical_section(log: &Path) -> String {
    format!(
        "echo start $(date +%s%N) $RAFTLOCK_FENCING_TOKEN >> {log}; sleep 0.2; echo end $(date +%s%N) >> {log}",
        log = log.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_runs_commands_one_at_a_time_with_increasing_tokens() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let log = cluster.dir.path().join("sections.log");
    let script = critical_section(&log);
    let children: Vec<_> = (0..4)
        .map(|_| {
            raftlock(
                &cluster,
                &["lock", "same", "--wait", "60s", "--", "sh", "-c", &script],
            )
            .spawn()
            .expect("spawn raftlock lock")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success(), "{output:?}");
    }
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 8, "{text}");
    // Strictly alternating start/end: no two sections overlap.
    let mut last_end = 0u128;
    let mut last_token = 0u64;
    for pair in lines.chunks(2) {
        assert_eq!((pair[0][0], pair[1][0]), ("start", "end"), "{text}");
        let start: u128 = pair[0][1].parse().expect("start ns");
        let end: u128 = pair[1][1].parse().expect("end ns");
        let token: u64 = pair[0][2].parse().expect("token");
        assert!(start >= last_end && end >= start, "overlap: {text}");
        assert!(token > last_token, "tokens must increase: {text}");
        last_end = end;
        last_token = token;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_passes_exit_codes_and_try_lock_reports_a_held_lock() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let status = run(&mut raftlock(
        &cluster,
        &["lock", "x", "--", "sh", "-c", "exit 7"],
    ))
    .status;
    assert_eq!(status.code(), Some(7));

    // Hold `busy` in the background until told to stop.
    let flag = cluster.dir.path().join("holding");
    let stop = cluster.dir.path().join("stop");
    let script = format!(
        "touch {flag}; while [ ! -e {stop} ]; do sleep 0.05; done",
        flag = flag.display(),
        stop = stop.display()
    );
    let mut holder = raftlock(&cluster, &["lock", "busy", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn holder");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "holder never got the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tried = run(&mut raftlock(
        &cluster,
        &["lock", "busy", "--wait", "0", "--", "true"],
    ));
    assert_eq!(tried.status.code(), Some(75), "{tried:?}");
    let locks = run(&mut raftlock(&cluster, &["locks"]));
    let listing = String::from_utf8_lossy(&locks.stdout);
    assert!(listing.contains("busy"), "{listing}");
    std::fs::write(&stop, "").expect("stop flag");
    assert!(holder.wait().expect("holder").success());
    // Released on exit: a try-lock now succeeds.
    let after = run(&mut raftlock(
        &cluster,
        &["lock", "busy", "--wait", "0", "--", "true"],
    ));
    assert!(after.status.success(), "{after:?}");

    let status = run(&mut raftlock(&cluster, &["status"]));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("leader:") && text.contains("follower"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_explains_every_subcommand() {
    let help = run(Command::new(RAFTLOCK).arg("--help"));
    let text = String::from_utf8_lossy(&help.stdout);
    for word in ["serve", "up", "lock", "status", "locks"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }
    let bad =
        run(Command::new(RAFTLOCK).args(["serve", "--config", "/nonexistent.toml", "--id", "1"]));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent.toml"));
    // A misspelt key fails at start, naming the key.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[cluster]\nheartbeat_ms = 5\n[[members]]\nid = 1\napi_addr = \"127.0.0.1:1\"\nraft_addr = \"127.0.0.1:2\"\n",
    )
    .expect("write");
    let bad = run(Command::new(RAFTLOCK)
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--id", "1"]));
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("heartbeat_ms"),
        "{bad:?}"
    );
}

/// A base port P with P..P+2, P+100..P+102 and P+200..P+202 free (the
/// layout `raftlock up --base-port P` uses: API, Raft, ZooKeeper).
fn free_base_port() -> u16 {
    free_base_port_for(3)
}

/// A base port with `members` free API ports and their Raft (+100),
/// ZooKeeper (+200) and etcd (+300) ports.
fn free_base_port_for(members: u16) -> u16 {
    for candidate in (20_000..60_000).step_by(997) {
        let mut ports = (0..members).flat_map(|o| {
            [
                candidate + o,
                candidate + 100 + o,
                candidate + 200 + o,
                candidate + 300 + o,
            ]
        });
        if ports.all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return candidate;
        }
    }
    panic!("no free port range");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_walkthrough_runs_against_raftlock_up() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README");
    let block = readme
        .split("<!-- walkthrough -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- /walkthrough -->").next())
        .expect("walkthrough markers");
    let script: String = block
        .lines()
        .filter(|l| !l.starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n");
    let base = free_base_port();
    let script = (0..3).fold(script, |s, i| {
        s.replace(
            &format!("127.0.0.1:{}", 7001 + i),
            &format!("127.0.0.1:{}", base + i),
        )
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let mut up = Command::new(RAFTLOCK)
        .args(["up", "--base-port", &base.to_string(), "--data-dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("raftlock up");
    let stdout = up.stdout.take().expect("stdout");
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    // Reads every line (so `up` never writes into a closed pipe) and
    // reports the banner's `status` hint, printed once the cluster is ready.
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut ready_tx = Some(ready_tx);
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains(" status") {
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(line);
                }
            }
        }
    });
    let status_hint = tokio::time::timeout(Duration::from_secs(60), ready_rx)
        .await
        .expect("raftlock up became ready in time")
        .expect("raftlock up printed a status hint");
    let output = run(Command::new("sh").args(["-e", "-c", &script]));
    let text = String::from_utf8_lossy(&output.stdout);
    // The hint runs as printed, from a shell whose PATH has no raftlock
    // (as after `cargo run`), and reaches this cluster, not 7001-7003.
    let hinted = run(Command::new("sh")
        .args(["-c", status_hint.trim()])
        .env("PATH", "/usr/bin:/bin"));
    // Stop `up` the way a user does: Ctrl-C.
    let _ = nix_kill(up.id(), "INT");
    let stopped = up.wait().expect("up exits");
    assert!(output.status.success(), "walkthrough failed: {output:?}");
    assert!(text.contains("\"fencing_token\""), "acquire answer: {text}");
    assert!(text.contains("\"holder\":{"), "inspect answer: {text}");
    assert!(
        hinted.status.success(),
        "the banner's {status_hint:?} did not run: {hinted:?}"
    );
    assert!(
        String::from_utf8_lossy(&hinted.stdout).contains("leader: "),
        "{hinted:?}"
    );
    assert!(
        stopped.success(),
        "raftlock up did not stop cleanly: {stopped:?}"
    );
}

fn nix_kill(pid: u32, signal: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
}

/// Waits until `path` exists (the locked command's "I am running" flag).
async fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_forwards_signals_and_releases_on_the_way_out() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let flag = cluster.dir.path().join("running");
    let script = format!(
        "trap 'exit 42' TERM; touch {}; while true; do sleep 0.05; done",
        flag.display()
    );
    let mut child = raftlock(&cluster, &["lock", "sig", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn");
    wait_for_file(&flag).await;
    nix_kill(child.id(), "TERM").expect("kill");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(42), "the command's own exit code");
    let after = run(&mut raftlock(
        &cluster,
        &["lock", "sig", "--wait", "0", "--", "true"],
    ));
    assert!(
        after.status.success(),
        "released after the signal: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_stops_the_command_when_the_session_is_lost() {
    let mut cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let flag = cluster.dir.path().join("running");
    let script = format!("touch {}; sleep 60", flag.display());
    let child = raftlock(
        &cluster,
        &[
            "lock", "lost", "--ttl", "2s", "--grace", "1s", "--", "sh", "-c", &script,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    wait_for_file(&flag).await;
    // The whole cluster dies: keepalives fail, the lock can no longer be
    // trusted, and the command must be stopped before the TTL runs out.
    let stopped_at = Instant::now();
    for id in 1..=3 {
        cluster.kill9(id);
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let took = stopped_at.elapsed();
    assert_eq!(output.status.code(), Some(74), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("lost"),
        "{output:?}"
    );
    // lost() fires by last keepalive + ttl − margin; plus the 1 s grace.
    assert!(took < Duration::from_secs(4), "stopped after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_bad_api_and_bind_settings_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let member = "[[members]]\nid = 1\napi_addr = \"localhost:1\"\nraft_addr = \"localhost:2\"\n";
    let cases = [
        (
            format!("{member}[api]\nmax_sessions = 0\n"),
            "api.max_sessions",
        ),
        (
            format!("{member}[api]\nheader_read_timeout_ms = \"slow\"\n"),
            "header_read_timeout_ms",
        ),
        (
            format!("{member}api_bind = \"0.0.0.0\"\n"),
            "members[0].api_bind",
        ),
    ];
    for (text, key) in cases {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, &text).expect("write");
        let bad = run(Command::new(RAFTLOCK)
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--id", "1"]));
        assert!(!bad.status.success(), "{text}");
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(stderr.contains(key), "{key} not named: {stderr}");
    }
}

/// Processes whose command line mentions `needle` (the members of one
/// `raftlock up`, found by its data directory).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(" serve ") && cmdline.contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Starts `raftlock up` in `dir`; returns it and a channel of its lines.
fn spawn_up(dir: &Path) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    spawn_up_with(dir, free_base_port(), 3)
}

/// `raftlock up --members N` on ports from `base`.
fn spawn_up_with(
    dir: &Path,
    base: u16,
    members: u16,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut up = Command::new(RAFTLOCK)
        .args([
            "up",
            "--members",
            &members.to_string(),
            "--base-port",
            &base.to_string(),
            "--data-dir",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("raftlock up");
    let stdout = up.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    (up, rx)
}

/// Waits for a line containing `text`.
fn wait_line(lines: &std::sync::mpsc::Receiver<String>, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(text) => return,
            Ok(_) => {}
            Err(e) => panic!("raftlock up never printed {text:?}: {e}"),
        }
    }
}

/// Waits up to 20 s for `child` to exit.
fn wait_exit(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_stops_its_members_on_sigterm_at_any_moment() {
    let dir = tempfile::tempdir().expect("tempdir");
    // During start-up: the members exist, the cluster is not ready yet.
    let early = dir.path().join("early");
    let (mut up, lines) = spawn_up(&early);
    wait_line(&lines, "starting 3 members");
    let needle = early.display().to_string();
    // Spawned is not yet exec'd: until then a child's cmdline is still
    // `raftlock up`'s, so wait until all three show as `serve`.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut running = processes_mentioning(&needle);
    while running.len() < 3 && Instant::now() < deadline {
        std::thread::yield_now();
        running = processes_mentioning(&needle);
    }
    nix_kill(up.id(), "TERM").expect("kill");
    let status = wait_exit(&mut up);
    let left = processes_mentioning(&needle);
    for pid in &left {
        let _ = nix_kill(*pid, "KILL");
    }
    if status.is_none() {
        let _ = up.kill();
    }
    assert_eq!(running.len(), 3, "members running when the signal came");
    assert!(
        status.is_some_and(|s| s.success()),
        "`up` stops cleanly on SIGTERM during start-up: {status:?}"
    );
    assert!(left.is_empty(), "members left running: {left:?}");

    // Once ready.
    let late = dir.path().join("late");
    let (mut up, lines) = spawn_up(&late);
    wait_line(&lines, "cluster ready");
    let needle = late.display().to_string();
    assert_eq!(processes_mentioning(&needle).len(), 3);
    nix_kill(up.id(), "TERM").expect("kill");
    let status = wait_exit(&mut up);
    let left = processes_mentioning(&needle);
    for pid in &left {
        let _ = nix_kill(*pid, "KILL");
    }
    if status.is_none() {
        let _ = up.kill();
    }
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(left.is_empty(), "members left running: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_starts_a_five_member_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = free_base_port_for(5);
    let (mut up, lines) = spawn_up_with(dir.path(), base, 5);
    wait_line(&lines, "cluster ready");
    let view: serde_json::Value =
        reqwest::get(format!("http://127.0.0.1:{base}/v1/cluster/members"))
            .await
            .expect("members")
            .json()
            .await
            .expect("json");
    let members = view["members"].as_array().expect("members");
    let voters: Vec<u64> = members
        .iter()
        .filter(|m| m["voter"] == true)
        .filter_map(|m| m["id"].as_u64())
        .collect();
    assert_eq!(voters, vec![1, 2, 3, 4, 5], "{view}");
    // The founder named every member's own incarnation.
    let incarnations: std::collections::BTreeSet<&str> = members
        .iter()
        .filter_map(|m| m["incarnation"].as_str())
        .filter(|i| *i != "0000000000000000")
        .collect();
    assert_eq!(incarnations.len(), 5, "{view}");
    let _ = nix_kill(up.id(), "INT");
    let stopped = wait_exit(&mut up).expect("up exits");
    assert!(stopped.success(), "{stopped:?}");
}

/// Runs `raftlock lock ARGS -- sh -c …` in the background until `stop`
/// exists; returns once the command runs (the lock is held).
async fn hold(
    cluster: &ProcessCluster,
    args: &[&str],
    tag: &str,
) -> (std::process::Child, std::path::PathBuf) {
    let flag = cluster.dir.path().join(format!("holding-{tag}"));
    let stop = cluster.dir.path().join(format!("stop-{tag}"));
    let script = format!(
        "touch {flag}; while [ ! -e {stop} ]; do sleep 0.05; done",
        flag = flag.display(),
        stop = stop.display()
    );
    let mut all: Vec<&str> = vec!["lock"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh", "-c", &script]);
    let child = raftlock(cluster, &all).spawn().expect("spawn holder");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "{tag} never got the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (child, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_read_write_and_permits() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let try_once = |args: &[&str]| {
        let mut all: Vec<&str> = vec!["lock"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wait", "0", "--", "sh", "-c", "echo $RAFTLOCK_LOCK_KIND"]);
        run(&mut raftlock(&cluster, &all))
    };
    let (mut reader, stop_reader) = hold(&cluster, &["--read", "docs"], "reader").await;
    let shared = try_once(&["--read", "docs"]);
    assert!(shared.status.success(), "readers share: {shared:?}");
    assert_eq!(String::from_utf8_lossy(&shared.stdout).trim(), "read");
    let writer = try_once(&["--write", "docs"]);
    assert_eq!(
        writer.status.code(),
        Some(75),
        "a writer waits for readers: {writer:?}"
    );
    std::fs::write(&stop_reader, "").expect("stop");
    assert!(reader.wait().expect("reader").success());
    let writer = try_once(&["--write", "docs"]);
    assert!(writer.status.success(), "released on exit: {writer:?}");

    let (mut first, stop_first) = hold(&cluster, &["--permits", "2", "pool"], "permit").await;
    let second = try_once(&["--permits", "2", "pool"]);
    assert!(second.status.success(), "two places: {second:?}");
    let other_limit = try_once(&["--permits", "3", "pool"]);
    assert_eq!(other_limit.status.code(), Some(1), "{other_limit:?}");
    assert!(
        String::from_utf8_lossy(&other_limit.stderr).contains("limit_mismatch"),
        "{other_limit:?}"
    );
    std::fs::write(&stop_first, "").expect("stop");
    assert!(first.wait().expect("holder").success());

    let both = try_once(&["--read", "--write", "docs"]);
    assert_eq!(
        both.status.code(),
        Some(2),
        "--read and --write exclude each other"
    );
}

/// `--reentrant` inside `raftlock lock NAME` runs its command under the
/// outer hold (same token) instead of queueing behind it; without the
/// flag the nested try-lock is refused (75); another lock is taken as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_reentrant_runs_a_nested_lock_under_the_outer_hold() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let log = cluster.dir.path().join("nested");
    // The nested calls reach the cluster through the inherited
    // RAFTLOCK_ENDPOINTS; `$0` is the raftlock binary.
    let script = format!(
        r#"outer=$RAFTLOCK_FENCING_TOKEN
        "$0" lock --reentrant --wait 0 job -- sh -c 'echo in $RAFTLOCK_FENCING_TOKEN' >> {log}
        echo reentrant $? >> {log}
        "$0" lock --wait 0 job -- true; echo plain $? >> {log}
        "$0" lock --reentrant --wait 0 other -- true; echo other $? >> {log}
        echo outer $outer >> {log}"#,
        log = log.display()
    );
    let status = run(&mut raftlock(
        &cluster,
        &["lock", "job", "--", "sh", "-c", &script, RAFTLOCK],
    ))
    .status;
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = text.lines().collect();
    let outer = lines
        .last()
        .and_then(|l| l.strip_prefix("outer "))
        .unwrap_or("?");
    assert_eq!(
        lines,
        [
            format!("in {outer}").as_str(),
            "reentrant 0",
            "plain 75",
            "other 0",
            format!("outer {outer}").as_str()
        ],
        "{text}"
    );
}

/// Reads `GET /v1/locks/{name}` through `raftlock lock-info --json`.
fn lock_info(cluster: &ProcessCluster, name: &str) -> serde_json::Value {
    let out = run(&mut raftlock(cluster, &["lock-info", name, "--json"]));
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("lock-info json")
}

/// `raftlock lock --lock-delay`: the holder's session is closed from
/// another member; the waiter's command starts no earlier than the delay
/// after the close, and the lock shows as held off (with its delay) in
/// between, then as held by the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_delay_holds_the_next_command_off_after_a_close() {
    let cluster = ProcessCluster::start(3);
    cluster.leader(&[1, 2, 3]).await;
    let (mut holder, stop) = hold(&cluster, &["--lock-delay", "2s", "ledger"], "delayed").await;
    let started = cluster.dir.path().join("next-started");
    let granted = cluster.dir.path().join("next-granted.json");
    // Records when it ran, then the lock as seen while it holds it.
    let script = format!(
        "date +%s%N > {}; {RAFTLOCK} lock-info ledger --json > {}",
        started.display(),
        granted.display()
    );
    let waiter = raftlock(
        &cluster,
        &[
            "lock",
            "--lock-delay",
            "2s",
            "--wait",
            "30s",
            "ledger",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .expect("spawn waiter");
    let deadline = Instant::now() + Duration::from_secs(20);
    let queued = loop {
        let info = lock_info(&cluster, "ledger");
        if info["waiters"].as_array().is_some_and(|w| w.len() == 1) {
            break info;
        }
        assert!(Instant::now() < deadline, "the waiter never queued: {info}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let session = queued["holder"]["session_id"]
        .as_str()
        .expect("holder session");
    // Closed by someone else, through another member than the holder's.
    let mut close = Command::new(RAFTLOCK);
    close
        .args(["session", "close", session])
        .env("RAFTLOCK_ENDPOINTS", &cluster.api[2])
        .stdin(Stdio::null());
    // Taken before the close is sent: the server starts the delay when it
    // applies the close, which is later.
    // The same clock as the waiter's `date +%s%N`.
    let closed_at: u128 = String::from_utf8_lossy(&run(Command::new("date").arg("+%s%N")).stdout)
        .trim()
        .parse()
        .expect("date +%s%N");
    let closed = run(&mut close);
    assert!(closed.status.success(), "{closed:?}");
    let during = lock_info(&cluster, "ledger");
    let text = run(&mut raftlock(&cluster, &["lock-info", "ledger"]));
    let listed = run(&mut raftlock(&cluster, &["locks", "ledger"]));
    let output = tokio::task::spawn_blocking(move || waiter.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert!(output.status.success(), "{output:?}");
    let ran_at: u128 = std::fs::read_to_string(&started)
        .expect("started")
        .trim()
        .parse()
        .expect("ns");
    assert!(
        ran_at >= closed_at + 2_000_000_000,
        "ran {} ms after the close, inside the 2 s delay",
        ran_at.saturating_sub(closed_at) / 1_000_000
    );
    // What `GET /v1/locks/{name}` said before the close, during the
    // delay, and after the grant (checked after the timing, so that each
    // of the two is seen to fail on its own).
    assert_eq!(queued["held_off"], false, "{queued}");
    assert_eq!(queued["lock_delay_ms"], 2000, "{queued}");
    assert_eq!(during["held_off"], true, "{during}");
    assert!(during["holder"].is_null(), "{during}");
    assert_eq!(during["lock_delay_ms"], 2000, "{during}");
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("held off"),
        "{text:?}"
    );
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("(held off)"),
        "the lock listing says it too: {listed:?}"
    );
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&granted).expect("granted")).expect("json");
    assert_eq!(after["held_off"], false, "{after}");
    assert_eq!(after["lock_delay_ms"], 2000, "{after}");
    assert!(!after["holder"].is_null(), "{after}");
    // The holder's session is gone; end its command (the flag) and wait.
    std::fs::write(&stop, "").expect("stop");
    let _ = holder.wait();
}

/// `raftlock up` serves ZooKeeper clients on every member: the banner's
/// connect string names three ports, and each answers a handshake with a
/// session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raftlock_up_serves_zookeeper_on_every_member() {
    use raftlock_zookeeper::wire::{from_bytes, to_bytes, ConnectRequest, ConnectResponse};
    use std::io::{Read, Write};

    let base = free_base_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut up = Command::new(RAFTLOCK)
        .args(["up", "--base-port", &base.to_string(), "--data-dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("raftlock up");
    let stdout = up.stdout.take().expect("stdout");
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(rest) = line.split("ZooKeeper clients").nth(1) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(rest.trim_start_matches(|c| c != ':').to_string());
                }
            }
        }
    });
    let line = tokio::time::timeout(Duration::from_secs(60), rx)
        .await
        .expect("raftlock up became ready in time")
        .expect("raftlock up printed a ZooKeeper connect string");
    let connect: Vec<String> = line
        .trim_start_matches(':')
        .trim()
        .split(',')
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}", base + 200 + i))
        .collect();
    assert_eq!(connect, expected);
    let sessions = tokio::task::spawn_blocking(move || {
        connect
            .iter()
            .map(|addr| {
                let mut stream = std::net::TcpStream::connect(addr).expect("connect");
                stream
                    .set_read_timeout(Some(Duration::from_secs(15)))
                    .expect("timeout");
                let hello = to_bytes(&ConnectRequest {
                    time_out: 10_000,
                    passwd: vec![0; 16],
                    ..ConnectRequest::default()
                });
                let len = u32::try_from(hello.len()).expect("small");
                stream.write_all(&len.to_be_bytes()).expect("send");
                stream.write_all(&hello).expect("send");
                let mut len = [0u8; 4];
                stream.read_exact(&mut len).expect("an answer");
                let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                stream.read_exact(&mut frame).expect("an answer");
                from_bytes::<ConnectResponse>(&frame)
                    .expect("decode")
                    .time_out
            })
            .collect::<Vec<i32>>()
    })
    .await
    .expect("clients");
    let _ = nix_kill(up.id(), "INT");
    let stopped = up.wait().expect("up exits");
    assert!(sessions.iter().all(|t| *t > 0), "{sessions:?}");
    assert!(stopped.success(), "{stopped:?}");
}

/// Speaks ZooKeeper's protocol over TLS to `argv[1]` (host:port) trusting
/// the CA file `argv[2]`, with Python's own `ssl`: connects (retrying
/// until the member serves), reads a node unauthenticated (NOAUTH,
/// -102), authenticates with `digest` `argv[3]` (0), reads again (NONODE,
/// -101). Prints the three error codes.
const ZK_TLS_PROBE: &str = r#"
import socket, ssl, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=sys.argv[2])
deadline = time.monotonic() + 60
def frame(body):
    return struct.pack(">i", len(body)) + body
def exactly(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        assert chunk, "the door closed the connection"
        got += chunk
    return got
def read(s):
    return exactly(s, struct.unpack(">i", exactly(s, 4))[0])
def ustring(b):
    return struct.pack(">i", len(b)) + b
while True:
    try:
        s = ctx.wrap_socket(socket.create_connection((host, int(port)), 5), server_hostname=host)
        s.sendall(frame(struct.pack(">iqiq", 0, 0, 10000, 0) + ustring(b"\0" * 16)))
        if struct.unpack(">iiq", read(s)[:16])[1] > 0:
            break
    except OSError:
        pass
    assert time.monotonic() < deadline, "the door never served a session"
    time.sleep(0.1)
codes = []
def call(xid, op, body):
    s.sendall(frame(struct.pack(">ii", xid, op) + body))
    codes.append(struct.unpack(">iqi", read(s)[:16])[2])
get_data = ustring(b"/jobs") + b"\0"
call(1, 4, get_data)
call(-4, 100, struct.pack(">i", 0) + ustring(b"digest") + ustring(sys.argv[3].encode()))
call(2, 4, get_data)
print(" ".join(map(str, codes)))
"#;

/// A member whose cluster file has `[tls]`, `[[auth.tokens]]` and a
/// ZooKeeper door serves the door over TLS with the API's certificate,
/// and answers NOAUTH until a client shows a token as its `digest`.
#[test]
fn serve_opens_a_zookeeper_door_with_the_apis_tls_and_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("ops.token");
    let token = run(Command::new(RAFTLOCK)
        .args(["token", "new", "ops", "--allow", "=admin", "--out"])
        .arg(&token_file));
    assert!(token.status.success(), "{token:?}");
    let secret = std::fs::read_to_string(&token_file).expect("token file");
    let tls = support::tls::TestCa::create(&dir.path().join("tls"), "door test CA");
    // Random free ports: tests run in parallel, and `free_base_port`
    // gives two of them the same range.
    let ports = support::free_ports(3);
    let door = format!("127.0.0.1:{}", ports[2]);
    let config = format!(
        "[cluster]\ndata_dir = \".\"\n\n[[members]]\nid = 1\napi_addr = \"127.0.0.1:{}\"\n\
         raft_addr = \"127.0.0.1:{}\"\nzookeeper = {{ client_addr = \"{door}\" }}\n{}\n{}",
        ports[0],
        ports[1],
        tls.table("none"),
        String::from_utf8_lossy(&token.stdout)
    );
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, config).expect("config");
    let log = std::fs::File::create(dir.path().join("member.log")).expect("log");
    let mut member = Command::new(RAFTLOCK)
        .args(["serve", "--id", "1", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("raftlock serve");
    let probe = Command::new("python3")
        .args(["-c", ZK_TLS_PROBE, &door])
        .arg(tls.ca_path())
        .arg(format!("ops:{}", secret.trim()))
        .output();
    let _ = member.kill();
    let _ = member.wait();
    let probe = probe.expect("python3 runs the probe");
    let out = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    assert_eq!(
        out.trim(),
        "-102 0 -101",
        "NOAUTH, then authenticated, then NONODE"
    );
}
