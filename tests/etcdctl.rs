//! Debian's real, unmodified `etcdctl` (package etcd-client 3.4, v3 API)
//! against the etcd door of a three-member cluster of `raftlock serve`
//! processes (docs/etcd.md). Each command's own output is the proof: keys
//! in the asked order, a transaction's branch, watch events from a past
//! revision, lease TTLs and attached keys, `lock` contenders that never
//! overlap, the member table.
//!
//! Without etcdctl (scripts/install-etcdctl.sh installs it) the tests say
//! so loudly and pass, unless `CI` is set: in CI a missing etcdctl fails.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{free_ports, ProcessCluster};

const ETCDCTL: &str = "etcdctl";

/// True when etcdctl runs; false (after a loud message) when it is absent
/// outside CI. Panics in CI without it.
fn have_etcdctl(test: &str) -> bool {
    let found = Command::new(ETCDCTL)
        .arg("version")
        .env("ETCDCTL_API", "3")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "etcdctl is missing under CI (scripts/install-etcdctl.sh installs it)"
    );
    eprintln!("==========================================================");
    eprintln!("SKIP {test}: no etcdctl on PATH");
    eprintln!("(bash scripts/install-etcdctl.sh installs Debian's etcd-client)");
    eprintln!("==========================================================");
    false
}

/// A three-member cluster whose members each serve an etcd door; the
/// doors' addresses, member 1's first.
fn start_cluster() -> (ProcessCluster, Vec<String>) {
    start_cluster_with(|_| ())
}

/// As [`start_cluster`], with `prepare` run on the configured cluster
/// before any member starts (to turn TLS on, say).
fn start_cluster_with(prepare: impl FnOnce(&mut ProcessCluster)) -> (ProcessCluster, Vec<String>) {
    let mut cluster = ProcessCluster::configure(3);
    prepare(&mut cluster);
    let ports = free_ports(3);
    let mut text = std::fs::read_to_string(&cluster.config).expect("read config");
    let mut doors = Vec::new();
    for (i, raft) in cluster.raft.iter().enumerate() {
        let door = format!("127.0.0.1:{}", ports[i]);
        let line = format!("raft_addr = \"{raft}\"\n");
        assert!(text.contains(&line), "{text}");
        text = text.replace(
            &line,
            &format!("{line}etcd = {{ client_addr = \"{door}\" }}\n"),
        );
        doors.push(door);
    }
    std::fs::write(&cluster.config, text).expect("write config");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    (cluster, doors)
}

/// etcdctl under coreutils' `timeout`, so no command (a lock that is
/// never granted, say) can hang the test; `timeout` passes a SIGTERM on.
fn etcdctl(endpoints: &str, args: &[&str]) -> Command {
    let mut command = Command::new("timeout");
    command
        .args(["120", ETCDCTL])
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .arg("--command-timeout=20s")
        .args(args)
        .stdin(Stdio::null());
    command
}

fn run(endpoints: &str, args: &[&str]) -> Output {
    etcdctl(endpoints, args).output().expect("run etcdctl")
}

/// Runs etcdctl and returns its stdout, failing with its stderr.
fn ok(endpoints: &str, args: &[&str]) -> String {
    let out = run(endpoints, args);
    assert!(
        out.status.success(),
        "etcdctl {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(endpoints: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-w", "json"]);
    serde_json::from_str(&ok(endpoints, &all)).expect("etcdctl's json")
}

