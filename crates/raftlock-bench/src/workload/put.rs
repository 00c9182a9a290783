//! `put`: C clients, each with its own session and its own key (node),
//! write a small value in a loop as fast as they can: the generic write
//! path without the lock recipe (raftlock `PUT /v1/nodes/…`, etcd `Put`,
//! ZooKeeper `setData`). Client i talks to member (leader + i) mod 3, as
//! in `uncontended`. One unrecorded put each first (it may create the node).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{close_sessions, open_sessions, TTL};
use crate::backend::Backend;
use crate::procfs::{CpuSample, CpuUsage};
use crate::progress::Progress;
use crate::stats::{Latency, LatencySummary};

/// Bytes written per put.
pub const VALUE_BYTES: usize = 32;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Put {
    pub clients: usize,
    pub pinned: bool,
    /// Which repetition (0-based) of the measurement this is.
    pub run: usize,
    pub secs: f64,
    pub puts: u64,
    pub puts_per_sec: f64,
    pub latency: LatencySummary,
    /// All members' CPU time per put, in microseconds.
    pub server_cpu_us_per_put: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub cpu: CpuUsage,
}

#[allow(clippy::too_many_arguments)]
pub async fn run<B: Backend>(
    b: &B,
    pids: &[u32],
    leader: usize,
    members: usize,
    clients: usize,
    secs: f64,
    pinned: bool,
    run: usize,
) -> anyhow::Result<Put> {
    let sessions = open_sessions(b, clients, TTL, |i| (leader + i) % members, 64, "open").await?;
    let keys: Vec<String> = (0..clients).map(|i| format!("p{clients}-{i}")).collect();
    let value = vec![b'v'; VALUE_BYTES];
    for (s, key) in sessions.iter().zip(&keys) {
        b.put(s, key, &value).await?;
    }
    let progress = Progress::start(format!("{} put c={clients}", b.system().name()), "puts");
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let cpu0 = CpuSample::take(pids);
    let tasks: Vec<_> = sessions
        .iter()
        .zip(&keys)
        .map(|(s, key)| {
            let (b, s, key, progress, value) = (
                b.clone(),
                s.clone(),
                key.clone(),
                progress.clone(),
                value.clone(),
            );
            tokio::spawn(async move { client(&b, &s, &key, &value, end, &progress).await })
        })
        .collect();
    let mut latency = Latency::new();
    let (mut puts, mut errors, mut first_error) = (0, 0, None);
    for t in tasks {
        let r = t.await?;
        latency.merge(&r.latency);
        puts += r.puts;
        errors += r.errors;
        first_error = first_error.or(r.first_error);
    }
    let cpu = cpu0.until(&CpuSample::take(pids));
    let wall = start.elapsed().as_secs_f64();
    drop(progress);
    close_sessions(b, sessions, 64).await;
    Ok(Put {
        clients,
        pinned,
        run,
        secs: wall,
        puts,
        puts_per_sec: puts as f64 / wall,
        latency: latency.summary(),
        server_cpu_us_per_put: cpu.per_op_us(puts),
        errors,
        first_error,
        cpu,
    })
}

struct ClientResult {
    latency: Latency,
    puts: u64,
    errors: u64,
    first_error: Option<String>,
}

async fn client<B: Backend>(
    b: &B,
    s: &Arc<B::Session>,
    key: &str,
    value: &[u8],
    end: Instant,
    progress: &Progress,
) -> ClientResult {
    let mut r = ClientResult {
        latency: Latency::new(),
        puts: 0,
        errors: 0,
        first_error: None,
    };
    while Instant::now() < end {
        let t0 = Instant::now();
        match b.put(s, key, value).await {
            Ok(()) => {
                r.latency.record(t0.elapsed());
                r.puts += 1;
                progress.add(1);
            }
            Err(e) => {
                r.errors += 1;
                r.first_error.get_or_insert_with(|| format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    r
}
