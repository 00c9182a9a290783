//! `herd`: one holder and W waiters queued on one lock. Each round the
//! holder releases; the next waiter's grant is timed from the moment the
//! release was sent; the old holder queues again at the back (so the queue stays at
//! W waiters). Server CPU (all members) over the rounds, minus the idle
//! CPU with the waiters parked, divided by the rounds = the CPU one
//! release costs with W waiters (each round: a release, a grant, and a
//! re-queue). A thundering herd would make it grow with W.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::{close_sessions, open_sessions, TTL};
use crate::backend::{Acquired, Backend};
use crate::procfs::{CpuSample, CpuUsage};
use crate::progress::say;
use crate::stats::{Latency, LatencySummary};

/// A waiter's long poll; re-issued when it passes.
const WAIT: Duration = Duration::from_secs(60);
/// After each handoff, time for the old holder to queue again.
const SETTLE: Duration = Duration::from_millis(100);
/// Idle baseline with the waiters parked, measured before and after the
/// rounds (a Go or JVM server's idle CPU with 1,000 parked waiters is
/// bursty: GC).
const IDLE: Duration = Duration::from_secs(3);
/// Above this many waiters, sessions get [`LONG_TTL`].
const LONG_HERD: usize = 10_000;
const LONG_TTL: Duration = Duration::from_secs(600);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Herd {
    pub waiters: usize,
    pub rounds: usize,
    pub setup_secs: f64,
    /// Release sent → next holder's acquire answered (the release's own
    /// answer and the grant come from the same commit, so this one
    /// includes the commit).
    pub handoff: LatencySummary,
    /// Server CPU per round, net of idle, in milliseconds.
    pub server_cpu_ms_per_release: f64,
    /// Server CPU per round before subtracting idle.
    pub server_cpu_ms_per_release_gross: f64,
    /// Idle server CPU (waiters parked), percent of one core, mean of the
    /// windows before and after the rounds.
    pub idle_cpu_pct: f64,
    pub rounds_cpu: CpuUsage,
    pub idle_cpu: CpuUsage,
}

impl Herd {
    /// Server CPU per release net of idle, in milliseconds; `None` when
    /// the idle baseline exceeded what the rounds used (a server whose idle
    /// CPU is bursty, GC with parked waiters): the difference then says
    /// nothing about the release, and only the gross figure stands.
    pub fn net_cpu_ms_per_release(&self) -> Option<f64> {
        (self.server_cpu_ms_per_release >= 0.0).then_some(self.server_cpu_ms_per_release)
    }
}

/// The coordinator's word to the current holder; the answer is when the
/// release was sent.
type Release = oneshot::Sender<anyhow::Result<Instant>>;

pub async fn run<B: Backend>(
    b: &B,
    pids: &[u32],
    members: usize,
    waiters: usize,
    rounds: usize,
) -> anyhow::Result<Herd> {
    let t0 = Instant::now();
    let n = waiters + 1;
    let name = b.system().name();
    // Opening 100,000 sessions takes longer than the latency workloads'
    // TTL, and nothing keeps a session alive until its waiter queues.
    let ttl = if waiters > LONG_HERD { LONG_TTL } else { TTL };
    let sessions =
        open_sessions(b, n, ttl, |i| i % members, 64, &format!("{name} herd open")).await?;
    let lock = format!("herd{waiters}");
    let stop = Arc::new(AtomicBool::new(false));
    let (granted_tx, mut granted) = mpsc::unbounded_channel::<(usize, Instant)>();
    let mut orders = Vec::with_capacity(n);
    let mut tasks = Vec::with_capacity(n);
    for (i, s) in sessions.iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel::<Release>();
        orders.push(tx);
        tasks.push(tokio::spawn(waiter(
            b.clone(),
            s.clone(),
            lock.clone(),
            i,
            rx,
            granted_tx.clone(),
            stop.clone(),
        )));
        if i == 0 {
            // The first client holds before anyone queues.
            let (who, _) = tokio::time::timeout(Duration::from_secs(30), granted.recv())
                .await
                .map_err(|_| anyhow!("the first holder was not granted"))?
                .ok_or_else(|| anyhow!("holder task ended"))?;
            if who != 0 {
                bail!("unexpected first holder {who}");
            }
        }
    }
    let result = measure(b, pids, &lock, n, rounds, &orders, &mut granted, t0).await;
    stop.store(true, Ordering::Relaxed);
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    close_sessions(b, sessions, 64).await;
    result.map(|mut h| {
        h.waiters = waiters;
        h
    })
}

