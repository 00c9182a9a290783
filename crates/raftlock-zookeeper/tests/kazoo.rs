//! The real kazoo 2.11 client (PyPI) against the door on a three-member
//! in-process cluster: `tests/kazoo/scenario.py` runs kazoo's znode calls,
//! watches and its recipes (Lock, Election, Semaphore, Barrier,
//! DoubleBarrier, Counter, Queue, LockingQueue) with several clients
//! spread over the members. The virtualenv is made once under the target
//! directory. Without `python3` (outside CI) the test says so loudly and
//! passes; with it, a failed install fails the test.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{door_config, Cluster};

const KAZOO: &str = "kazoo==2.11.0";

/// The python of a virtualenv with kazoo, or `None` after saying loudly
/// why `test` cannot run (no python3 on PATH).
async fn kazoo_python(test: &'static str) -> Option<PathBuf> {
    tokio::task::spawn_blocking(move || {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kazoo-2.11.0-venv");
        raftlock_testkit::python::venv(test, &dir, &[KAZOO])
    })
    .await
    .expect("venv")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_locks_watches_and_znodes() {
    let Some(python) = kazoo_python("kazoo_locks_watches_and_znodes").await else {
        return;
    };
    let cluster = Cluster::start(door_config()).await;
    let hosts = cluster
        .addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    run_scenario(&python, "scenario.py", &[hosts]).await;
}

/// Runs `tests/kazoo/NAME` with `args`; fails unless it exits 0 having
/// printed "... scenario: ok". Its output goes to a file, so a scenario
/// that hangs still shows how far it got.
async fn run_scenario(python: &Path, name: &str, args: &[String]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kazoo")
        .join(name);
    let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kazoo-{name}.log"));
    let log = std::fs::File::create(&log_path).expect("scenario log");
    let mut child = tokio::process::Command::new(python)
        .arg("-u")
        .arg(script)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(log.try_clone().expect("scenario log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start the kazoo scenario");
    let status = tokio::time::timeout(Duration::from_secs(240), child.wait()).await;
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let status = match status {
        Ok(status) => status.expect("the kazoo scenario ran"),
        Err(_) => panic!("kazoo {name} did not finish in time:\n{output}"),
    };
    assert!(
        status.success(),
        "kazoo {name} failed ({status}):\n{output}"
    );
    assert!(output.contains("scenario: ok"), "{output}");
    eprintln!("{output}");
}

/// The same kazoo over TLS, authenticating with a bearer token as its
/// `digest` (`tests/kazoo/secure.py`): doors started as `raftlock serve`
/// starts them for a cluster with `[tls]` and `[[auth.tokens]]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_over_tls_with_a_token() {
    let Some(python) = kazoo_python("kazoo_over_tls_with_a_token").await else {
        return;
    };
    raftlock_tls::install_default_provider();
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = raftlock_tls::generate::Ca::create(certs.path(), "kazoo test CA").expect("a CA");
    let member = ca
        .issue_member(certs.path(), "member", &["127.0.0.1", "localhost"])
        .expect("a member certificate");
    let tls = raftlock_tls::api_server_config(&raftlock_tls::TlsSettings {
        ca: ca.cert_path.clone(),
        cert: member.cert,
        key: member.key,
        client_auth: raftlock_tls::ClientAuth::None,
    })
    .expect("a server config");
    let token = "kazoo-jobs-token";
    use raftlock_api::auth::{hash_token, AuthConfig, Grant, Permission, Token};
    let config = raftlock_zookeeper::door::DoorConfig {
        auth: AuthConfig {
            tokens: vec![Token {
                name: "jobs".into(),
                sha256: hash_token(token),
                // `jobs`, not `jobs/`: kazoo's recipes create `/jobs`
                // itself (docs/zookeeper.md, tokens).
                grants: vec![Grant {
                    prefix: "jobs".into(),
                    allow: vec![Permission::Read, Permission::Write],
                }],
            }],
        },
        ..door_config()
    };
    let cluster = Cluster::start_tls(config, tls).await;
    let hosts = cluster
        .addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let args = [hosts, ca.cert_path.display().to_string(), token.to_string()];
    run_scenario(&python, "secure.py", &args).await;
}
