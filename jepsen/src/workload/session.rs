//! A lock client's raftlock session: opened with a TTL, kept alive by a
//! background task, and lost by the Rust client's rule.
//!
//! # When a client stops holding
//! A client holds a lock until it releases it or *observes* that its
//! session is lost, and it observes that by the rule of
//! `raftlock_client::Session::lost()`: at
//!
//! > (send time of the last successful keepalive, or of the open)
//! > + ttl − [`lost_margin`]\(ttl)
//!
//! or at once when the cluster answers `session_not_found`, whichever
//! comes first. The server promises never to expire a session before that
//! send time + ttl, so a correct cluster grants the lock to someone else
//! only after the holder has stopped. A loss is final (as in the client
//! crate): the session is given up and the client opens a new one.
//!
//! # Recording it
//! The mutex model needs an op that ends the process's hold at the instant
//! the client stopped holding, never earlier: a lost session's end is
//! **not** backdated to the last instant it was known alive (a keepalive
//! acknowledged by a cut-off leader proves nothing). It is
//! recorded by the client's *next* process with the old process id as its
//! value ("on behalf of"), invoked at that instant
//! ([`RunLog::invoke_at`](crate::runlog::RunLog::invoke_at)) and completed
//! when recorded: `expire` when the cluster said the session was gone,
//! `lost` when the deadline passed or the client gave the session up (an
//! op of unknown outcome). A second grant completed before that instant is
//! a violation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use raftlock_client::lost_margin;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{backoff, Ctx};
use crate::api::Reply;
use crate::history::{Value, F};
use crate::runlog::Call;

/// Why a session is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// No keepalive succeeded in time: the deadline passed.
    Deadline,
    /// The cluster answered `session_not_found`.
    Gone,
    /// The client gave the session up (an op with an unknown outcome, or
    /// an answer that contradicts its hold).
    GaveUp,
}

/// The loss deadline's inputs, in run time (ns since the run started).
#[derive(Debug)]
struct LeaseState {
    /// Send time of the last successful keepalive (or of the open).
    renewed: u64,
    /// When and why the session was lost; set once, never cleared.
    lost: Option<(u64, Loss)>,
}

/// What the keepalive task and the client share.
#[derive(Debug)]
pub struct Lease {
    /// `ttl − lost_margin(ttl)`, in ns.
    span: u64,
    state: Mutex<LeaseState>,
    /// Flips to true when the loss is noted (wakes a holding client).
    lost_tx: watch::Sender<bool>,
}

