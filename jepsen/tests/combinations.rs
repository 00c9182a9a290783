//! The nemesis combinations that change which processes a run starts,
//! started for real: the cluster a run of that combination gets
//! (`runner::cluster_options`, which the unit tests check for every
//! combination the CLI offers), then the membership changes its nemesis
//! makes, in a fixed order and without clients: a spare joins, a founder
//! is removed (its data directory wiped) and added back with an empty
//! disk, and, with member processes, each of the two takes a disk fault
//! through its fault hooks afterwards. No member may exit on its own.
//!
//! `#[ignore]`d like `tests/cluster.rs` (they need the binaries built):
//! `jepsen/ci.sh` runs them with
//! `cargo test -p raftlock-jepsen --test combinations -- --ignored --test-threads=1`.

mod process;

use std::time::Duration;

use raftlock_jepsen::api::Reply;
use raftlock_jepsen::control::{default_member_bin, default_raftlock_bin, Cluster};
use raftlock_jepsen::nemesis::{membership, Fault};
use raftlock_jepsen::runner::{cluster_options, TestOptions};
use raftlock_jepsen::workload::route::Routing;
use raftlock_jepsen::Workload;

/// Starts the cluster of `workload` / `clients` / `nemesis`, adds the
/// first spare, removes founder 2 and adds it back, and checks that every
/// member is healthy, that the disk faults reach both joined members when
/// the run has them, and that nothing crashed.
fn start_and_change(workload: Workload, clients: Routing, nemesis: &str) {
    let _one = process::one_at_a_time();
    for bin in [default_raftlock_bin(), default_member_bin()] {
        process::binary(bin, "cargo build -p raftlock-cli -p raftlock-jepsen");
    }
    let mut opts = TestOptions::new(workload);
    opts.faults = Fault::parse_list(nemesis).unwrap();
    opts.clients = clients;
    let log_dir = process::store().join(format!(
        "combination-{}-{clients}",
        nemesis.replace(',', "+")
    ));
    let _ = std::fs::remove_dir_all(&log_dir);
    let plan = cluster_options(&opts, log_dir.clone()).unwrap();
    let disk = opts.faults.iter().any(|f| f.is_disk());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cluster = Cluster::start(&plan).await.unwrap();
        let result = changes(&cluster, disk).await;
        let crashed = cluster.crashed().await;
        cluster.shutdown().await;
        if let Err(e) = result {
            panic!(
                "{nemesis} with {clients} clients: {e}\n(node logs in {})",
                log_dir.display()
            );
        }
        assert!(
            crashed.is_empty(),
            "{nemesis} with {clients} clients: members exited on their own: {crashed:?} \
             (node logs in {})",
            log_dir.display()
        );
    });
}

async fn changes(cluster: &Cluster, disk: bool) -> Result<(), String> {
    let healthy = Duration::from_secs(60);
    cluster.wait_healthy(healthy).await?;
    let spare = *cluster.spares().await.first().ok_or("no spare id")?;
    membership::add(cluster, spare)
        .await
        .map_err(|e| format!("adding spare n{spare}: {e}"))?;
    membership::remove(cluster, 2)
        .await
        .map_err(|e| format!("removing n2: {e}"))?;
    membership::add(cluster, 2)
        .await
        .map_err(|e| format!("adding n2 back: {e}"))?;
    cluster.wait_healthy(healthy).await?;
    let members = cluster.members();
    if !members.contains(&2) || !members.contains(&spare) {
        return Err(format!("members at the end: {members:?}"));
    }
    if disk {
        let faults = cluster
            .faults
            .as_ref()
            .ok_or("member processes without fault hooks")?;
        for id in [spare, 2] {
            for (path, body) in [
                ("/fault/slow-fsync", serde_json::json!({"delay_ms": 0})),
                ("/fault/disk-full", serde_json::json!({"full": false})),
            ] {
                match faults.inject(id, path, body).await {
                    Reply::Ok(()) => {}
                    other => return Err(format!("{path} on n{id}: {:?}", other.code())),
                }
            }
        }
    }
    Ok(())
}

fn tmpfs_if_root(nemesis: &str) -> String {
    if process::is_root() {
        format!("{nemesis},disk-fill")
    } else {
        nemesis.to_string()
    }
}

/// Every fault at once with HTTP clients: member processes (for the disk
/// hooks), spare ids (membership), with root every data directory on a
/// tmpfs (disk-fill).
#[test]
#[ignore = "needs target/debug/raftlock and raftlock-jepsen: run jepsen/ci.sh"]
fn every_fault_at_once_with_http_clients() {
    start_and_change(Workload::Mutex, Routing::Sticky, &tmpfs_if_root("all,disk"));
}

/// The same with the clients embedded in the members.
#[test]
#[ignore = "needs target/debug/raftlock and raftlock-jepsen: run jepsen/ci.sh"]
fn every_fault_at_once_with_embedded_clients() {
    start_and_change(
        Workload::Fenced,
        Routing::Embedded,
        &tmpfs_if_root("all,disk"),
    );
}

/// Membership without the disk hooks: `raftlock serve --join` (with root,
/// on tmpfs data directories).
#[test]
#[ignore = "needs target/debug/raftlock: run jepsen/ci.sh"]
fn membership_with_the_shipped_binary() {
    start_and_change(
        Workload::Register,
        Routing::Random,
        &tmpfs_if_root("membership"),
    );
}
