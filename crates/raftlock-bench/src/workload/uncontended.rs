//! `uncontended`: C clients, each with its own session and its own lock,
//! loop acquire → release as fast as they can. Client i talks to member
//! (leader + i) mod 3, so one client talks to the leader and many spread
//! evenly, the same for every system. One unrecorded warm-up cycle each
//! first (connections, ZooKeeper's lock directory).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{close_sessions, open_sessions, TTL};
use crate::backend::{Acquired, Backend};
use crate::procfs::{CpuSample, CpuUsage};
use crate::progress::Progress;
use crate::stats::{Latency, LatencySummary};

const WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Uncontended {
    pub clients: usize,
    /// Members on one core, the load generator on another.
    pub pinned: bool,
    /// Which repetition (0-based) of the measurement this is.
    pub run: usize,
    pub secs: f64,
    pub cycles: u64,
    pub cycles_per_sec: f64,
    pub acquire: LatencySummary,
    pub release: LatencySummary,
    pub errors: u64,
    pub first_error: Option<String>,
    /// All members' CPU time per acquire+release cycle, in microseconds.
    pub server_cpu_us_per_cycle: f64,
    pub cpu: CpuUsage,
}

struct ClientResult {
    acquire: Latency,
    release: Latency,
    cycles: u64,
    errors: u64,
    first_error: Option<String>,
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
) -> anyhow::Result<Uncontended> {
    let sessions = open_sessions(b, clients, TTL, |i| (leader + i) % members, 64, "open").await?;
    let locks: Vec<String> = (0..clients).map(|i| format!("u{clients}-{i}")).collect();
    // Warm-up cycle, unrecorded.
    for (s, lock) in sessions.iter().zip(&locks) {
        cycle(b, s, lock).await?;
    }
    let progress = Progress::start(
        format!("{} uncontended c={clients}", b.system().name()),
        "cycles",
    );
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let cpu0 = CpuSample::take(pids);
    let tasks: Vec<_> = sessions
        .iter()
        .zip(&locks)
        .map(|(s, lock)| {
            let (b, s, lock, progress) = (b.clone(), s.clone(), lock.clone(), progress.clone());
            tokio::spawn(async move { client(&b, &s, &lock, end, &progress).await })
        })
        .collect();
    let mut acquire = Latency::new();
    let mut release = Latency::new();
    let (mut cycles, mut errors, mut first_error) = (0, 0, None);
    for t in tasks {
        let r = t.await?;
        acquire.merge(&r.acquire);
        release.merge(&r.release);
        cycles += r.cycles;
        errors += r.errors;
        first_error = first_error.or(r.first_error);
    }
    let cpu = cpu0.until(&CpuSample::take(pids));
    let wall = start.elapsed().as_secs_f64();
    drop(progress);
    close_sessions(b, sessions, 64).await;
    Ok(Uncontended {
        clients,
        pinned,
        run,
        secs: wall,
        cycles,
        cycles_per_sec: cycles as f64 / wall,
        acquire: acquire.summary(),
        release: release.summary(),
        errors,
        first_error,
        server_cpu_us_per_cycle: cpu.per_op_us(cycles),
        cpu,
    })
}

async fn cycle<B: Backend>(b: &B, s: &B::Session, lock: &str) -> anyhow::Result<()> {
    match b.acquire(s, lock, WAIT).await? {
        Acquired::Granted { .. } => b.release(s, lock).await,
        Acquired::TimedOut => Err(anyhow::anyhow!("{lock} is held by someone else")),
    }
}

async fn client<B: Backend>(
    b: &B,
    s: &Arc<B::Session>,
    lock: &str,
    end: Instant,
    progress: &Progress,
) -> ClientResult {
    let mut r = ClientResult {
        acquire: Latency::new(),
        release: Latency::new(),
        cycles: 0,
        errors: 0,
        first_error: None,
    };
    while Instant::now() < end {
        let t0 = Instant::now();
        let granted = match b.acquire(s, lock, WAIT).await {
            Ok(Acquired::Granted { .. }) => true,
            Ok(Acquired::TimedOut) => false,
            Err(e) => {
                r.errors += 1;
                r.first_error.get_or_insert_with(|| format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let t1 = Instant::now();
        if !granted {
            r.errors += 1;
            r.first_error
                .get_or_insert_with(|| "own lock timed out".into());
            continue;
        }
        if let Err(e) = b.release(s, lock).await {
            r.errors += 1;
            r.first_error.get_or_insert_with(|| format!("{e:#}"));
            continue;
        }
        let t2 = Instant::now();
        r.acquire.record(t1 - t0);
        r.release.record(t2 - t1);
        r.cycles += 1;
        progress.add(1);
    }
    r
}