/// Waits until every door answers `endpoint status` (the members elected
/// a leader and serve), bounded.
fn wait_ready(cluster: &ProcessCluster, doors: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(&doors.join(","), &["endpoint", "status", "-w", "json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            let leaders = v.as_array().map_or(0, |a| {
                a.iter()
                    .filter(|s| s["Status"]["leader"].as_u64().unwrap_or(0) != 0)
                    .count()
            });
            if leaders == doors.len() {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the doors never became ready:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn revision_of(v: &Value) -> i64 {
    v["header"]["revision"].as_i64().expect("a header revision")
}

#[test]
fn etcdctl_kv_txn_watch_leases_status_and_members() {
    if !have_etcdctl("etcdctl_kv_txn_watch_leases_status_and_members") {
        return;
    }
    let (cluster, doors) = start_cluster();
    wait_ready(&cluster, &doors);
    let all = doors.join(",");
    // Each command goes to one member's door: followers answer too.
    let (one, two, three) = (doors[0].as_str(), doors[1].as_str(), doors[2].as_str());

    // put, then get --prefix in each sort order.
    assert_eq!(ok(one, &["put", "app/b", "2"]).trim(), "OK");
    assert_eq!(ok(two, &["put", "app/a", "3"]).trim(), "OK");
    assert_eq!(ok(three, &["put", "app/c", "1"]).trim(), "OK");
    assert_eq!(ok(one, &["put", "app/b", "20"]).trim(), "OK");
    let first = json(two, &["get", "app/a"]);
    let start = first["kvs"][0]["create_revision"]
        .as_i64()
        .expect("create revision");
    assert_eq!(
        ok(
            two,
            &[
                "get",
                "--prefix",
                "app/",
                "--sort-by=MODIFY",
                "--order=DESCEND"
            ]
        ),
        "app/b\n20\napp/c\n1\napp/a\n3\n"
    );
    assert_eq!(
        ok(
            three,
            &[
                "get",
                "--prefix",
                "app/",
                "--sort-by=VALUE",
                "--order=ASCEND",
                "--keys-only"
            ]
        ),
        "app/c\n\napp/b\n\napp/a\n\n"
    );
    let limited = json(one, &["get", "--prefix", "app/", "--limit=1"]);
    assert_eq!(
        (limited["count"].as_i64(), limited["more"].as_bool()),
        (Some(3), Some(true))
    );
    assert_eq!(limited["kvs"].as_array().map(Vec::len), Some(1));
    let b = json(one, &["get", "app/b"]);
    assert_eq!(b["kvs"][0]["version"], 2);
    assert_eq!(b["kvs"][0]["value"], base64(b"20"));
    // An old revision reads as it was.
    let old = json(two, &["get", "app/b", &format!("--rev={}", start - 1)]);
    assert_eq!(old["kvs"][0]["value"], base64(b"2"));

    // txn: the compare holds, so the success branch runs; then it fails.
    let txn = |endpoint: &str, script: &str| {
        let mut child = etcdctl(endpoint, &["txn"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("etcdctl txn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("script");
        let out = child.wait_with_output().expect("txn ran");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let script = "value(\"app/a\") = \"3\"\n\nput app/d yes\nget app/a\n\nput app/d no\n\n";
    assert_eq!(txn(two, script), "SUCCESS\n\nOK\n\napp/a\n3\n");
    assert_eq!(ok(one, &["get", "app/d", "--print-value-only"]), "yes\n");
    let script = "mod(\"app/d\") < \"1\"\n\nput app/d yes\n\nput app/d no\n\n";
    assert_eq!(txn(three, script), "FAILURE\n\nOK\n");
    assert_eq!(ok(one, &["get", "app/d", "--print-value-only"]), "no\n");

    // del, with the deleted key's last value.
    assert_eq!(ok(two, &["del", "app/d", "--prev-kv"]), "1\napp/d\nno\n");
    assert_eq!(
        json(three, &["get", "app/d"])["count"]
            .as_i64()
            .unwrap_or(0),
        0
    );

    // watch --rev from a past revision replays every change since, in
    // order, then follows a new one; stopped once it has shown them.
    let mut watch = etcdctl(
        three,
        &["watch", "--prefix", "app/", &format!("--rev={start}")],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("etcdctl watch");
    let stdout = watch.stdout.take().expect("watch stdout");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let expected = [
        "PUT", "app/a", "3", "PUT", "app/c", "1", "PUT", "app/b", "20", "PUT", "app/d", "yes",
        "PUT", "app/d", "no", "DELETE", "app/d", "", "PUT", "app/e", "live",
    ];
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut put_live = false;
    while seen.len() < expected.len() {
        if !put_live && seen.len() >= expected.len() - 3 {
            assert_eq!(ok(one, &["put", "app/e", "live"]).trim(), "OK");
            put_live = true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("watch showed only {seen:?}"),
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(seen, expected);

    // Leases: grant, attach a key, time-to-live with keys, keep-alive,
    // list, revoke (the key goes with it).
    let granted = ok(one, &["lease", "grant", "30"]);
    let id = granted
        .split_whitespace()
        .nth(1)
        .expect("lease <id> granted with TTL(30s)")
        .to_string();
    assert!(granted.contains("granted with TTL(30s)"), "{granted}");
    assert_eq!(
        ok(two, &["put", "--lease", &id, "app/leased", "x"]).trim(),
        "OK"
    );
    let ttl = ok(three, &["lease", "timetolive", "--keys", &id]);
    assert!(
        ttl.contains(&format!("lease {id} granted with TTL(30s)")),
        "{ttl}"
    );
    assert!(ttl.contains("attached keys([app/leased])"), "{ttl}");
    let kept = ok(two, &["lease", "keep-alive", "--once", &id]);
    assert_eq!(kept.trim(), format!("lease {id} keepalived with TTL(30)"));
    assert!(ok(one, &["lease", "list"]).contains(&id));
    assert_eq!(
        ok(three, &["lease", "revoke", &id]).trim(),
        format!("lease {id} revoked")
    );
    assert_eq!(
        json(one, &["get", "app/leased"])["count"]
            .as_i64()
            .unwrap_or(0),
        0
    );
    let gone = ok(two, &["lease", "timetolive", &id]);
    assert_eq!(gone.trim(), format!("lease {id} already expired"));
    let refused = run(one, &["put", "--lease", &id, "app/x", "y"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("requested lease not found"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Compaction: reads below the floor are refused as etcd refuses them.
    let now = revision_of(&json(one, &["get", "app/a"]));
    assert!(ok(two, &["compact", &now.to_string()]).contains(&format!("compacted revision {now}")));
    let below = run(three, &["get", "app/a", &format!("--rev={}", now - 1)]);
    assert!(!below.status.success());
    assert!(String::from_utf8_lossy(&below.stderr).contains("required revision has been compacted"));

    // endpoint status: three members, one leader they agree on.
    let status = json(&all, &["endpoint", "status"]);
    let statuses = status.as_array().expect("one status per endpoint");
    assert_eq!(statuses.len(), 3);
    let leaders: Vec<u64> = statuses
        .iter()
        .map(|s| s["Status"]["leader"].as_u64().expect("leader"))
        .collect();
    assert!(
        leaders.iter().all(|l| *l == leaders[0] && *l != 0),
        "{status}"
    );
    let members: Vec<u64> = statuses
        .iter()
        .map(|s| {
            s["Status"]["header"]["member_id"]
                .as_u64()
                .expect("member id")
        })
        .collect();
    assert!(members.contains(&leaders[0]));

    // member list: every member with its raft and etcd addresses.
    let list = ok(two, &["member", "list"]);
    for (i, door) in doors.iter().enumerate() {
        let raft = &cluster.raft[i];
        let row = format!(
            "{}, started, raftlock-{}, http://{raft}, http://{door}, false",
            i + 1,
            i + 1
        );
        assert!(list.contains(&row), "{list}\nlacks {row}");
    }
    drop(cluster);
}

/// Contenders run `etcdctl lock NAME -- cmd`, each through another member;
/// every command logs its start and end to one file, which must show the
/// critical sections one after the other, never overlapping.
#[test]
fn etcdctl_lock_excludes_its_contenders() {
    if !have_etcdctl("etcdctl_lock_excludes_its_contenders") {
        return;
    }
    let (cluster, doors) = start_cluster();
    wait_ready(&cluster, &doors);
    let log = cluster.dir.path().join("critical.log");
    let contenders = 6;
    let children: Vec<_> = (0..contenders)
        .map(|i| {
            let door = &doors[i % doors.len()];
            let cmd = critical_section(&log, i);
            etcdctl(door, &["lock", "jobs/nightly", "--", "sh", "-c", &cmd])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("etcdctl lock")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("lock ran");
        assert!(
            out.status.success(),
            "etcdctl lock failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            cluster.logs()
        );
    }
    let text = std::fs::read_to_string(&log).expect("the commands' log");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 * contenders, "{text}");
    let mut ran = Vec::new();
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start ").expect("a start");
        let end = pair[1].strip_prefix("end ").expect("its end");
        assert_eq!(start, end, "a critical section overlapped another:\n{text}");
        ran.push(start.to_string());
    }
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), contenders, "every contender ran once:\n{text}");
    // The lock's keys are gone once every holder is done.
    let left = json(&doors[0], &["get", "--prefix", "jobs/nightly/"]);
    assert_eq!(left["count"].as_i64().unwrap_or(0), 0, "{left}");
}

/// A command that appends `start <i>` and `end <i>` around a short piece
/// of work (the lock's key, which etcdctl exports, shows it held).
fn critical_section(log: &Path, i: usize) -> String {
    format!(
        "test -n \"$ETCD_LOCK_KEY\" || exit 3; echo start {i} >> {log}; sleep 0.2; echo end {i} >> {log}",
        log = log.display()
    )
}

/// An etcdctl child whose stdout lines arrive on a channel.
struct Lines {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Lines {
    fn spawn(endpoint: &str, args: &[&str]) -> Lines {
        let mut child = etcdctl(endpoint, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn etcdctl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { child, lines }
    }

    /// The next `n` lines, within 30 s.
    fn next(&self, n: usize, what: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(_) => panic!("{what}: only {out:?}"),
            }
        }
        out
    }

    /// SIGTERM, which etcdctl handles (elect resigns), then waits.
    fn stop(mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// `etcdctl elect`: the first campaigner leads, a second waits, an
/// observer (`elect -l`) sees the leader's value; when the leader resigns
/// (SIGTERM), the second leads and the observer sees its value.
#[test]
fn etcdctl_elect_hands_leadership_on() {
    if !have_etcdctl("etcdctl_elect_hands_leadership_on") {
        return;
    }
    let (cluster, doors) = start_cluster();
    wait_ready(&cluster, &doors);
    let alpha = Lines::spawn(&doors[0], &["elect", "jobs/leader", "alpha"]);
    let led = alpha.next(2, "alpha's campaign");
    assert!(led[0].starts_with("jobs/leader/"), "{led:?}");
    assert_eq!(led[1], "alpha");
    let observer = Lines::spawn(&doors[2], &["elect", "-l", "jobs/leader"]);
    assert_eq!(observer.next(2, "the observer")[1], "alpha");
    let beta = Lines::spawn(&doors[1], &["elect", "jobs/leader", "beta"]);
    // beta is queued behind alpha: its key exists, it leads nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let keys = json(&doors[0], &["get", "--prefix", "jobs/leader/"]);
        if keys["count"].as_i64() == Some(2) {
            break;
        }
        assert!(Instant::now() < deadline, "beta never queued: {keys}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        beta.lines.try_recv().is_err(),
        "beta leads while alpha does"
    );
    alpha.stop();
    let took = beta.next(2, "beta's campaign after alpha resigned");
    assert_eq!(took[1], "beta");
    assert_eq!(
        observer.next(2, "the observer after the hand-over")[1],
        "beta"
    );
    beta.stop();
    observer.stop();
}

/// Under `[tls]` the door speaks TLS with the API's certificate and client
/// policy: etcdctl with the CA and a client certificate works (put, get,
/// lease, lock), one without a certificate or in the clear is refused,
/// and member list shows https URLs.
#[test]
fn etcdctl_over_tls_with_client_certificates() {
    if !have_etcdctl("etcdctl_over_tls_with_client_certificates") {
        return;
    }
    let mut ca = None;
    let (cluster, doors) = start_cluster_with(|c| ca = Some(c.enable_tls("required")));
    let ca = ca.expect("a CA");
    let https: Vec<String> = doors.iter().map(|d| format!("https://{d}")).collect();
    // The TLS flags go before the command's arguments (after `lock
    // NAME --` they would be the locked command's).
    let tls_ctl = |endpoint: &str, args: &[&str], cert: bool| {
        let mut flags = vec![format!("--cacert={}", ca.ca_path().display())];
        if cert {
            flags.push(format!("--cert={}", ca.client.cert.display()));
            flags.push(format!("--key={}", ca.client.key.display()));
        }
        let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        etcdctl(endpoint, &all).output().expect("run etcdctl")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = tls_ctl(&https[0], &["put", "secure/a", "1"], true);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no TLS put: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = tls_ctl(&https[1], &["get", "--prefix", "secure/"], true);
    assert_eq!(String::from_utf8_lossy(&got.stdout), "secure/a\n1\n");
    let granted = tls_ctl(&https[2], &["lease", "grant", "20"], true);
    assert!(String::from_utf8_lossy(&granted.stdout).contains("granted with TTL(20s)"));
    let locked = tls_ctl(&https[0], &["lock", "secure/lock", "echo", "held"], true);
    assert_eq!(String::from_utf8_lossy(&locked.stdout).trim(), "held");
    let list =
        String::from_utf8_lossy(&tls_ctl(&https[1], &["member", "list"], true).stdout).into_owned();
    assert!(list.contains(&format!("https://{}", doors[2])), "{list}");
    // Without a client certificate, and in the clear: refused.
    let stranger = tls_ctl(
        &https[0],
        &["get", "secure/a", "--command-timeout=3s"],
        false,
    );
    assert!(
        !stranger.status.success(),
        "a client without a certificate got in"
    );
    let clear = run(&doors[0], &["get", "secure/a", "--command-timeout=3s"]);
    assert!(!clear.status.success(), "a plaintext client got in");
}

/// python-etcd3, pinned with the versions its 2020 code still runs on
/// (tenacity's old wait signature, protobuf's pre-4 generated code).
const ETCD3: [&str; 3] = ["etcd3==0.12.0", "tenacity==6.3.1", "protobuf==3.20.3"];

/// A virtualenv with python-etcd3 under the target directory, made on
/// first use; its python. `None` (after a loud message) without python3
/// outside CI; a failed install fails.
fn etcd3_python(test: &str) -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("etcd3-0.12.0-venv");
    raftlock_testkit::python::venv(test, &dir, &ETCD3)
}

/// python-etcd3's Lock recipe (a library client we did not write) against
/// the doors: keys and a transaction, four contenders over the three
/// members that never overlap, a holder whose lease runs out losing the
/// lock to a waiter, a watch (`tests/etcd3/lock_scenario.py`).
#[test]
fn python_etcd3_lock_recipe() {
    let Some(python) = etcd3_python("python_etcd3_lock_recipe") else {
        return;
    };
    let (cluster, doors) = start_cluster();
    run_python_scenario(&python, &cluster, &doors, "lock_scenario.py");
}

/// etcd's Lock service (v3lock), which neither etcdctl nor python-etcd3
/// calls, through grpcio with hand-encoded messages
/// (`tests/etcd3/v3lock.py`): a grant, a waiter granted on Unlock, lease 0
/// and a revoked lease refused without a key left behind, and a waiter
/// whose lease expires while it waits refused after its TTL, never granted.
#[test]
fn v3lock_service_through_grpcio() {
    let Some(python) = etcd3_python("v3lock_service_through_grpcio") else {
        return;
    };
    let (cluster, doors) = start_cluster();
    run_python_scenario(&python, &cluster, &doors, "v3lock.py");
}

/// etcd's Election service (v3election), which neither etcdctl nor
/// python-etcd3 calls, through grpcio with hand-encoded messages
/// (`tests/etcd3/v3election.py`): two campaigners on different members,
/// the second elected when the first resigns, a third when the leader's
/// lease is revoked; Proclaim by the leader and refused to a waiting
/// campaigner and to a resigned LeaderKey; Observe on a third member
/// seeing every leader and value in order; Leader without one answering
/// etcd's error; lease 0 and a revoked lease refused, and a campaign
/// given up by its caller leaving no key.
#[test]
fn v3election_service_through_grpcio() {
    let Some(python) = etcd3_python("v3election_service_through_grpcio") else {
        return;
    };
    let (cluster, doors) = start_cluster();
    run_python_scenario(&python, &cluster, &doors, "v3election.py");
}

/// Runs `tests/etcd3/<scenario>` against the doors once they answer, and
/// fails with its output unless it passed every check.
fn run_python_scenario(python: &Path, cluster: &ProcessCluster, doors: &[String], scenario: &str) {
    let scenario = format!(
        "{}/../../tests/etcd3/{scenario}",
        env!("CARGO_MANIFEST_DIR")
    );
    // Ready once a put goes through.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let probe = Command::new("timeout")
            .args(["20"])
            .arg(python)
            .args(["-c", "import etcd3,sys; h,p=sys.argv[1].rsplit(':',1); etcd3.client(host=h, port=int(p), timeout=3).put('ready', '1')"])
            .arg(&doors[0])
            .output()
            .expect("python");
        if probe.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the doors never answered python-etcd3:\n{}\n{}",
            String::from_utf8_lossy(&probe.stderr),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = Command::new("timeout")
        .args(["240"])
        .arg(python)
        .arg(&scenario)
        .arg(doors.join(","))
        .output()
        .expect("run the scenario");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("all checks passed"),
        "{text}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
}

/// A real etcd (Debian's etcd-server 3.4) on free loopback ports, killed
/// on drop.
struct RealEtcd {
    child: std::process::Child,
    endpoint: String,
    /// Its data directory when in memory, removed after the kill.
    _data: Option<tempfile::TempDir>,
}

impl Drop for RealEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Debian's etcd in `dir`; `None` (after a loud message) without
/// it outside CI; panics in CI without it.
fn real_etcd(dir: &Path, test: &str) -> Option<RealEtcd> {
    let found = Command::new("etcd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "etcd (etcd-server) is missing under CI (scripts/install-etcdctl.sh installs it)"
        );
        eprintln!("==========================================================");
        eprintln!("SKIP {test}: no etcd on PATH");
        eprintln!("(bash scripts/install-etcdctl.sh installs Debian's etcd-server)");
        eprintln!("==========================================================");
        return None;
    }
    let ports = free_ports(2);
    let client = format!("http://127.0.0.1:{}", ports[0]);
    let peer = format!("http://127.0.0.1:{}", ports[1]);
    let log = std::fs::File::create(dir.join("etcd.log")).expect("etcd log");
    // The reference's data in memory where there is a tmpfs: its fsyncs
    // would otherwise take a third of the cross-check's time.
    let memory = tempfile::Builder::new()
        .prefix("etcd-data")
        .tempdir_in("/dev/shm")
        .ok();
    let data = memory
        .as_ref()
        .map_or_else(|| dir.join("etcd-data"), |m| m.path().to_path_buf());
    let child = Command::new("etcd")
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls={client}"))
        .arg(format!("--advertise-client-urls={client}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=default={peer}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start etcd");
    Some(RealEtcd {
        child,
        endpoint: format!("127.0.0.1:{}", ports[0]),
        _data: memory,
    })
}

/// The same seeded request sequences (puts, ranges with every option,
/// deletes, nested-free transactions, lease grants, revokes, TimeToLive
/// and Leases, compactions, watches, their errors) to a real etcd and to
/// a follower's door, every answer compared, revisions by order
/// (`tests/etcd3/crosscheck.py`). `RAFTLOCK_ETCD_CROSSCHECK_SEEDS` (default
/// 1,000) sequences from `RAFTLOCK_ETCD_CROSSCHECK_SEED` (default 1); a
/// difference names its seed, which replays it.
#[test]
fn crosscheck_against_a_real_etcd() {
    let Some(python) = etcd3_python("crosscheck_against_a_real_etcd") else {
        return;
    };
    let (cluster, doors) = start_cluster();
    let Some(etcd) = real_etcd(cluster.dir.path(), "crosscheck_against_a_real_etcd") else {
        return;
    };
    // Every door knows the leader (the script picks a follower's), and
    // both answer a put before the sequences start.
    wait_ready(&cluster, &doors);
    for endpoint in [&etcd.endpoint, &doors[0]] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let probe = Command::new("timeout")
                .args(["20"])
                .arg(&python)
                .args(["-c", "import etcd3,sys; h,p=sys.argv[1].rsplit(':',1); etcd3.client(host=h, port=int(p), timeout=3).put('ready', '1')"])
                .arg(endpoint)
                .output()
                .expect("python");
            if probe.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{endpoint} never answered:\n{}\n{}",
                String::from_utf8_lossy(&probe.stderr),
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let seeds = std::env::var("RAFTLOCK_ETCD_CROSSCHECK_SEEDS").unwrap_or_else(|_| "1000".into());
    let first = std::env::var("RAFTLOCK_ETCD_CROSSCHECK_SEED").unwrap_or_else(|_| "1".into());
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/etcd3/crosscheck.py"
    );
    let out = Command::new("timeout")
        .args(["900"])
        .arg(&python)
        .arg(scenario)
        .arg(&etcd.endpoint)
        .arg(doors.join(","))
        .arg(&seeds)
        .arg(&first)
        .output()
        .expect("run the cross-check");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(
        out.status.success() && text.contains("no difference"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(etcd);
}

/// Tokens of the auth tests: `etcd-app` reads, writes and locks under
/// `app/` and reads `shared/`; `other` locks and writes under `other/`;
/// `ops` is a cluster admin. The token strings, as `raftlock token new`
/// would print them.
const APP_TOKEN: &str = "rlt_app_5f0c1d2e3a4b5c6d7e8f90a1b2c3d4e5";
const OTHER_TOKEN: &str = "rlt_other_0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const OPS_TOKEN: &str = "rlt_ops_99887766554433221100ffeeddccbbaa";

fn auth_tokens_toml() -> String {
    format!(
        "[[auth.tokens]]\nname = \"etcd-app\"\nsha256 = \"{}\"\n\
         grants = [ {{ prefix = \"app/\", allow = [\"read\", \"write\", \"lock\"] }},\n\
                    {{ prefix = \"shared/\", allow = [\"read\"] }} ]\n\
         [[auth.tokens]]\nname = \"other\"\nsha256 = \"{}\"\n\
         grants = [ {{ prefix = \"other/\", allow = [\"read\", \"write\", \"lock\"] }} ]\n\
         [[auth.tokens]]\nname = \"ops\"\nsha256 = \"{}\"\n\
         grants = [ {{ prefix = \"\", allow = [\"admin\"] }} ]\n",
        raftlock_api::hash_token(APP_TOKEN),
        raftlock_api::hash_token(OTHER_TOKEN),
        raftlock_api::hash_token(OPS_TOKEN),
    )
}

/// Runs etcdctl as `user` (`name:password`, before the command's own
/// arguments) and fails unless it succeeds.
fn ok_as(endpoints: &str, user: &str, args: &[&str]) -> String {
    let mut all = vec!["--user", user];
    all.extend_from_slice(args);
    ok(endpoints, &all)
}

/// Runs etcdctl as `user` (`None`: without one), expects it to fail, and
/// returns its stderr.
fn refused(endpoints: &str, user: Option<&str>, args: &[&str]) -> String {
    let mut all = Vec::new();
    if let Some(user) = user {
        all.extend(["--user", user]);
    }
    all.extend_from_slice(args);
    let out = run(endpoints, &all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "etcdctl {all:?} should have been refused: {}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// Tokens through etcd's `Authenticate`: `etcdctl --user name:token`
/// (the token's principal and the token) puts, reads and locks within
/// the token's grants; no user, a wrong password, or a token under
/// another name are refused with etcd's errors; a key outside the grants
/// (or readable only) is `permission denied`; a lease belongs to the
/// principal that granted it; Compact is a cluster admin's; the Auth
/// API's user management points at the cluster file.
#[test]
fn etcdctl_logs_in_with_a_token_and_is_held_to_its_grants() {
    if !have_etcdctl("etcdctl_logs_in_with_a_token_and_is_held_to_its_grants") {
        return;
    }
    let (cluster, doors) = start_cluster_with(|c| c.append_config(&auth_tokens_toml()));
    // `endpoint status` needs no token (etcd's Status is not checked).
    wait_ready(&cluster, &doors);
    let app = format!("etcd-app:{APP_TOKEN}");
    let other = format!("other:{OTHER_TOKEN}");
    let ops = format!("ops:{OPS_TOKEN}");
    let all = doors.join(",");

    // Within the grants, through every member.
    assert_eq!(ok_as(&doors[0], &app, &["put", "app/x", "1"]).trim(), "OK");
    assert_eq!(ok_as(&doors[1], &app, &["get", "app/x"]), "app/x\n1\n");
    assert_eq!(
        ok_as(&doors[2], &app, &["get", "--prefix", "app/", "--keys-only"]).trim(),
        "app/x"
    );
    let held = ok_as(&all, &app, &["lock", "app/nightly", "echo", "held"]);
    assert_eq!(held.trim(), "held");

    // No user, a wrong password, another principal's name.
    let none = refused(&doors[0], None, &["get", "app/x"]);
    assert!(none.contains("etcdserver: user name is empty"), "{none}");
    let none = refused(&doors[1], None, &["put", "app/x", "2"]);
    assert!(none.contains("etcdserver: user name is empty"), "{none}");
    let none = refused(&doors[2], None, &["member", "list"]);
    assert!(none.contains("etcdserver: user name is empty"), "{none}");
    let wrong = refused(&doors[0], Some("etcd-app:not-the-token"), &["get", "app/x"]);
    assert!(
        wrong.contains("etcdserver: authentication failed, invalid user ID or password"),
        "{wrong}"
    );
    let swapped = format!("ops:{APP_TOKEN}");
    let wrong = refused(&doors[1], Some(&swapped), &["get", "app/x"]);
    assert!(
        wrong.contains("etcdserver: authentication failed, invalid user ID or password"),
        "{wrong}"
    );

    // `shared/` is readable, not writable; `other/` neither.
    assert_eq!(
        ok_as(&doors[0], &ops, &["put", "shared/motd", "hi"]).trim(),
        "OK"
    );
    assert_eq!(
        ok_as(&doors[1], &app, &["get", "shared/motd"]),
        "shared/motd\nhi\n"
    );
    for args in [
        &["put", "shared/motd", "mine"][..],
        &["del", "shared/motd"],
        &["get", "other/x"],
        &["put", "other/x", "1"],
        &["get", "--prefix", "app"],
        &["get", "--from-key", "app/"],
        &["lock", "shared/lock", "echo", "never"],
        &["compact", "1"],
    ] {
        let denied = refused(&doors[2], Some(&app), args);
        assert!(
            denied.contains("etcdserver: permission denied"),
            "{args:?}: {denied}"
        );
    }
    assert_eq!(
        ok_as(&doors[2], &app, &["get", "shared/motd"]),
        "shared/motd\nhi\n"
    );
    // A transaction is checked on every compare and both branches.
    let mut txn = etcdctl(&doors[0], &["--user", &app, "txn"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etcdctl txn");
    txn.stdin
        .take()
        .expect("stdin")
        .write_all(b"value(\"app/x\") = \"1\"\n\nput app/y 2\n\nput shared/motd no\n\n")
        .expect("txn input");
    let out = txn.wait_with_output().expect("txn ran");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("etcdserver: permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let untouched = json(&doors[0], &["--user", &app, "get", "app/y"]);
    assert_eq!(untouched["count"].as_i64().unwrap_or(0), 0, "{untouched}");

    // A watch outside the grants is canceled with permission denied.
    let watch = Command::new("timeout")
        .args(["20", ETCDCTL])
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", doors[1]))
        .args(["--user", &app, "watch", "other/x"])
        .stdin(Stdio::null())
        .output()
        .expect("etcdctl watch");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&watch.stdout),
        String::from_utf8_lossy(&watch.stderr)
    );
    assert!(said.contains("permission denied"), "{said}");

    // A lease is its principal's: another cannot see, renew or revoke it.
    let granted = ok_as(&doors[0], &app, &["lease", "grant", "60"]);
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("lease <id> granted")
        .to_string();
    assert_eq!(
        ok_as(
            &doors[1],
            &app,
            &["put", "app/leased", "v", "--lease", &lease]
        )
        .trim(),
        "OK"
    );
    assert!(ok_as(&doors[2], &app, &["lease", "list"]).contains(&lease));
    assert!(!ok_as(&doors[2], &other, &["lease", "list"]).contains(&lease));
    assert!(ok_as(&doors[2], &ops, &["lease", "list"]).contains(&lease));
    for args in [
        &["lease", "revoke", &lease][..],
        &["lease", "keep-alive", "--once", &lease],
        &["lease", "timetolive", &lease],
        &["put", "other/leased", "v", "--lease", &lease],
    ] {
        let denied = refused(&doors[0], Some(&other), args);
        assert!(
            denied.contains("etcdserver: permission denied"),
            "{args:?}: {denied}"
        );
    }
    // `other` may grant its own lease and lock under its prefix.
    let mine = ok_as(&doors[1], &other, &["lock", "other/job", "echo", "mine"]);
    assert_eq!(mine.trim(), "mine");
    assert!(ok_as(&doors[1], &app, &["lease", "revoke", &lease]).contains("revoked"));
    let gone = json(&doors[0], &["--user", &app, "get", "app/leased"]);
    assert_eq!(gone["count"].as_i64().unwrap_or(0), 0, "{gone}");

    // Compact is a cluster admin's.
    let rev = revision_of(&json(&doors[0], &["--user", &ops, "get", "app/x"]));
    ok_as(&doors[0], &ops, &["compact", &rev.to_string()]);

    // Users and roles are the cluster file's.
    for args in [
        &["user", "add", "bob:pw"][..],
        &["role", "add", "readers"],
        &["auth", "enable"],
        &["user", "list"],
    ] {
        let managed = refused(&doors[0], Some(&ops), args);
        assert!(managed.contains("[[auth.tokens]]"), "{args:?}: {managed}");
    }
}

/// The same login over TLS, with client certificates required: a token
/// puts and reads, no token is refused.
#[test]
fn etcdctl_logs_in_over_tls() {
    if !have_etcdctl("etcdctl_logs_in_over_tls") {
        return;
    }
    let mut ca = None;
    let (cluster, doors) = start_cluster_with(|c| {
        ca = Some(c.enable_tls("required"));
        c.append_config(&auth_tokens_toml());
    });
    let ca = ca.expect("a CA");
    let https: Vec<String> = doors.iter().map(|d| format!("https://{d}")).collect();
    let app = format!("etcd-app:{APP_TOKEN}");
    let tls_ctl = |endpoint: &str, user: Option<&str>, args: &[&str]| {
        let mut flags = vec![
            format!("--cacert={}", ca.ca_path().display()),
            format!("--cert={}", ca.client.cert.display()),
            format!("--key={}", ca.client.key.display()),
        ];
        if let Some(user) = user {
            flags.push(format!("--user={user}"));
        }
        let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        etcdctl(endpoint, &all).output().expect("run etcdctl")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = tls_ctl(&https[0], Some(&app), &["put", "app/secure", "1"]);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no TLS put with a token: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = tls_ctl(&https[1], Some(&app), &["get", "app/secure"]);
    assert_eq!(String::from_utf8_lossy(&got.stdout), "app/secure\n1\n");
    let locked = tls_ctl(
        &https[2],
        Some(&app),
        &["lock", "app/tls-lock", "echo", "held"],
    );
    assert_eq!(String::from_utf8_lossy(&locked.stdout).trim(), "held");
    let anonymous = tls_ctl(&https[0], None, &["get", "app/secure"]);
    assert!(!anonymous.status.success());
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("etcdserver: user name is empty"),
        "{}",
        String::from_utf8_lossy(&anonymous.stderr)
    );
    let denied = tls_ctl(&https[1], Some(&app), &["put", "shared/x", "1"]);
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("etcdserver: permission denied"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
}

/// `raftlock up --auth FILE` serves the etcd door with the file's tokens
/// and says how etcdctl logs in.
#[test]
fn raftlock_up_with_auth_serves_the_etcd_door() {
    if !have_etcdctl("raftlock_up_with_auth_serves_the_etcd_door") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, auth_tokens_toml()).expect("tokens");
    // API, Raft, ZooKeeper and etcd ports of three members, all free.
    let base = (20_000..60_000u16)
        .step_by(991)
        .find(|b| {
            (0..3).all(|o| {
                [0, 100, 200, 300]
                    .iter()
                    .all(|d| std::net::TcpListener::bind(("127.0.0.1", b + d + o)).is_ok())
            })
        })
        .expect("a free port range");
    let mut up = Command::new(env!("CARGO_BIN_EXE_raftlock"))
        .args(["up", "--base-port", &base.to_string(), "--auth"])
        .arg(&tokens)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("raftlock up");
    let stdout = up.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut etcd_line = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains("etcd v3 clients") => etcd_line = Some(line),
            Ok(line) if line.contains("Ctrl-C") => break,
            Ok(_) => {}
            Err(e) => panic!("raftlock up never finished starting: {e}"),
        }
    }
    let etcd_line = etcd_line.expect("up prints the etcd endpoints");
    let door = format!("127.0.0.1:{}", base + 300);
    assert!(etcd_line.contains(&door), "{etcd_line}");
    assert!(
        etcd_line.contains("etcdctl --user <name>:<token>"),
        "{etcd_line}"
    );
    let app = format!("etcd-app:{APP_TOKEN}");
    let endpoints = (0..3)
        .map(|o| format!("127.0.0.1:{}", base + 300 + o))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        ok_as(&endpoints, &app, &["put", "app/up", "1"]).trim(),
        "OK"
    );
    assert_eq!(ok_as(&door, &app, &["get", "app/up"]), "app/up\n1\n");
    let none = refused(&door, None, &["get", "app/up"]);
    assert!(none.contains("etcdserver: user name is empty"), "{none}");
    let _ = Command::new("kill")
        .args(["-INT", &up.id().to_string()])
        .status();
    let stop = Instant::now() + Duration::from_secs(30);
    while up.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < stop, "raftlock up did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
}
