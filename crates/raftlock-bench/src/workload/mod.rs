//! The workloads, each in its own module, all generic over `Backend` so
//! the three systems run exactly the same client code; and the helpers
//! they share (opening many sessions, keeping them alive).

pub mod closed_loop;
pub mod contended;
pub mod failover;
pub mod herd;
pub mod put;
pub mod restart;
pub mod sessions;
pub mod uncontended;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::pin::PinMode;
use crate::progress::Progress;

/// Session TTL for the latency workloads (etcd lease TTL, ZooKeeper
/// session timeout): long enough that nothing expires during a phase.
pub const TTL: Duration = Duration::from_secs(30);

/// Every knob of a run; the defaults are the full run (see bench/compare.sh).
#[derive(Clone, Debug, Serialize, Deserialize, clap::Args)]
#[serde(default = "Params::serde_default")]
pub struct Params {
    /// Repetitions of the latency workloads (uncontended, put, contended),
    /// each on a fresh cluster; the report gives the median and the spread.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Run the latency workloads unpinned (off), with all members on CPU 0
    /// and the load generator on CPU 1 (on), or both, side by side.
    #[arg(long, value_enum, default_value = "both", num_args = 0..=1, default_missing_value = "both")]
    pub pin: PinMode,
    /// Seconds per uncontended measurement (per client count).
    #[arg(long, default_value_t = 5.0)]
    pub uncontended_secs: f64,
    /// Client counts for the uncontended workload.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    pub clients: Vec<usize>,
    /// Client counts for the put workload.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    pub put_clients: Vec<usize>,
    /// Seconds per put measurement (per client count).
    #[arg(long, default_value_t = 5.0)]
    pub put_secs: f64,
    /// Clients contending for one lock (contended and failover).
    #[arg(long, default_value_t = 16)]
    pub contended_clients: usize,
    /// Seconds of the contended workload.
    #[arg(long, default_value_t = 8.0)]
    pub contended_secs: f64,
    /// Seconds of the failover workload, and when in it the leader is killed.
    #[arg(long, default_value_t = 16.0)]
    pub failover_secs: f64,
    #[arg(long, default_value_t = 5.0)]
    pub failover_kill_at_secs: f64,
    /// Session counts for the sessions workload (each holds one lock).
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    pub sessions: Vec<usize>,
    /// Seconds over which keepalive CPU is measured.
    #[arg(long, default_value_t = 15.0)]
    pub sessions_window_secs: f64,
    /// Waiter counts for the herd workload.
    #[arg(long, value_delimiter = ',', default_value = "1,1000")]
    pub herd_waiters: Vec<usize>,
    /// Releases measured per herd case.
    #[arg(long, default_value_t = 40)]
    pub herd_rounds: usize,
    /// Lock nodes loaded before the restart measurement (1000000 for the full one).
    #[arg(long, default_value_t = 50_000)]
    pub restart_nodes: usize,
    /// Concurrent session counts for the scale workload (the uncontended
    /// loop, one run, unpinned, on the first latency cluster; counts the
    /// uncontended workload measured there are its rows).
    #[arg(long, value_delimiter = ',', default_value = "1,64,512,4096")]
    pub scale_sessions: Vec<usize>,
    /// Seconds per scale measurement the uncontended rows do not give
    /// (longer than theirs: at 4,096 sessions one cycle can take seconds).
    #[arg(long, default_value_t = 10.0)]
    pub scale_secs: f64,
    /// Runs of the latency workloads for the door systems (raftlock-zk,
    /// raftlock-etcd); they run no sessions, failover, restart or herd,
    /// which measure the replicated core the `raftlock` rows cover.
    #[arg(long, default_value_t = 3)]
    pub door_runs: usize,
    /// Pinning of the door systems' latency runs (as `--pin`).
    #[arg(long, value_enum, default_value = "off")]
    pub door_pin: PinMode,
    /// Requests in flight while setting up sessions and locks.
    #[arg(long, default_value_t = 64)]
    pub setup_concurrency: usize,
}

impl Params {
    /// The defaults, as the command line gives them (also for fields
    /// missing from an older results.json).
    pub fn parse_defaults() -> Params {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            p: Params,
        }
        <P as clap::Parser>::parse_from(["p"]).p
    }

    fn serde_default() -> Params {
        Self::parse_defaults()
    }
}

/// Opens `n` sessions, `member_of(i)` first for session i, at most
/// `concurrency` at a time, in order.
pub async fn open_sessions<B: Backend>(
    b: &B,
    n: usize,
    ttl: Duration,
    member_of: impl Fn(usize) -> usize,
    concurrency: usize,
    label: &str,
) -> anyhow::Result<Vec<Arc<B::Session>>> {
    let progress = (n >= 1000).then(|| Progress::start(label.to_string(), "sessions"));
    let opens = futures::stream::iter(0..n)
        .map(|i| {
            let member = member_of(i);
            let progress = progress.clone();
            async move {
                let s = b.open(member, ttl).await;
                if let Some(p) = &progress {
                    p.add(1);
                }
                s
            }
        })
        .buffered(concurrency.max(1));
    let all: Vec<anyhow::Result<B::Session>> = opens.collect().await;
    all.into_iter()
        .map(|r| r.map(Arc::new))
        .collect::<anyhow::Result<Vec<_>>>()
}

/// Closes sessions nobody else holds any more.
pub async fn close_sessions<B: Backend>(b: &B, sessions: Vec<Arc<B::Session>>, concurrency: usize) {
    futures::stream::iter(sessions)
        .for_each_concurrent(concurrency.max(1), |s| async move {
            if let Ok(s) = Arc::try_unwrap(s) {
                let _ = tokio::time::timeout(Duration::from_secs(10), b.close(s)).await;
            }
        })
        .await;
}

/// Keeps sessions alive: one keepalive per session per `period`, spread
/// evenly, at most 128 in flight; stops when dropped or `stop()`ped.
pub struct Keepalive {
    stop: Arc<AtomicBool>,
    pub sent: Arc<AtomicU64>,
    pub errors: Arc<AtomicU64>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Keepalive {
    pub fn start<B: Backend>(b: &B, sessions: Vec<Arc<B::Session>>, period: Duration) -> Keepalive {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let task = (!b.self_keepalive() && !sessions.is_empty()).then(|| {
            tokio::spawn(keep(
                b.clone(),
                sessions,
                period,
                stop.clone(),
                sent.clone(),
                errors.clone(),
            ))
        });
        Keepalive {
            stop,
            sent,
            errors,
            task,
        }
    }

    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(20), t).await;
        }
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn keep<B: Backend>(
    b: B,
    sessions: Vec<Arc<B::Session>>,
    period: Duration,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
) {
    const TICK: Duration = Duration::from_millis(10);
    let per_tick = ((sessions.len() as f64) * TICK.as_secs_f64() / period.as_secs_f64()).max(0.0);
    let limit = Arc::new(tokio::sync::Semaphore::new(128));
    let mut owed = 0.0f64;
    let mut next = 0usize;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            owed -= 1.0;
            let s = sessions[next % sessions.len()].clone();
            next += 1;
            let Ok(permit) = limit.clone().acquire_owned().await else {
                return;
            };
            let (b, sent, errors) = (b.clone(), sent.clone(), errors.clone());
            tokio::spawn(async move {
                match b.keepalive(&s).await {
                    Ok(()) => sent.fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
                drop(permit);
            });
        }
    }
    // Let the last ones finish (bounded by their own timeouts).
    let _ = limit.acquire_many(128).await;
}

/// Seconds since `t0` as f64.
pub fn secs_since(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64()
}
