//! `uncontended`: C clients, each with its own session and its own lock,
//! loop acquire → release as fast as they can (`closed_loop`, as `put`).
//! The unrecorded first cycle warms up connections and ZooKeeper's lock
//! directory.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::closed_loop::{self, Clients, Failure, Op};
use crate::backend::{Acquired, Backend};
use crate::procfs::CpuUsage;
use crate::stats::LatencySummary;

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

/// Acquires the client's own lock and releases it, timed apart.
struct Cycle;

impl<B: Backend> Op<B, 2> for Cycle {
    const NAME: &'static str = "uncontended";
    const UNIT: &'static str = "cycles";
    const KEY_PREFIX: &'static str = "u";

    async fn warm_up(&self, b: &B, s: &B::Session, lock: &str) -> anyhow::Result<()> {
        match b.acquire(s, lock, WAIT).await? {
            Acquired::Granted { .. } => b.release(s, lock).await,
            Acquired::TimedOut => Err(anyhow::anyhow!("{lock} is held by someone else")),
        }
    }

    async fn once(&self, b: &B, s: &B::Session, lock: &str) -> Result<[Duration; 2], Failure> {
        let t0 = Instant::now();
        match b.acquire(s, lock, WAIT).await {
            Ok(Acquired::Granted { .. }) => {}
            Ok(Acquired::TimedOut) => return Err(Failure::go_on("own lock timed out")),
            Err(e) => return Err(Failure::pause(e)),
        }
        let t1 = Instant::now();
        b.release(s, lock)
            .await
            .map_err(|e| Failure::go_on(format!("{e:#}")))?;
        Ok([t1 - t0, t1.elapsed()])
    }
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
    let c = Clients {
        pids,
        leader,
        members,
        clients,
        secs,
    };
    let m = closed_loop::run(b, &c, Cycle).await?;
    let [acquire, release] = m.latency;
    Ok(Uncontended {
        clients,
        pinned,
        run,
        secs: m.wall,
        cycles: m.ops,
        cycles_per_sec: m.ops as f64 / m.wall,
        acquire: acquire.summary(),
        release: release.summary(),
        errors: m.errors,
        first_error: m.first_error,
        server_cpu_us_per_cycle: m.cpu.per_op_us(m.ops),
        cpu: m.cpu,
    })
}
