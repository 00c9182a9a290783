//! `contended`: N clients (own sessions, spread over the members) loop
//! acquire → release on one lock. Grants per second; handoff latency =
//! the next holder's acquire returning minus the previous holder's release
//! returning (clamped at zero: both answers come from the same commit, so
//! the grant may arrive first; how often is reported). Mutual exclusion is
//! checked client-side twice: live (a grant while another client believes
//! it holds the lock) and afterwards (a grant that returned before the
//! previous holder even sent its release); fencing tokens must increase.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{close_sessions, open_sessions, TTL};
use crate::backend::{Acquired, Backend};
use crate::procfs::{CpuSample, CpuUsage};
use crate::progress::Progress;
use crate::stats::{Latency, LatencySummary};

/// Long-poll wait per acquire; a timeout just loops.
pub const WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Contended {
    pub clients: usize,
    pub pinned: bool,
    /// Which repetition (0-based) of the measurement this is.
    pub run: usize,
    pub secs: f64,
    pub grants: u64,
    pub grants_per_sec: f64,
    pub handoff: LatencySummary,
    /// Handoffs where the grant arrived before the release's answer.
    pub grant_before_release_answer: u64,
    pub acquire: LatencySummary,
    pub mutual_exclusion_violations: u64,
    pub token_regressions: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// All members' CPU time per grant (acquire + release), in microseconds.
    pub server_cpu_us_per_grant: f64,
    pub cpu: CpuUsage,
}

/// State the contenders share: who holds the lock, what went wrong.
pub struct Shared {
    /// 0 = nobody; client i holds as i + 1.
    holder: AtomicUsize,
    violations: AtomicU64,
    last_token: AtomicU64,
    token_regressions: AtomicU64,
    progress: Arc<Progress>,
}

impl Shared {
    pub fn new(progress: Arc<Progress>) -> Arc<Shared> {
        Arc::new(Shared {
            holder: AtomicUsize::new(0),
            violations: AtomicU64::new(0),
            last_token: AtomicU64::new(0),
            token_regressions: AtomicU64::new(0),
            progress,
        })
    }
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }
    pub fn token_regressions(&self) -> u64 {
        self.token_regressions.load(Ordering::Relaxed)
    }
}

/// One grant: when the acquire returned, how long it took, and when the
/// holder's release returned.
#[derive(Clone, Copy)]
pub struct Grant {
    pub at: Instant,
    pub waited: Duration,
    pub release_sent: Instant,
    pub released: Option<Instant>,
}

