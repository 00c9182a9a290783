//! The `raftlock-jepsen` binary: `check FILE` exit codes and output.

mod common;

use common::parse;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_raftlock-jepsen"))
}

fn saved(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    parse(text)
        .write_jsonl(std::fs::File::create(&path).unwrap())
        .unwrap();
    (dir, path)
}

#[test]
fn valid_history_exits_zero() {
    let (dir, path) = saved(
        "0 1 invoke acquire k=l
         10 1 ok acquire k=l
         20 1 invoke release k=l
         30 1 ok release k=l",
    );
    let out_dir = dir.path().join("report");
    let out = bin()
        .arg("check")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("linearizable(mutex)"), "{stdout}");
    assert!(stdout.contains("verdict: valid"), "{stdout}");
    assert!(out_dir.join("timeline.html").exists());
}

#[test]
fn invalid_history_exits_one_and_explains() {
    let (_dir, path) = saved(
        "0 1 invoke acquire k=l
         10 1 ok acquire k=l
         20 2 invoke acquire k=l
         30 2 ok acquire k=l",
    );
    let out = bin().arg("check").arg(&path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not linearizable"), "{stdout}");
    assert!(stdout.contains("verdict: INVALID"), "{stdout}");
}

#[test]
fn undecided_history_exits_three() {
    let (_dir, path) = saved(
        "0 1 invoke write k=x 1
         0 2 invoke write k=x 2
         10 1 ok write k=x 1
         10 2 ok write k=x 2
         20 3 invoke read k=x
         30 3 ok read k=x 2",
    );
    let out = bin()
        .args(["check", "--max-steps", "1", "--workload", "register"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn unreadable_input_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, "{\"index\": 0}\n").unwrap();
    let out = bin().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1"));
    let missing = bin()
        .args(["check", "/nonexistent/history.jsonl"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn test_subcommand_refuses_bad_usage_with_exit_two() {
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();
    // No workload.
    let out = bin().arg("test").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // An unknown fault is named, with the known ones.
    let out = bin()
        .args(["test", "--workload", "mutex", "--nemesis", "kill,meteor"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("meteor"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("partition-leader"),
        "{}",
        stderr(&out)
    );
    // A missing raftlock binary says how to build it (nothing is started).
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["test", "--workload", "register", "--nemesis", "none"])
        .arg("--raftlock-bin")
        .arg(dir.path().join("no-such-raftlock"))
        .arg("--store")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cargo build -p raftlock-cli"),
        "{}",
        stderr(&out)
    );
}
