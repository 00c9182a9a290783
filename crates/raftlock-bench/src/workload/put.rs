//! `put`: C clients, each with its own session and its own key (node),
//! write a small value in a loop as fast as they can: the generic write
//! path without the lock recipe (raftlock `PUT /v1/nodes/…`, etcd `Put`,
//! ZooKeeper `setData`). The loop is `closed_loop`'s, as `uncontended`'s;
//! the unrecorded first put may create the node.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::closed_loop::{self, Clients, Failure, Op};
use crate::backend::Backend;
use crate::procfs::CpuUsage;
use crate::stats::LatencySummary;

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

/// Writes the same value to the client's key.
struct PutValue {
    value: Vec<u8>,
}

impl<B: Backend> Op<B, 1> for PutValue {
    const NAME: &'static str = "put";
    const UNIT: &'static str = "puts";
    const KEY_PREFIX: &'static str = "p";

    async fn warm_up(&self, b: &B, s: &B::Session, key: &str) -> anyhow::Result<()> {
        b.put(s, key, &self.value).await
    }

    async fn once(&self, b: &B, s: &B::Session, key: &str) -> Result<[Duration; 1], Failure> {
        let t0 = Instant::now();
        b.put(s, key, &self.value).await.map_err(Failure::pause)?;
        Ok([t0.elapsed()])
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
) -> anyhow::Result<Put> {
    let c = Clients {
        pids,
        leader,
        members,
        clients,
        secs,
    };
    let value = vec![b'v'; VALUE_BYTES];
    let m = closed_loop::run(b, &c, PutValue { value }).await?;
    let [latency] = m.latency;
    Ok(Put {
        clients,
        pinned,
        run,
        secs: m.wall,
        puts: m.ops,
        puts_per_sec: m.ops as f64 / m.wall,
        latency: latency.summary(),
        server_cpu_us_per_put: m.cpu.per_op_us(m.ops),
        errors: m.errors,
        first_error: m.first_error,
        cpu: m.cpu,
    })
}
