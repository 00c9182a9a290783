//! Committed writes per second through a three-node in-process cluster
//! with fsync on, for 1 and 64 concurrent clients, plus p50/p99 latency.
//!
//! Run: `cargo run --release -p raftlock-node --example write_throughput`

use std::time::{Duration, Instant};

use raftlock_core::{Command, SessionId};
use raftlock_node::{ClusterSettings, LocalCluster};

const DURATION: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cluster = LocalCluster::start(dir.path(), 3, ClusterSettings::default()).await?;
    let leader = cluster
        .leader(Duration::from_secs(10))
        .await
        .ok_or_else(|| anyhow::anyhow!("no leader"))?;
    println!("3 in-process nodes, fsync on, writes proposed on the leader (node {leader}), {DURATION:?} per row");
    println!(
        "{:>8} {:>12} {:>10} {:>10}",
        "clients", "writes/s", "p50 ms", "p99 ms"
    );
    for clients in [1usize, 64] {
        let node = cluster.node(leader).clone();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = 0u64;
                while started.elapsed() < DURATION {
                    let t = Instant::now();
                    let command = Command::OpenSession {
                        id: SessionId(((c as u128) << 64) | i as u128),
                        owner: String::new(),
                        ttl_ms: 60_000,
                    };
                    node.submit(command).await?;
                    latencies.push(t.elapsed());
                    i += 1;
                }
                Ok::<_, raftlock_node::NodeError>(latencies)
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await??);
        }
        all.sort();
        let pct =
            |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)].as_secs_f64() * 1e3;
        println!(
            "{:>8} {:>12.0} {:>10.2} {:>10.2}",
            clients,
            all.len() as f64 / started.elapsed().as_secs_f64(),
            pct(0.5),
            pct(0.99)
        );
    }
    cluster.shutdown().await;
    Ok(())
}
