//! Apache Curator 5.4 (Debian's `libcurator-recipes-java`, installed by
//! scripts/install-curator.sh) against the door on a three-member
//! in-process cluster: `tests/curator/CuratorSuite.java`, compiled here
//! with `javac`, runs Curator's mutex, read-write lock, semaphore, leader
//! latch, leader selector, atomic long, persistent node and cache recipes,
//! each with several clients spread over the members, and asks this test
//! to stop and start members mid-run (its "CONTROL" lines on stdout).
//!
//! Without javac or the jars the test says so loudly and passes, except
//! in CI (`CI=true`), where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{door_config, Cluster};
use raftlock_zookeeper::door::Door;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const JAVA_DIR: &str = "/usr/share/java";

/// The jars the suite compiles and runs against.
const JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
];

const SCENARIOS: usize = 8;

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// javac, java and the classpath; or what is missing.
fn toolchain() -> Result<(PathBuf, PathBuf, String), String> {
    let javac = on_path("javac").ok_or("no javac on PATH")?;
    let java = on_path("java").ok_or("no java on PATH")?;
    let mut classpath = Vec::new();
    for jar in JARS {
        let path = Path::new(JAVA_DIR).join(jar);
        if !path.is_file() {
            return Err(format!("no {}", path.display()));
        }
        classpath.push(path.display().to_string());
    }
    Ok((javac, java, classpath.join(":")))
}

/// Compiles the suite into the target directory; the class directory.
fn compile(javac: &Path, classpath: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("curator-suite-classes");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("class directory");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator/CuratorSuite.java");
    let done = std::process::Command::new(javac)
        .args(["-nowarn", "-d"])
        .arg(&out)
        .arg("-cp")
        .arg(classpath)
        .arg(&source)
        .output()
        .expect("run javac");
    assert!(
        done.status.success(),
        "javac failed:\n{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// Carries out one "CONTROL stop N" / "CONTROL start N" of the suite.
async fn control(cluster: &mut Cluster, command: &str) -> Result<(), String> {
    let (verb, member) = command
        .split_once(' ')
        .ok_or_else(|| format!("bad control line {command:?}"))?;
    let id: u64 = member
        .parse()
        .map_err(|_| format!("bad member in {command:?}"))?;
    if !(1..=3).contains(&id) {
        return Err(format!("no member {id}"));
    }
    let index = (id - 1) as usize;
    match verb {
        "stop" => {
            // A graceful stop closes the member's ZooKeeper connections:
            // its clients must move on to another member.
            cluster.inner.stop(id).await;
            Ok(())
        }
        "start" => {
            let addr = cluster.doors[index].local_addr();
            cluster
                .inner
                .restart(id)
                .await
                .map_err(|e| format!("restart member {id}: {e}"))?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("bind {addr} again: {e}"))?;
            let node = cluster.inner.node(id).clone();
            cluster.doors[index] = Door::spawn(node, listener, door_config())
                .map_err(|e| format!("door on {addr}: {e}"))?;
            cluster
                .inner
                .leader(Duration::from_secs(20))
                .await
                .ok_or("no leader after the restart")?;
            Ok(())
        }
        _ => Err(format!("bad control verb in {command:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_recipes_hold_their_promises() {
    let (javac, java, classpath) = match toolchain() {
        Ok(found) => found,
        Err(missing) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the Curator suite cannot run in CI: {missing} (scripts/install-curator.sh installs it)"
            );
            eprintln!("==========================================================");
            eprintln!("SKIP curator_recipes_hold_their_promises: {missing}");
            eprintln!("(bash scripts/install-curator.sh installs javac and Curator)");
            eprintln!("==========================================================");
            return;
        }
    };
    let classes = {
        let classpath = classpath.clone();
        tokio::task::spawn_blocking(move || compile(&javac, &classpath))
            .await
            .expect("javac")
    };
    let mut cluster = Cluster::start(door_config()).await;
    let hosts = cluster
        .addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut child = tokio::process::Command::new(java)
        .arg("-cp")
        .arg(format!("{}:{classpath}", classes.display()))
        .arg("CuratorSuite")
        .arg(&hosts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Curator suite");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr_text = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut transcript = String::new();
    let mut stops = 0;
    let run = async {
        while let Some(line) = lines.next_line().await.expect("read the suite's output") {
            transcript.push_str(&line);
            transcript.push('\n');
            if let Some(command) = line.strip_prefix("CONTROL ") {
                if command.starts_with("stop ") {
                    stops += 1;
                }
                if let Err(error) = control(&mut cluster, command).await {
                    panic!("{error}\n{transcript}");
                }
                stdin.write_all(b"done\n").await.expect("answer the suite");
                stdin.flush().await.expect("answer the suite");
            }
        }
    };
    let finished = tokio::time::timeout(Duration::from_secs(240), run).await;
    let status = child.wait().await.expect("the Curator suite ran");
    let stderr_text = stderr_text.await.unwrap_or_default();
    assert!(
        finished.is_ok(),
        "the Curator suite did not finish in time:\n{transcript}\n{stderr_text}"
    );
    eprintln!("{transcript}");
    assert!(
        status.success(),
        "Curator suite failed ({status}):\n{transcript}\n{stderr_text}"
    );
    assert!(
        transcript.contains(&format!("curator suite: {SCENARIOS} passed, 0 failed")),
        "{transcript}\n{stderr_text}"
    );
    // The mutex and leader latch scenarios each stopped a member mid-run.
    assert!(stops >= 2, "members stopped: {stops}\n{transcript}");
}