impl Lease {
    /// A lease opened by a request sent at `sent`, with `ttl_ms`.
    pub fn new(sent: u64, ttl_ms: u64) -> Lease {
        let ttl = Duration::from_millis(ttl_ms);
        let span = ttl.saturating_sub(lost_margin(ttl));
        Lease {
            span: u64::try_from(span.as_nanos()).unwrap_or(u64::MAX),
            state: Mutex::new(LeaseState {
                renewed: sent,
                lost: None,
            }),
            lost_tx: watch::channel(false).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send time of the last successful keepalive (or of the open).
    pub fn renewed(&self) -> u64 {
        self.state().renewed
    }

    /// When the session is lost unless a keepalive succeeds first.
    pub fn deadline(&self) -> u64 {
        self.state().renewed.saturating_add(self.span)
    }

    /// The loss, if it happened by `now`: the deadline counts as soon as
    /// it has passed, whether or not anyone was looking.
    pub fn lost(&self, now: u64) -> Option<(u64, Loss)> {
        let mut st = self.state();
        if st.lost.is_none() {
            let deadline = st.renewed.saturating_add(self.span);
            if deadline <= now {
                st.lost = Some((deadline, Loss::Deadline));
                self.lost_tx.send_replace(true);
            }
        }
        st.lost
    }

    /// A keepalive sent at `sent` succeeded, answered at `now`. An answer
    /// after the deadline is too late: the session is already lost.
    pub fn renew(&self, sent: u64, now: u64) {
        if self.lost(now).is_none() {
            let mut st = self.state();
            st.renewed = st.renewed.max(sent);
        }
    }

    /// The session ends at `now` for `why`, unless it was lost before.
    pub fn end(&self, now: u64, why: Loss) -> (u64, Loss) {
        if let Some(lost) = self.lost(now) {
            return lost;
        }
        let mut st = self.state();
        let lost = *st.lost.get_or_insert((now, why));
        self.lost_tx.send_replace(true);
        lost
    }

    /// The run time (read from `now` under the lease's lock) at which the
    /// lease is still not lost, or `None` when it is. Decisions taken on
    /// it are ordered with every loss noted through [`Lease::end_by`]: a
    /// loss noted concurrently gets a later time.
    pub fn alive_by(&self, now: impl FnOnce() -> u64) -> Option<u64> {
        let mut st = self.state();
        let now = now();
        if st.lost.is_none() && st.renewed.saturating_add(self.span) > now {
            return Some(now);
        }
        if st.lost.is_none() {
            st.lost = Some((st.renewed.saturating_add(self.span), Loss::Deadline));
            self.lost_tx.send_replace(true);
        }
        None
    }

    /// As [`Lease::end`], with the time read from `now` under the lease's
    /// lock (see [`Lease::alive_by`]).
    pub fn end_by(&self, now: impl FnOnce() -> u64, why: Loss) -> (u64, Loss) {
        let mut st = self.state();
        let now = now();
        if st.lost.is_none() {
            let deadline = st.renewed.saturating_add(self.span);
            st.lost = Some(if deadline <= now {
                (deadline, Loss::Deadline)
            } else {
                (now, why)
            });
            self.lost_tx.send_replace(true);
        }
        st.lost.unwrap_or((now, why))
    }

    /// Completes once the loss is noted.
    pub async fn wait_lost(&self) {
        let mut rx = self.lost_tx.subscribe();
        let _ = rx.wait_for(|l| *l).await;
    }
}

/// Ends `lease` of process `pid` at its loss (now for `why`, unless it
/// was lost before) and records that loss by process `recorder` on its
/// behalf: `expire` when the cluster said the session is gone, `lost`
/// otherwise (the module docs). Says which.
pub fn record_loss(ctx: &Ctx, recorder: u64, pid: u64, lease: &Lease, why: Loss) -> Loss {
    let (at, why) = lease.end(ctx.log.now(), why);
    let call = Call {
        pid: recorder,
        f: if why == Loss::Gone {
            F::Expire
        } else {
            F::Lost
        },
        key: ctx.settings.lock.clone(),
        value: Value::Int(i64::try_from(pid).unwrap_or(i64::MAX)),
        token: None,
    };
    ctx.log.invoke_at(&call, at);
    ctx.log.ok(&call, call.value.clone());
    why
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The process holds nothing in any interpretation of its history:
    /// close the session, record nothing.
    Quiet,
    /// The session is lost, or the client gives it up now: record the end
    /// of its hold, then close it (best effort).
    Lost(Loss),
}

/// An open session of one client process.
#[derive(Debug)]
pub struct Session {
    /// The server's session id.
    pub id: String,
    /// The process that owns it (and every lock it holds).
    pub pid: u64,
    /// The client (index) it belongs to.
    idx: usize,
    /// Shared with the keepalive task.
    lease: Arc<Lease>,
    /// The keepalive task, aborted when the session ends.
    keepalive: JoinHandle<()>,
}

impl Session {
    /// Opens a session for process `pid` of client `idx`, retrying until
    /// it works or the run stops.
    pub async fn open(ctx: &Arc<Ctx>, idx: usize, pid: u64, rng: &mut StdRng) -> Option<Session> {
        let route = &ctx.clients[idx].route;
        while !ctx.stopping() {
            ctx.clients[idx].wait_unpaused().await;
            let node = route.pick(rng);
            let invoked = ctx.log.now();
            let owner = format!("jepsen-client-{idx}-process-{pid}");
            let reply = ctx
                .client_api
                .open_session(node, ctx.settings.ttl_ms, &owner)
                .await;
            route.observe(node, reply.code());
            match reply {
                Reply::Ok(id) => {
                    let lease = Arc::new(Lease::new(invoked, ctx.settings.ttl_ms));
                    let keepalive = tokio::spawn(keepalive_loop(
                        Arc::clone(ctx),
                        idx,
                        id.clone(),
                        Arc::clone(&lease),
                        rng.random(),
                    ));
                    return Some(Session {
                        id,
                        pid,
                        idx,
                        lease,
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

    /// The loss, if the session is lost by now.
    pub fn lost(&self, ctx: &Ctx) -> Option<Loss> {
        self.lease.lost(ctx.log.now()).map(|(_, why)| why)
    }

    /// When (run time) and why the session was lost, if it is by now.
    pub fn lost_at(&self, ctx: &Ctx) -> Option<(u64, Loss)> {
        self.lease.lost(ctx.log.now())
    }

    /// An op answered `session_not_found` at `now`.
    pub fn mark_gone(&self, ctx: &Ctx) {
        self.lease.end(ctx.log.now(), Loss::Gone);
    }

    /// Completes once the session is lost (the deadline passed, or the
    /// cluster said it is gone).
    pub async fn wait_lost(&self) {
        self.lease.wait_lost().await;
    }

    /// Ends the session and records how, by process `recorder` (the
    /// client's next process) on behalf of this one.
    pub async fn end(self, ctx: &Ctx, recorder: u64, how: End, rng: &mut StdRng) {
        self.keepalive.abort();
        let route = &ctx.clients[self.idx].route;
        let attempts = match how {
            End::Quiet => 3,
            End::Lost(why) => {
                if record_loss(ctx, recorder, self.pid, &self.lease, why) == Loss::Gone {
                    return;
                }
                // Close it so its lock comes free before its TTL; the
                // record does not depend on it (the client stopped).
                2
            }
        };
        for _ in 0..attempts {
            let node = route.pick(rng);
            let reply = ctx.client_api.close_session(node, &self.id).await;
            route.observe(node, reply.code());
            if let Reply::Ok(_) = reply {
                break;
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

/// The keepalive task, by the Rust client's schedule: a keepalive every
/// ttl / 3 after the last success, retried every ttl / 10 (50 ms – 1 s)
/// after a failure, none while the nemesis pauses the client. Notes the
/// loss at the deadline (the client crate's `lost()` timer) or on
/// `session_not_found`, then ends.
async fn keepalive_loop(ctx: Arc<Ctx>, idx: usize, id: String, lease: Arc<Lease>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ttl = Duration::from_millis(ctx.settings.ttl_ms);
    let interval = ns(ttl / 3);
    let retry = ns((ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)));
    // A keepalive stuck on a paused or cut-off member counts as "no
    // answer" after this (a sticky client then moves on).
    let patience = ttl / 3;
    let client = &ctx.clients[idx];
    let mut next = lease.renewed() + interval;
    loop {
        let now = ctx.log.now();
        if lease.lost(now).is_some() {
            return;
        }
        let deadline = lease.deadline();
        if client.paused() {
            // A paused client sends nothing, but its deadline still passes.
            tokio::select! {
                _ = client.wait_unpaused() => {}
                _ = tokio::time::sleep(until(deadline, now)) => {}
            }
            continue;
        }
        tokio::time::sleep(until(next.min(deadline), now)).await;
        if ctx.log.now() < next || client.paused() {
            // The deadline came first (noted above), or a pause began.
            continue;
        }
        let node = client.route.pick(&mut rng);
        let sent = ctx.log.now();
        let wait = until(deadline, sent).min(patience);
        let reply = tokio::time::timeout(wait, ctx.client_api.keepalive(node, &id)).await;
        let now = ctx.log.now();
        match reply {
            Ok(Reply::Ok(())) => {
                lease.renew(sent, now);
                next = sent + interval;
            }
            Ok(Reply::Fail(e)) if e.code == "session_not_found" => {
                lease.end(now, Loss::Gone);
                return;
            }
            Ok(other) => {
                client.route.observe(node, other.code());
                next = now + retry;
            }
            Err(_) => {
                client.route.observe(node, Some("http_timeout"));
                next = now + retry;
            }
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long from run time `now` until run time `at` (zero if past).
fn until(at: u64, now: u64) -> Duration {
    Duration::from_nanos(at.saturating_sub(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_deadline_follows_the_client_crate() {
        // ttl 3 s: margin max(300 ms, 500 ms) = 500 ms.
        let lease = Lease::new(1_000 * MS, 3_000);
        assert_eq!(lease.deadline(), 3_500 * MS);
        assert_eq!(lease.lost(3_499 * MS), None);
        lease.renew(2_000 * MS, 2_100 * MS);
        assert_eq!(lease.deadline(), 4_500 * MS);
        // An older success does not move the deadline back.
        lease.renew(1_500 * MS, 2_200 * MS);
        assert_eq!(lease.deadline(), 4_500 * MS);
        // Lost at the deadline itself, whenever it is noticed.
        assert_eq!(lease.lost(9_000 * MS), Some((4_500 * MS, Loss::Deadline)));
        // Final: a late success changes nothing.
        lease.renew(8_000 * MS, 9_100 * MS);
        assert_eq!(lease.lost(9_200 * MS), Some((4_500 * MS, Loss::Deadline)));
    }

    #[test]
    fn a_success_answered_after_the_deadline_is_too_late() {
        let lease = Lease::new(0, 1_000);
        // ttl 1 s: margin min(max(100, 500), 500) = 500 ms.
        assert_eq!(lease.deadline(), 500 * MS);
        lease.renew(400 * MS, 600 * MS);
        assert_eq!(lease.lost(600 * MS), Some((500 * MS, Loss::Deadline)));
    }

    #[test]
    fn gone_and_given_up_end_at_once_unless_already_lost() {
        let lease = Lease::new(0, 3_000);
        assert_eq!(lease.end(100 * MS, Loss::Gone), (100 * MS, Loss::Gone));
        assert_eq!(lease.end(200 * MS, Loss::GaveUp), (100 * MS, Loss::Gone));
        let late = Lease::new(0, 3_000);
        assert_eq!(
            late.end(4_000 * MS, Loss::GaveUp),
            (2_500 * MS, Loss::Deadline)
        );
    }
}
