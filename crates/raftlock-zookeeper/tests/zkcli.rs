//! ZooKeeper's own shell, zkCli (Debian's `zookeeper` package, installed by
//! scripts/install-zookeeper.sh), against the door on a three-member
//! in-process cluster: one zkCli session fed a script on stdin, whose
//! output must show each command's effect. Without zkCli or `java` the
//! test says so loudly and passes.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{door_config, Cluster};
use tokio::io::AsyncWriteExt;

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkcli_creates_lists_watches_and_deletes() {
    if !Path::new(ZKCLI).is_file() {
        eprintln!("==========================================================");
        eprintln!("SKIP zkcli_creates_lists_watches_and_deletes: no {ZKCLI}");
        eprintln!("(bash scripts/install-zookeeper.sh installs it)");
        eprintln!("==========================================================");
        return;
    }
    let cluster = Cluster::start(door_config()).await;
    let server = cluster
        .addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // `get -w` leaves a data watch; the `set` after it fires it, and zkCli
    // prints the event. zkCli prints some answers (`Created`) on stderr.
    let script = "\
create /zkcli top
create -e -s /zkcli/n- eph
create /zkcli/x one
create /zkcli/x/deep d
getAllChildrenNumber /zkcli
getAllChildrenNumber /nowhere
delete /zkcli/x/deep
ls /zkcli
get -w /zkcli/x
set /zkcli/x two
stat /zkcli/x
get /zkcli/x
delete /zkcli/x
ls /zkcli
deleteall /zkcli
ls /
quit
";
    let mut child = tokio::process::Command::new(ZKCLI)
        .args(["-server", &server])
        .env("ZOO_LOG4J_PROP", "ERROR,CONSOLE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start zkCli");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(script.as_bytes()).await.expect("script");
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("zkCli finished in time")
        .expect("zkCli ran");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    let all = format!("{text}\n--- stderr ---\n{err}");
    for expected in [
        "Created /zkcli",
        "Created /zkcli/n-0000000000",
        "Created /zkcli/x",
        "[n-0000000000, x]",
        "Node does not exist: /nowhere",
        "one",
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/zkcli/x",
        "dataVersion = 1",
        "ephemeralOwner = 0x0",
        "two",
        "[n-0000000000]",
        "[zookeeper]",
    ] {
        assert!(
            all.contains(expected),
            "zkCli output lacks {expected:?}:\n{all}"
        );
    }
    assert!(!all.contains("Exception"), "{all}");
    // getAllChildrenNumber prints the count alone on its line: /zkcli's
    // two children and x's child.
    assert!(
        text.lines().any(|line| line.trim() == "3"),
        "getAllChildrenNumber /zkcli is not 3:\n{all}"
    );
}
