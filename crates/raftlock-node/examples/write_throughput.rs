//! Committed writes per second through a three-node in-process cluster
//! with fsync on, for 1 and 64 concurrent clients, plus p50/p99 latency.
//! Each row runs twice: through the node's proposer (concurrent writes
//! share log entries) and with one log entry per write (`client_write`
//! straight into openraft, as before the proposer), so the ratio comes
//! from one run on one machine.
//!
//! Run: `cargo run --release -p raftlock-node --example write_throughput`

use std::time::{Duration, Instant};

use raftlock_core::{Command, SessionId};
use raftlock_node::{ClusterSettings, LocalCluster, Node, Proposal};

const DURATION: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
enum Path {
    Proposer,
    EntryPerWrite,
}

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
        "{:>8} {:>16} {:>12} {:>10} {:>10}",
        "clients", "path", "writes/s", "p50 ms", "p99 ms"
    );
    let mut round = 0u128;
    for clients in [1usize, 64] {
        for path in [Path::EntryPerWrite, Path::Proposer] {
            round += 1;
            let node = cluster.node(leader).clone();
            let (rate, p50, p99) = measure(&node, clients, path, round).await?;
            println!(
                "{clients:>8} {:>16} {rate:>12.0} {p50:>10.2} {p99:>10.2}",
                format!("{path:?}")
            );
        }
    }
    cluster.shutdown().await;
    Ok(())
}

/// Writes/s, p50 ms, p99 ms of `clients` tasks writing for [`DURATION`].
async fn measure(
    node: &Node,
    clients: usize,
    path: Path,
    round: u128,
) -> anyhow::Result<(f64, f64, f64)> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0u128;
            while started.elapsed() < DURATION {
                let t = Instant::now();
                let command = Command::OpenSession {
                    id: SessionId(round << 96 | (c as u128) << 64 | i),
                    owner: String::new(),
                    ttl_ms: 60_000,
                };
                match path {
                    Path::Proposer => {
                        node.submit_command(command).await?;
                    }
                    Path::EntryPerWrite => {
                        node.raft().client_write(Proposal::one(command)).await?;
                    }
                }
                latencies.push(t.elapsed());
                i += 1;
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    let rate = all.len() as f64 / started.elapsed().as_secs_f64();
    Ok((rate, pct(0.5), pct(0.99)))
}
