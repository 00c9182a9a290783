//! `failover`: the contended clients run while the leader is killed with
//! SIGKILL. Measured from the grants' timestamps:
//! - time to first grant after the kill,
//! - the largest gap between consecutive grants (over the whole run after
//!   warm-up, so it includes the gap across the kill),
//! - time back to half rate: from the kill to the start of the first
//!   1-second window whose grant count is at least half the pre-kill rate.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::contended::{contender, merge, overlaps, Shared};
use super::{close_sessions, open_sessions, secs_since, Keepalive};
use crate::backend::Backend;
use crate::cluster::Cluster;
use crate::progress::{say, Progress};

/// Session TTL here: longer than any failover should take, short enough
/// that keepalives run during the phase.
const TTL: Duration = Duration::from_secs(15);
/// Grants before this are warm-up.
const WARMUP: Duration = Duration::from_secs(1);
/// Timeline bucket for the plot.
const BUCKET: f64 = 0.25;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Failover {
    pub clients: usize,
    pub secs: f64,
    pub kill_at_s: f64,
    pub killed_member: u32,
    pub new_leader_member: Option<u32>,
    /// Kill → the cluster names a new leader (as seen by polling it).
    pub new_leader_after_s: Option<f64>,
    pub pre_kill_grants_per_sec: f64,
    pub first_grant_after_kill_s: Option<f64>,
    pub largest_gap_s: f64,
    pub largest_gap_before_kill_s: f64,
    pub back_to_half_rate_s: Option<f64>,
    pub grants: u64,
    pub mutual_exclusion_violations: u64,
    pub token_regressions: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// `[seconds since start, grants per second]` per 250 ms.
    pub timeline: Vec<[f64; 2]>,
}

pub async fn run<B: Backend>(
    b: &B,
    cluster: &mut Cluster,
    clients: usize,
    secs: f64,
    kill_at: f64,
) -> anyhow::Result<Failover> {
    let members = cluster.members.len();
    let sessions = open_sessions(b, clients, TTL, |i| i % members, 64, "open").await?;
    let keepalive = Keepalive::start(b, sessions.clone(), TTL / 3);
    let lock = "failover".to_string();
    let progress = Progress::start(
        format!("{} failover n={clients}", b.system().name()),
        "grants",
    );
    let shared = Shared::new(progress.clone());
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
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

    tokio::time::sleep_until((start + Duration::from_secs_f64(kill_at)).into()).await;
    let leader = cluster.leader().await?;
    let killed_member = cluster.members[leader].id;
    let killed = Instant::now();
    cluster.kill9(leader).await;
    say(format!(
        "  killed the leader (member {killed_member}) with SIGKILL"
    ));
    let new_leader = cluster
        .wait_leader_change(leader, Duration::from_secs_f64((secs - kill_at).max(1.0)))
        .await;
    let new_leader_after = new_leader.map(|_| killed.elapsed().as_secs_f64());

    let mut logs = Vec::new();
    for t in tasks {
        logs.push(t.await?);
    }
    drop(progress);
    keepalive.stop().await;
    close_sessions(b, sessions, 64).await;

    let log = merge(logs);
    let times: Vec<f64> = log
        .grants
        .iter()
        .filter(|g| g.at <= end)
        .map(|g| secs_since(start, g.at))
        .collect();
    let kill_s = secs_since(start, killed);
    let m = metrics(&times, WARMUP.as_secs_f64(), kill_s, secs);
    Ok(Failover {
        clients,
        secs,
        kill_at_s: kill_s,
        killed_member,
        new_leader_member: new_leader.map(|i| cluster.members[i].id),
        new_leader_after_s: new_leader_after,
        pre_kill_grants_per_sec: m.pre_rate,
        first_grant_after_kill_s: m.first_after,
        largest_gap_s: m.largest_gap,
        largest_gap_before_kill_s: m.largest_gap_before,
        back_to_half_rate_s: m.back_to_half,
        grants: times.len() as u64,
        mutual_exclusion_violations: shared.violations() + overlaps(&log.grants),
        token_regressions: shared.token_regressions(),
        errors: log.errors,
        first_error: log.first_error,
        timeline: timeline(&times, secs),
    })
}

#[derive(Debug, Default, PartialEq)]
struct Metrics {
    pre_rate: f64,
    first_after: Option<f64>,
    largest_gap: f64,
    largest_gap_before: f64,
    back_to_half: Option<f64>,
}

/// `times`: sorted grant times in seconds since start.
fn metrics(times: &[f64], warmup: f64, kill: f64, end: f64) -> Metrics {
    let pre: Vec<f64> = times
        .iter()
        .copied()
        .filter(|&t| t >= warmup && t < kill)
        .collect();
    let pre_rate = pre.len() as f64 / (kill - warmup).max(1e-9);
    let after: Vec<f64> = times.iter().copied().filter(|&t| t >= kill).collect();
    let first_after = after.first().map(|t| t - kill);
    let steady: Vec<f64> = times.iter().copied().filter(|&t| t >= warmup).collect();
    let gaps = |v: &[f64]| v.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    // Including the silence from the last grant to the end of the run.
    let last = steady.last().copied().unwrap_or(warmup);
    let largest_gap = gaps(&steady).max(end - last);
    let half = 0.5 * pre_rate;
    let back_to_half = after.iter().enumerate().find_map(|(i, &t)| {
        let in_window = after[i..].iter().take_while(|&&u| u < t + 1.0).count();
        (t + 1.0 <= end && in_window as f64 >= half).then_some(t - kill)
    });
    Metrics {
        pre_rate,
        first_after,
        largest_gap,
        largest_gap_before: gaps(&pre),
        back_to_half,
    }
}

fn timeline(times: &[f64], secs: f64) -> Vec<[f64; 2]> {
    let n = (secs / BUCKET).ceil() as usize;
    let mut counts = vec![0u64; n.max(1)];
    for &t in times {
        let i = ((t / BUCKET) as usize).min(counts.len() - 1);
        counts[i] += 1;
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| [i as f64 * BUCKET, c as f64 / BUCKET])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_of_a_gap() {
        // 100/s until 5.0, nothing until 5.8, then 100/s again.
        let mut t: Vec<f64> = (0..500).map(|i| i as f64 * 0.01).collect();
        t.extend((0..500).map(|i| 5.8 + i as f64 * 0.01));
        let m = metrics(&t, 1.0, 5.0, 10.8);
        assert!((m.pre_rate - 100.0).abs() < 1.0);
        assert!((m.first_after.unwrap_or(0.0) - 0.8).abs() < 1e-9);
        assert!((m.largest_gap - 0.81).abs() < 1e-6);
        assert!((m.back_to_half.unwrap_or(0.0) - 0.8).abs() < 1e-9);
        assert!(m.largest_gap_before < 0.011);
    }

    #[test]
    fn silence_after_a_last_grant_counts() {
        let mut t: Vec<f64> = (0..500).map(|i| i as f64 * 0.01).collect();
        t.push(5.001);
        let m = metrics(&t, 1.0, 5.0, 10.0);
        assert!(m.largest_gap > 4.9, "{}", m.largest_gap);
    }

    #[test]
    fn no_grant_after_kill() {
        let t: Vec<f64> = (0..500).map(|i| i as f64 * 0.01).collect();
        let m = metrics(&t, 1.0, 5.0, 10.0);
        assert_eq!(m.first_after, None);
        assert!(m.largest_gap > 5.0);
        assert_eq!(m.back_to_half, None);
    }
}
