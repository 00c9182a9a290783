//! The closed loop that `uncontended` and `put` share: C clients, each
//! with its own session and its own key, repeat one operation as fast as
//! they can for a fixed time. Client i talks to member (leader + i) mod 3,
//! so one client talks to the leader and many spread evenly, the same for
//! every system. Each client first does one unrecorded warm-up operation
//! (connections; ZooKeeper's lock directory; a put that may create the
//! node). Only the operation differs between the workloads ([`Op`]).

use std::future::Future;

use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{close_sessions, open_sessions, TTL};
use crate::backend::Backend;
use crate::procfs::{CpuSample, CpuUsage};
use crate::progress::Progress;
use crate::stats::Latency;

/// Pause after an operation the system refused, so a failing client does
/// not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

/// One workload's operation, timed in `N` parts (acquire and release: 2;
/// a put: 1).
pub trait Op<B: Backend, const N: usize>: Send + Sync + 'static {
    /// The workload's name in the progress line.
    const NAME: &'static str;
    /// What one operation is called in the progress line.
    const UNIT: &'static str;
    /// Client i of C uses the key `{KEY_PREFIX}{C}-{i}`.
    const KEY_PREFIX: &'static str;

    /// The unrecorded first operation; an error ends the whole run.
    fn warm_up(
        &self,
        b: &B,
        s: &B::Session,
        key: &str,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// One operation: each part's latency, or why it failed.
    fn once(
        &self,
        b: &B,
        s: &B::Session,
        key: &str,
    ) -> impl Future<Output = Result<[Duration; N], Failure>> + Send;
}

/// A failed operation: counted as an error, the first one's text kept.
pub struct Failure {
    pub error: String,
    /// Pause for [`ERROR_PAUSE`] before the next operation.
    pub pause: bool,
}

impl Failure {
    /// The system answered with an error: pause before trying again.
    pub fn pause(e: anyhow::Error) -> Failure {
        Failure {
            error: format!("{e:#}"),
            pause: true,
        }
    }

    /// Go on at once (the next operation starts from a clean state).
    pub fn go_on(error: impl Into<String>) -> Failure {
        Failure {
            error: error.into(),
            pause: false,
        }
    }
}

/// Who runs the loop, and for how long.
pub struct Clients<'a> {
    /// The members' processes, whose CPU is measured.
    pub pids: &'a [u32],
    pub leader: usize,
    pub members: usize,
    pub clients: usize,
    pub secs: f64,
}

/// What all clients did in the measured time.
pub struct Measured<const N: usize> {
    /// Each part's latencies, all clients merged.
    pub latency: [Latency; N],
    /// Operations that succeeded.
    pub ops: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// All members' CPU over the measured time.
    pub cpu: CpuUsage,
    /// The measured time, in seconds.
    pub wall: f64,
}

/// Opens a session per client, warms each up, runs `op` in a loop on every
/// client for `c.secs`, then closes the sessions.
pub async fn run<B: Backend, O: Op<B, N>, const N: usize>(
    b: &B,
    c: &Clients<'_>,
    op: O,
) -> anyhow::Result<Measured<N>> {
    let (leader, members, clients) = (c.leader, c.members, c.clients);
    let sessions = open_sessions(b, clients, TTL, |i| (leader + i) % members, 64, "open").await?;
    let keys: Vec<String> = (0..clients)
        .map(|i| format!("{}{clients}-{i}", O::KEY_PREFIX))
        .collect();
    // Unrecorded, all at once: so a pooled HTTP client holds as many
    // connections as it has clients before the measurement (4,096 new
    // connections inside it would be measured as lock latency), and 4,096
    // sessions warm up in a fraction of their TTL.
    let warm = futures::stream::iter(sessions.iter().zip(&keys))
        .map(|(s, key)| op.warm_up(b, s, key))
        .buffer_unordered(clients.max(1));
    let warmed: Vec<anyhow::Result<()>> = warm.collect().await;
    warmed.into_iter().collect::<anyhow::Result<()>>()?;
    let progress = Progress::start(
        format!("{} {} c={clients}", b.system().name(), O::NAME),
        O::UNIT,
    );
    let op = Arc::new(op);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(c.secs);
    let cpu0 = CpuSample::take(c.pids);
    let tasks: Vec<_> = sessions
        .iter()
        .zip(&keys)
        .map(|(s, key)| {
            let (b, s, key, op, progress) = (
                b.clone(),
                s.clone(),
                key.clone(),
                op.clone(),
                progress.clone(),
            );
            tokio::spawn(async move { client(&b, &s, &key, &*op, end, &progress).await })
        })
        .collect();
    let mut total = ClientResult::new();
    for t in tasks {
        let r = t.await?;
        for (all, one) in total.latency.iter_mut().zip(&r.latency) {
            all.merge(one);
        }
        total.ops += r.ops;
        total.errors += r.errors;
        total.first_error = total.first_error.or(r.first_error);
    }
    let cpu = cpu0.until(&CpuSample::take(c.pids));
    let wall = start.elapsed().as_secs_f64();
    drop(progress);
    close_sessions(b, sessions, 64).await;
    Ok(Measured {
        latency: total.latency,
        ops: total.ops,
        errors: total.errors,
        first_error: total.first_error,
        cpu,
        wall,
    })
}

struct ClientResult<const N: usize> {
    latency: [Latency; N],
    ops: u64,
    errors: u64,
    first_error: Option<String>,
}

impl<const N: usize> ClientResult<N> {
    fn new() -> Self {
        ClientResult {
            latency: std::array::from_fn(|_| Latency::new()),
            ops: 0,
            errors: 0,
            first_error: None,
        }
    }
}

async fn client<B: Backend, O: Op<B, N>, const N: usize>(
    b: &B,
    s: &Arc<B::Session>,
    key: &str,
    op: &O,
    end: Instant,
    progress: &Progress,
) -> ClientResult<N> {
    let mut r = ClientResult::new();
    while Instant::now() < end {
        match op.once(b, s, key).await {
            Ok(parts) => {
                for (latency, took) in r.latency.iter_mut().zip(parts) {
                    latency.record(took);
                }
                r.ops += 1;
                progress.add(1);
            }
            Err(failure) => {
                r.errors += 1;
                r.first_error.get_or_insert(failure.error);
                if failure.pause {
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
    }
    r
}
