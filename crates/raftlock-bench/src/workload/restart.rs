//! `restart`: load L held lock nodes (100 sessions, distinct locks, each
//! system's cheapest way: raftlock one try-lock per lock, etcd 128-put
//! txns of the keys its lock service writes, ZooKeeper multis of
//! directory + ephemeral sequential node), then kill -9 a follower,
//! start it again, and time until that member alone answers a read that
//! finds the last lock loaded held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{close_sessions, open_sessions, Keepalive};
use crate::backend::Backend;
use crate::cluster::Cluster;
use crate::procfs::rss_bytes;
use crate::progress::{say, Progress};

const SESSIONS: usize = 100;
const TTL: Duration = Duration::from_secs(60);
/// Chunks (txns, multis, batches of try-locks) in flight while loading.
const IN_FLIGHT: usize = 4;
/// Longest a restart may take before we call it failed.
const RESTART_LIMIT: Duration = Duration::from_secs(900);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Restart {
    pub nodes: usize,
    pub load_secs: f64,
    pub restarted_member: u32,
    pub data_bytes: u64,
    /// Spawn → the member answers a read finding the last lock held.
    pub restart_to_serve_s: f64,
    pub rss_after_restart: u64,
}

pub async fn run<B: Backend>(
    b: &B,
    cluster: &mut Cluster,
    nodes: usize,
) -> anyhow::Result<Restart> {
    let members = cluster.members.len();
    let name = b.system().name();
    let sessions = open_sessions(b, SESSIONS, TTL, |i| i % members, 32, "open").await?;
    let keepalive = Keepalive::start(b, sessions.clone(), TTL / 3);

    let t0 = Instant::now();
    let chunk = b.bulk_chunk().max(1);
    let progress = Progress::start(format!("{name} load {nodes} lock nodes"), "nodes");
    let next_session = AtomicUsize::new(0);
    let starts: Vec<usize> = (0..nodes).step_by(chunk).collect();
    let loaded: Vec<anyhow::Result<()>> = futures::stream::iter(starts)
        .map(|first| {
            let s = sessions[next_session.fetch_add(1, Ordering::Relaxed) % SESSIONS].clone();
            let progress = progress.clone();
            async move {
                let locks: Vec<String> = (first..(first + chunk).min(nodes))
                    .map(|i| format!("r{i}"))
                    .collect();
                let r = b.bulk_hold(&s, &locks).await;
                progress.add(locks.len() as u64);
                r
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    drop(progress);
    if let Some(Err(e)) = loaded.into_iter().find(Result::is_err) {
        keepalive.stop().await;
        return Err(e.context("loading lock nodes"));
    }
    let load_secs = t0.elapsed().as_secs_f64();
    let probe = format!("r{}", nodes.saturating_sub(1));
    // Let followers apply everything before the kill.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let leader = cluster.leader().await?;
    let victim = (leader + 1) % members;
    let member = cluster.members[victim].id;
    let data_bytes = cluster.data_bytes(victim);
    cluster.kill9(victim).await;
    say(format!(
        "  {name}: killed follower member {member} ({:.0} MiB of data); restarting it",
        data_bytes as f64 / (1 << 20) as f64
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.restart(victim)?;
    let spawned = Instant::now();
    let serving = loop {
        if b.serves_on(victim, &probe).await {
            break spawned.elapsed();
        }
        if spawned.elapsed() > RESTART_LIMIT {
            keepalive.stop().await;
            bail!("member {member} did not serve within {RESTART_LIMIT:?} of its restart");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let rss = cluster.members[victim]
        .pid()
        .and_then(rss_bytes)
        .unwrap_or(0);
    keepalive.stop().await;
    close_sessions(b, sessions, 32).await;
    Ok(Restart {
        nodes,
        load_secs,
        restarted_member: member,
        data_bytes,
        restart_to_serve_s: serving.as_secs_f64(),
        rss_after_restart: rss,
    })
}