#[derive(Default)]
pub struct Log {
    pub grants: Vec<Grant>,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Log {
    fn error(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }
}

/// One contender until `end` (it finishes the cycle it is in).
pub async fn contender<B: Backend>(
    b: B,
    s: Arc<B::Session>,
    lock: String,
    id: usize,
    end: Instant,
    shared: Arc<Shared>,
) -> Log {
    let mut log = Log::default();
    while Instant::now() < end {
        let t0 = Instant::now();
        let token = match b.acquire(&s, &lock, WAIT).await {
            Ok(Acquired::Granted { token }) => token,
            Ok(Acquired::TimedOut) => continue,
            Err(e) => {
                log.error(format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let at = Instant::now();
        if shared
            .holder
            .compare_exchange(0, id + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            shared.violations.fetch_add(1, Ordering::Relaxed);
            shared.holder.store(id + 1, Ordering::SeqCst);
        }
        if let Some(t) = token {
            // Stored +1 so a first token of 0 (ZooKeeper's first sequence) counts.
            if shared.last_token.fetch_max(t + 1, Ordering::SeqCst) > t {
                shared.token_regressions.fetch_add(1, Ordering::Relaxed);
            }
        }
        shared.progress.add(1);
        // Clear before releasing: from here on another grant is legitimate.
        let _ = shared
            .holder
            .compare_exchange(id + 1, 0, Ordering::SeqCst, Ordering::SeqCst);
        let release_sent = Instant::now();
        let released = match b.release(&s, &lock).await {
            Ok(()) => Some(Instant::now()),
            Err(e) => {
                log.error(format!("{e:#}"));
                None
            }
        };
        log.grants.push(Grant {
            at,
            waited: at - t0,
            release_sent,
            released,
        });
    }
    log
}

/// All contenders' grants in grant order, with errors summed.
pub fn merge(logs: Vec<Log>) -> Log {
    let mut all = Log::default();
    for l in logs {
        all.grants.extend(l.grants);
        all.errors += l.errors;
        if all.first_error.is_none() {
            all.first_error = l.first_error;
        }
    }
    all.grants.sort_by_key(|g| g.at);
    all
}

/// Grants that returned before the previous holder sent its release.
pub fn overlaps(grants: &[Grant]) -> u64 {
    grants
        .windows(2)
        .filter(|w| w[1].at < w[0].release_sent)
        .count() as u64
}

/// Handoff latencies between consecutive grants (and how many were
/// negative, i.e. clamped).
pub fn handoffs(grants: &[Grant]) -> (Latency, u64) {
    let mut h = Latency::new();
    let mut early = 0;
    for w in grants.windows(2) {
        if let Some(rel) = w[0].released {
            if w[1].at >= rel {
                h.record(w[1].at - rel);
            } else {
                early += 1;
                h.record(Duration::ZERO);
            }
        }
    }
    (h, early)
}

pub async fn run<B: Backend>(
    b: &B,
    pids: &[u32],
    members: usize,
    clients: usize,
    secs: f64,
    pinned: bool,
    run: usize,
) -> anyhow::Result<Contended> {
    let sessions = open_sessions(b, clients, TTL, |i| i % members, 64, "open").await?;
    let lock = "contended".to_string();
    let progress = Progress::start(
        format!("{} contended n={clients}", b.system().name()),
        "grants",
    );
    let shared = Shared::new(progress.clone());
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let cpu0 = CpuSample::take(pids);
    let tasks: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            tokio::spawn(contender(
                b.clone(),
                s.clone(),
                lock.clone(),
                i,
                end,
                shared.clone(),
            ))
        })
        .collect();
    let mut logs = Vec::new();
    for t in tasks {
        logs.push(t.await?);
    }
    let cpu = cpu0.until(&CpuSample::take(pids));
    drop(progress);
    let log = merge(logs);
    let grants: Vec<Grant> = log.grants.iter().copied().filter(|g| g.at <= end).collect();
    let (handoff, early) = handoffs(&grants);
    let mut acquire = Latency::new();
    for g in &grants {
        acquire.record(g.waited);
    }
    close_sessions(b, sessions, 64).await;
    Ok(Contended {
        clients,
        pinned,
        run,
        secs,
        grants: grants.len() as u64,
        grants_per_sec: grants.len() as f64 / secs,
        handoff: handoff.summary(),
        grant_before_release_answer: early,
        acquire: acquire.summary(),
        mutual_exclusion_violations: shared.violations() + overlaps(&grants),
        token_regressions: shared.token_regressions(),
        errors: log.errors,
        first_error: log.first_error,
        server_cpu_us_per_grant: cpu.per_op_us(log.grants.len() as u64),
        cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_pairs_consecutive_grants() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        let g = |at, sent, rel: Option<u64>| Grant {
            at: ms(at),
            waited: Duration::ZERO,
            release_sent: ms(sent),
            released: rel.map(ms),
        };
        let grants = [g(0, 1, Some(5)), g(7, 8, Some(10)), g(9, 9, None)];
        let (h, early) = handoffs(&grants);
        assert_eq!(h.len(), 2);
        assert_eq!(early, 1);
        assert!((h.summary().max_ms - 2.0).abs() < 0.01);
        assert_eq!(overlaps(&grants), 0);
        let bad = [g(0, 5, Some(6)), g(3, 7, Some(8))];
        assert_eq!(overlaps(&bad), 1);
    }
}