#[allow(clippy::too_many_arguments)]
async fn measure<B: Backend>(
    b: &B,
    pids: &[u32],
    lock: &str,
    n: usize,
    rounds: usize,
    orders: &[mpsc::UnboundedSender<Release>],
    granted: &mut mpsc::UnboundedReceiver<(usize, Instant)>,
    t0: Instant,
) -> anyhow::Result<Herd> {
    // Everyone queued? (100,000 waiters take minutes.)
    let wait = Duration::from_secs(180).max(Duration::from_millis(n as u64 * 6));
    let deadline = Instant::now() + wait;
    loop {
        let queued = b.queue_len(lock).await?;
        if queued >= n {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "only {queued} of {n} queued on {lock} after {:.0} s",
                wait.as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let setup_secs = t0.elapsed().as_secs_f64();
    say(format!(
        "  {}: {} waiters queued on {lock} in {setup_secs:.1} s",
        b.system().name(),
        n - 1
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle0 = CpuSample::take(pids);
    tokio::time::sleep(IDLE).await;
    let idle_cpu = idle0.until(&CpuSample::take(pids));

    let mut handoff = Latency::new();
    let mut holder = 0usize;
    let cpu0 = CpuSample::take(pids);
    for _ in 0..rounds {
        let (tx, rx) = oneshot::channel();
        orders[holder]
            .send(tx)
            .map_err(|_| anyhow!("holder {holder} is gone"))?;
        let sent = rx
            .await
            .map_err(|_| anyhow!("holder {holder} did not answer"))??;
        let (next, at) = tokio::time::timeout(Duration::from_secs(30), granted.recv())
            .await
            .map_err(|_| anyhow!("no grant within 30 s of a release"))?
            .ok_or_else(|| anyhow!("waiters ended"))?;
        handoff.record(at.saturating_duration_since(sent));
        holder = next;
        tokio::time::sleep(SETTLE).await;
    }
    let rounds_cpu = cpu0.until(&CpuSample::take(pids));
    let idle1 = CpuSample::take(pids);
    tokio::time::sleep(IDLE).await;
    let idle_after = idle1.until(&CpuSample::take(pids));
    let rate = |c: &CpuUsage| c.servers_s / c.wall_s.max(1e-9);
    let idle_rate = (rate(&idle_cpu) + rate(&idle_after)) / 2.0;
    let net = rounds_cpu.servers_s - idle_rate * rounds_cpu.wall_s;
    Ok(Herd {
        waiters: n - 1,
        rounds,
        setup_secs,
        handoff: handoff.summary(),
        server_cpu_ms_per_release: net * 1000.0 / rounds.max(1) as f64,
        server_cpu_ms_per_release_gross: rounds_cpu.servers_s * 1000.0 / rounds.max(1) as f64,
        idle_cpu_pct: 100.0 * idle_rate,
        rounds_cpu,
        idle_cpu,
    })
}

/// Queues on the lock; when granted, reports it and waits for the order
/// to release; after releasing, queues again (until stopped).
async fn waiter<B: Backend>(
    b: B,
    s: Arc<B::Session>,
    lock: String,
    id: usize,
    mut orders: mpsc::UnboundedReceiver<Release>,
    granted: mpsc::UnboundedSender<(usize, Instant)>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match b.acquire(&s, &lock, WAIT).await {
            Ok(Acquired::Granted { .. }) => {}
            Ok(Acquired::TimedOut) => continue,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        }
        if granted.send((id, Instant::now())).is_err() {
            return;
        }
        let Some(reply) = orders.recv().await else {
            return;
        };
        let sent = Instant::now();
        let r = b.release(&s, &lock).await.map(|()| sent);
        let _ = reply.send(r);
    }
}
