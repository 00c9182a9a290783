//! A lock client's raftlock session: opened with a TTL, kept alive by a
//! background task, and ended with an honest record of when it may have
//! died.
//!
//! # Recording a lost session
//! The mutex model needs an `expire` op whose window contains the moment
//! the server dropped the session's locks. That moment is after the last
//! instant the session was *known alive* — the invocation of its last
//! acknowledged keepalive or of its last acknowledged lock op, whichever
//! is later ([`Session::proved_alive`]) — and before the client learnt it
//! was gone (a `session_not_found` answer, or a close it confirmed). The
//! op is recorded by the client's *next* process with the old process id
//! as its value ("expire on behalf of"), its invocation backdated to the
//! known-alive instant ([`RunLog::invoke_at`](crate::runlog::RunLog::invoke_at)).
//! That keeps the window exact even when the old process completed other
//! ops after that instant (a `fenced` increment after a client pause).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use super::{backoff, Ctx};
use crate::api::Reply;
use crate::history::{Value, F};
use crate::runlog::Call;

/// How long a client keeps trying to confirm that a session it gave up is
/// closed once the run is stopping; after that the end is recorded `info`.
const CONFIRM_AFTER_STOP: Duration = Duration::from_secs(20);

/// What the keepalive task and the client share.
#[derive(Debug, Default)]
struct Alive {
    /// Latest run time (ns) at which the session was certainly alive.
    floor: AtomicU64,
    /// The server answered `session_not_found`.
    lost: AtomicBool,
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The process holds nothing in any interpretation of its history:
    /// close the session, record nothing.
    Quiet,
    /// The server said the session is gone: record `expire`.
    Gone,
    /// The process may hold the lock, or its last op's outcome is unknown:
    /// close the session, then record `lost` (or `expire` if the server
    /// says it was already gone).
    Close,
}

/// An open session of one client process.
#[derive(Debug)]
pub struct Session {
    /// The server's session id.
    pub id: String,
    /// The process that owns it (and every lock it holds).
    pub pid: u64,
    /// Shared with the keepalive task.
    alive: Arc<Alive>,
    /// The keepalive task, aborted when the session ends.
    keepalive: JoinHandle<()>,
}

impl Session {
    /// Opens a session for process `pid` of client `idx`, retrying until
    /// it works or the run stops.
    pub async fn open(ctx: &Arc<Ctx>, idx: usize, pid: u64, rng: &mut StdRng) -> Option<Session> {
        while !ctx.stopping() {
            ctx.clients[idx].wait_unpaused().await;
            let node = ctx.pick_node(rng);
            let invoked = ctx.log.now();
            let owner = format!("jepsen-client-{idx}-process-{pid}");
            match ctx
                .api
                .open_session(node, ctx.settings.ttl_ms, &owner)
                .await
            {
                Reply::Ok(id) => {
                    let alive = Arc::new(Alive {
                        floor: AtomicU64::new(invoked),
                        lost: AtomicBool::new(false),
                    });
                    let keepalive = tokio::spawn(keepalive_loop(
                        Arc::clone(ctx),
                        idx,
                        id.clone(),
                        Arc::clone(&alive),
                        rng.random(),
                    ));
                    return Some(Session {
                        id,
                        pid,
                        alive,
                        keepalive,
                    });
                }
                // An unknown outcome may leave an unused session behind; it
                // holds nothing and expires on its own.
                _ => backoff(ctx, rng).await,
            }
        }
        None
    }

    /// The session was alive when an op invoked at `invoked` (run time)
    /// was acknowledged.
    pub fn proved_alive(&self, invoked: u64) {
        self.alive.floor.fetch_max(invoked, Ordering::Relaxed);
    }

    /// Marks the session gone (an op got `session_not_found`).
    pub fn mark_lost(&self) {
        self.alive.lost.store(true, Ordering::Relaxed);
    }

    /// True once the server said the session is gone.
    pub fn lost(&self) -> bool {
        self.alive.lost.load(Ordering::Relaxed)
    }

    /// Ends the session and records how, by process `recorder` (the
    /// client's next process) on behalf of this one.
    pub async fn end(self, ctx: &Ctx, recorder: u64, how: End, rng: &mut StdRng) {
        self.keepalive.abort();
        let how = if self.lost() && how != End::Quiet {
            End::Gone
        } else {
            how
        };
        let floor = self.alive.floor.load(Ordering::Relaxed);
        let mut call = Call {
            pid: recorder,
            f: F::Expire,
            key: ctx.settings.lock.clone(),
            value: Value::Int(i64::try_from(self.pid).unwrap_or(i64::MAX)),
            token: None,
        };
        match how {
            End::Quiet => {
                for _ in 0..3 {
                    let node = ctx.pick_node(rng);
                    if let Reply::Ok(_) = ctx.api.close_session(node, &self.id).await {
                        break;
                    }
                }
            }
            End::Gone => {
                ctx.log.invoke_at(&call, floor);
                ctx.log.ok(&call, call.value.clone());
            }
            End::Close => {
                let mut stop_seen: Option<tokio::time::Instant> = None;
                loop {
                    let node = ctx.pick_node(rng);
                    match ctx.api.close_session(node, &self.id).await {
                        Reply::Ok(closed_now) => {
                            if closed_now {
                                call.f = F::Lost;
                            }
                            ctx.log.invoke_at(&call, floor);
                            ctx.log.ok(&call, call.value.clone());
                            return;
                        }
                        _ if ctx.stopping() => {
                            let since = *stop_seen.get_or_insert_with(tokio::time::Instant::now);
                            if since.elapsed() > CONFIRM_AFTER_STOP {
                                ctx.log.invoke_at(&call, floor);
                                ctx.log
                                    .info(&call, "could not confirm that the session ended");
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        _ => backoff(ctx, rng).await,
                    }
                }
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Also when a client task is aborted at the end of a run.
        self.keepalive.abort();
    }
}

/// Sends a keepalive every quarter TTL to a random node, except while the
/// nemesis pauses the client. Keeps the known-alive floor.
async fn keepalive_loop(ctx: Arc<Ctx>, idx: usize, id: String, alive: Arc<Alive>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let period = Duration::from_millis(ctx.settings.ttl_ms / 4);
    // A keepalive stuck on a paused node must not starve the session.
    let timeout = Duration::from_millis(ctx.settings.ttl_ms / 3);
    loop {
        tokio::time::sleep(period).await;
        ctx.clients[idx].wait_unpaused().await;
        let node = ctx.pick_node(&mut rng);
        let invoked = ctx.log.now();
        match tokio::time::timeout(timeout, ctx.api.keepalive(node, &id)).await {
            Ok(Reply::Ok(())) => {
                alive.floor.fetch_max(invoked, Ordering::Relaxed);
            }
            Ok(Reply::Fail(e)) if e.code == "session_not_found" => {
                alive.lost.store(true, Ordering::Relaxed);
                return;
            }
            _ => {}
        }
    }
}
