//! The process launcher, on a stand-in for `raftlock serve` (a shell
//! script that ignores its arguments): start, pause, resume, kill -9,
//! exits it did not cause, and CPU pinning.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use raftlock_testkit::process::{NodeProcess, NodeSpec};
use raftlock_testkit::{eventually, WAIT};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn spec(dir: &Path, bin: PathBuf, cpu: Option<usize>) -> NodeSpec {
    NodeSpec {
        id: 1,
        bin,
        control: None,
        config: dir.join("cluster.toml"),
        peers: vec![(2, "127.0.0.1:1".into())],
        extra: Vec::new(),
        log: dir.join("node-1.log"),
        cpu,
    }
}

/// A field of `/proc/PID/status` (e.g. `State:`).
fn status(pid: u32, key: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[tokio::test]
async fn start_pause_resume_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = script(dir.path(), "member", "echo \"$@\"\nexec sleep 60");
    let config = dir.path().join("cluster.toml");
    let args = format!(
        "serve --config {} --id 1 --peer 2=127.0.0.1:1",
        config.display()
    );
    let log = dir.path().join("node-1.log");
    let logged = |n: usize| {
        let (log, args) = (log.clone(), args.clone());
        async move {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.lines().filter(|l| *l == args).count() == n
        }
    };
    let mut member = NodeProcess::new(spec(dir.path(), bin, None));
    member.start().expect("start");
    assert!(member.is_running());
    eventually("the first incarnation logged", WAIT, || logged(1)).await;
    let pid = member.pid().expect("pid");
    member.pause().expect("pause");
    eventually("stopped", WAIT, || async {
        status(pid, "State:").starts_with('T')
    })
    .await;
    member.resume().expect("resume");
    eventually("running again", WAIT, || async {
        !status(pid, "State:").starts_with('T')
    })
    .await;
    member.kill9().await;
    assert!(!member.is_running());
    assert!(member.crashes.is_empty(), "{:?}", member.crashes);
    member.start().expect("second incarnation");
    assert_eq!(member.starts, 2);
    // Both incarnations wrote their arguments to the one log, appended.
    eventually("both incarnations logged", WAIT, || logged(2)).await;
    member.stop(Duration::from_secs(5)).await;
    assert!(!member.is_running());
}

#[tokio::test]
async fn an_exit_the_launcher_did_not_cause_is_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = script(dir.path(), "member", "exit 3");
    let mut member = NodeProcess::new(spec(dir.path(), bin, None));
    member.start().expect("start");
    eventually("the member exits", WAIT, || {
        let running = member.is_running();
        async move { !running }
    })
    .await;
    member.note_crash();
    assert_eq!(member.crashes.len(), 1, "{:?}", member.crashes);
}

#[tokio::test]
async fn a_pinned_member_runs_on_its_cpu_only() {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    let cpu = (0..nix::sched::CpuSet::count())
        .rev()
        .find(|&c| allowed.is_set(c).unwrap_or(false))
        .expect("a CPU");
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = script(dir.path(), "member", "exec sleep 60");
    let mut member = NodeProcess::new(spec(dir.path(), bin, Some(cpu)));
    member.start().expect("start");
    let pid = member.pid().expect("pid");
    assert_eq!(status(pid, "Cpus_allowed_list:"), cpu.to_string());
    member.kill9().await;
    // The launching thread got its own set back.
    let after = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    assert_eq!(after, allowed);
}
