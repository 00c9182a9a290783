//! Issue 14, as reported: 200 bytes flipped in the middle of a stopped
//! follower's log file made the member start without a word (sled, which
//! held the log then, silently dropped everything written after the
//! damaged record). The log is now in segment files whose records are
//! checked at open: the real `raftlock serve` process refuses to start,
//! naming the file and offset.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{ProcessCluster, RAFTLOCK};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_log_file_was_damaged_refuses_to_start() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    for i in 0..150 {
        let path = format!("/v1/nodes/c/k{i}");
        let status = cluster.put(leader, &path, json!({"data": "eA=="})).await;
        assert_eq!(status.ok(), Some(201), "put {i}");
    }
    // A linearizable read on the follower answers once it applied the
    // last write, so its log holds (durably) every entry before it.
    let (status, _) = cluster.get(follower, "/v1/nodes/c/k149").await;
    assert_eq!(status, 200, "{}", cluster.logs());
    cluster.kill9(follower);

    let segment = cluster
        .data_dir(follower)
        .join("log")
        .join("segment-0000000000000001.log");
    let mut bytes = std::fs::read(&segment).expect("read the log's segment file");
    // The middle of the records written (the rest of the file is zeros).
    let middle = bytes.iter().rposition(|b| *b != 0).expect("records") / 2;
    for b in &mut bytes[middle..middle + 200] {
        *b ^= 0xa5;
    }
    std::fs::write(&segment, bytes).expect("write the segment file");

    let mut child = Command::new(RAFTLOCK)
        .args(["serve", "--config"])
        .arg(&cluster.config)
        .args(["--id", &follower.to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn raftlock serve");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the damaged member is still running after 30 s: it started");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stderr}");
    assert!(!status.success(), "exited with success: {stderr}");
    // Records after the damage say it was acknowledged: refused, naming
    // the file and offset.
    assert!(
        stderr.contains("refusing to start from")
            && stderr.contains("segment-0000000000000001.log, offset"),
        "{stderr}"
    );

    // The rest of the cluster still serves.
    let (status, _) = cluster.get(leader, "/v1/nodes/c/k0").await;
    assert_eq!(status, 200);
}
