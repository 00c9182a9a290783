//! `sessions`: N sessions, each holding one lock of its own, kept alive.
//! - Memory: VmRSS of every member before opening them and after they
//!   have all been held and kept alive for a while; per session = the
//!   growth divided by N, per member (every member holds all the state).
//! - Keepalive cost: server CPU (utime+stime of all members) over a window
//!   while only keepalives run, minus the idle cluster's CPU for the same
//!   time, divided by the keepalives the servers received. raftlock and
//!   etcd get one keepalive per session per period (TTL/3); ZooKeeper's
//!   client library pings by itself and the servers' packet counters say
//!   how many pings arrived.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{close_sessions, open_sessions, Keepalive};
use crate::backend::{Acquired, Backend};
use crate::cluster::Cluster;
use crate::procfs::{rss_each, CpuSample, CpuUsage};
use crate::progress::{say, Progress};

/// Idle-CPU baseline window.
const IDLE: Duration = Duration::from_secs(5);
/// Keepalives run this long before the measured window starts.
const RAMP: Duration = Duration::from_secs(3);
/// Keepalive rate the bench aims at, at most (it shares the machine).
const MAX_KEEPALIVES_PER_SEC: f64 = 2000.0;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sessions {
    pub sessions: usize,
    pub ttl_s: f64,
    pub keepalive_period_s: f64,
    pub setup_secs: f64,
    pub rss_before: Vec<u64>,
    pub rss_after: Vec<u64>,
    /// Mean over members of (after − before) / sessions.
    pub rss_per_session_bytes: f64,
    /// The member that grew most, per session.
    pub rss_per_session_max_member_bytes: f64,
    pub idle_cpu: CpuUsage,
    pub window_cpu: CpuUsage,
    pub keepalives: u64,
    pub keepalives_per_sec: f64,
    /// ZooKeeper: counted from the servers' packet counters.
    pub keepalives_counted_by_server: bool,
    /// (window CPU − idle CPU rate × window) / keepalives, all members.
    pub server_cpu_us_per_keepalive: f64,
    /// Window CPU of all members, percent of one core.
    pub server_cpu_pct: f64,
    pub idle_cpu_pct: f64,
    pub errors: u64,
    pub first_error: Option<String>,
}

pub async fn run<B: Backend>(
    b: &B,
    cluster: &Cluster,
    n: usize,
    window: f64,
    concurrency: usize,
) -> anyhow::Result<Sessions> {
    let pids = cluster.pids();
    let members = cluster.members.len();
    // Keepalive period: TTL/3 with TTL 30 s, longer if that would exceed
    // what one load generator on a shared 2-core machine should send.
    let period = Duration::from_secs_f64((n as f64 / MAX_KEEPALIVES_PER_SEC).max(10.0));
    let ttl = period * 3;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before = rss_each(&pids);
    let idle0 = CpuSample::take(&pids);
    tokio::time::sleep(IDLE).await;
    let idle_cpu = idle0.until(&CpuSample::take(&pids));

    let t0 = Instant::now();
    let name = b.system().name();
    let sessions = open_sessions(
        b,
        n,
        ttl,
        |i| i % members,
        concurrency,
        &format!("{name} open {n}"),
    )
    .await?;
    let keepalive = Keepalive::start(b, sessions.clone(), period);
    let progress = Progress::start(format!("{name} hold {n}"), "locks");
    let held: Vec<anyhow::Result<Acquired>> = futures::stream::iter(sessions.iter().enumerate())
        .map(|(i, s)| {
            let progress = progress.clone();
            async move {
                let r = b
                    .acquire(s, &format!("s{n}-{i}"), Duration::from_secs(30))
                    .await;
                progress.add(1);
                r
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    drop(progress);
    let mut errors = 0;
    let mut first_error = None;
    for r in held {
        match r {
            Ok(Acquired::Granted { .. }) => {}
            Ok(Acquired::TimedOut) => {
                errors += 1;
                first_error.get_or_insert_with(|| "a fresh lock timed out".to_string());
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }
    let setup_secs = t0.elapsed().as_secs_f64();

    say(format!(
        "  {name}: {n} sessions hold a lock each; measuring keepalives for {window:.0} s"
    ));
    tokio::time::sleep(RAMP).await;
    let sent0 = keepalive.sent.load(std::sync::atomic::Ordering::Relaxed);
    let packets0 = cluster.packets_received().await;
    let w0 = CpuSample::take(&pids);
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let window_cpu = w0.until(&CpuSample::take(&pids));
    let packets1 = cluster.packets_received().await;
    let sent1 = keepalive.sent.load(std::sync::atomic::Ordering::Relaxed);
    let rss_after = rss_each(&pids);
    errors += keepalive.errors.load(std::sync::atomic::Ordering::Relaxed);
    keepalive.stop().await;

    let (keepalives, by_server) = match (b.self_keepalive(), packets0, packets1) {
        (true, Some(a), Some(z)) => (z.saturating_sub(a), true),
        _ => (sent1 - sent0, false),
    };
    let idle_rate = idle_cpu.servers_s / idle_cpu.wall_s.max(1e-9);
    let net = window_cpu.servers_s - idle_rate * window_cpu.wall_s;
    let growth: Vec<f64> = rss_before
        .iter()
        .zip(&rss_after)
        .map(|(a, z)| (*z as f64 - *a as f64) / n as f64)
        .collect();
    let result = Sessions {
        sessions: n,
        ttl_s: ttl.as_secs_f64(),
        keepalive_period_s: period.as_secs_f64(),
        setup_secs,
        rss_per_session_bytes: growth.iter().sum::<f64>() / growth.len().max(1) as f64,
        rss_per_session_max_member_bytes: growth.iter().copied().fold(f64::MIN, f64::max),
        rss_before,
        rss_after,
        keepalives,
        keepalives_per_sec: keepalives as f64 / window_cpu.wall_s.max(1e-9),
        keepalives_counted_by_server: by_server,
        server_cpu_us_per_keepalive: if keepalives > 0 {
            net.max(0.0) * 1e6 / keepalives as f64
        } else {
            0.0
        },
        server_cpu_pct: 100.0 * window_cpu.servers_s / window_cpu.wall_s.max(1e-9),
        idle_cpu_pct: 100.0 * idle_rate,
        idle_cpu,
        window_cpu,
        errors,
        first_error,
    };
    let closing = Progress::start(format!("{name} close {n}"), "sessions");
    close_sessions(b, sessions, concurrency).await;
    closing.add(n as u64);
    Ok(result)
}
