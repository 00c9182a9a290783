//! The `zk-mutex` clients: the `fenced` workload spoken through the
//! members' ZooKeeper doors with raftlock's ZooKeeper client
//! (`raftlock_zookeeper::client`), running ZooKeeper's textbook lock
//! recipe (zookeeper.apache.org/doc/r3.8.0/recipes.html#sc_recipes_Locks).
//!
//! A process is one ZooKeeper session on the client's member (sticky:
//! [`super::route`]; a member without a door, or one that does not
//! answer, is left as an HTTP client leaves it). Each round:
//! - `acquire`: create an ephemeral sequential node under the lock
//!   directory (create2, whose stat's `czxid` is the **fencing token**),
//!   list the directory; the lowest node holds; otherwise set an
//!   exists-watch on the immediate predecessor and, when it fires, list
//!   again. A wait that outlasts the acquire's `wait_ms` withdraws the
//!   node (`fail`); an answer lost to the connection is `info`;
//! - `incr` of the fenced counter under the token, then a short hold;
//! - `release`: delete the node.
//!
//! # When a client stops holding
//! The session is kept alive by pings this module sends (the client's own
//! pinger is off, so the `client-pause` nemesis silences them), on the
//! schedule of the HTTP clients' keepalives. A holder observes its loss,
//! and stops, at the first of: the send time of its last answered ping +
//! the negotiated timeout − [`raftlock_client::lost_margin`] (the door
//! renews a session on a ping only once a quorum confirms it), the
//! connection dropping (ZooKeeper's Disconnected: the session may live on,
//! but nothing proves it does), or the server saying it expired. The
//! loss is recorded as [`super::session`] records it (`lost`, or `expire`
//! when the server said so, by the next process); the session is then
//! closed (best effort) and the client goes on with a new one.
//!
//! # The injected bug
//! With `Settings::inject_zk_no_relist` a waiter believes it holds the
//! lock as soon as its predecessor's deletion event arrives, without
//! listing again: when a waiter in the middle of the queue withdraws (its
//! wait timed out) or its session ends, its successor "holds" beside the
//! real holder. The mutex and fencing checkers must catch it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use raftlock_zookeeper::client::{Client, Config, Error as ZkError, Pinger, State};
use raftlock_zookeeper::wire::{CreateMode, ErrorCode, EventType};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::session::{record_loss, End, Lease, Loss};
use super::{backoff, lock, Ctx};
use crate::history::{Value, F};
use crate::runlog::Call;

/// Longest wait for a member's door to take a session.
const CONNECT_FOR: Duration = Duration::from_secs(2);

/// The directory of the lock's nodes, e.g. `/jepsen/lock`.
pub fn lock_dir(ctx: &Ctx) -> String {
    format!("/{}", ctx.settings.lock.trim_matches('/'))
}

/// One open ZooKeeper session of a client process.
struct ZkSession {
    client: Client,
    /// The process that owns it.
    pid: u64,
    /// The member it is on.
    node: u64,
    lease: Arc<Lease>,
    /// Pings and watches the connection's state; notes the loss.
    keeper: JoinHandle<()>,
}

impl ZkSession {
    fn lost(&self, ctx: &Ctx) -> Option<Loss> {
        self.lease.lost(ctx.log.now()).map(|(_, why)| why)
    }

    /// Ends the session as [`super::session::Session::end`] does: the loss
    /// recorded by process `recorder` on behalf of this one, then a close.
    async fn end(self, ctx: &Ctx, recorder: u64, how: End) {
        self.keeper.abort();
        if let End::Lost(why) = how {
            record_loss(ctx, recorder, self.pid, &self.lease, why);
        }
        // Dropped without an end (a run's last clients are aborted), the
        // client's drop closes the session and the keeper sees it.
        self.client.close().await;
    }
}

/// One `zk-mutex` client.
pub async fn client(ctx: Arc<Ctx>, idx: usize, mut rng: StdRng) {
    let mut ending: Option<(ZkSession, End)> = None;
    loop {
        let pid = ctx.next_pid();
        if let Some((old, how)) = ending.take() {
            ctx.set_holding(idx, false);
            old.end(&ctx, pid, how).await;
        }
        if ctx.stopping() {
            return;
        }
        let Some(session) = open(&ctx, idx, pid, &mut rng).await else {
            return;
        };
        let how = session_loop(&ctx, idx, &session, &mut rng).await;
        ending = Some((session, how));
    }
}

/// Opens a session for process `pid` on client `idx`'s member, retrying
/// (and moving on from members that do not answer) until the run stops.
async fn open(ctx: &Arc<Ctx>, idx: usize, pid: u64, rng: &mut StdRng) -> Option<ZkSession> {
    let route = &ctx.clients[idx].route;
    while !ctx.stopping() {
        ctx.clients[idx].wait_unpaused().await;
        let node = route.pick(rng);
        let Some(addr) = ctx.zk_doors.get(&node) else {
            // A member without a door (a spare that joined): as unreachable.
            route.observe(node, Some("connect"));
            backoff(ctx, rng).await;
            continue;
        };
        let config = Config {
            connect_for: CONNECT_FOR,
            auto_ping: false,
            reconnect: false,
            ..Config::new(
                vec![addr.clone()],
                Duration::from_millis(ctx.settings.ttl_ms),
            )
        };
        let invoked = ctx.log.now();
        match Client::connect(config).await {
            Ok(client) => {
                let timeout_ms =
                    u64::try_from(client.session_timeout().as_millis()).unwrap_or(u64::MAX);
                let lease = Arc::new(Lease::new(invoked, timeout_ms));
                let keeper = tokio::spawn(keep(
                    Arc::clone(ctx),
                    idx,
                    (client.pinger(), client.state(), client.session_timeout()),
                    Arc::clone(&lease),
                ));
                return Some(ZkSession {
                    client,
                    pid,
                    node,
                    lease,
                    keeper,
                });
            }
            Err(_) => {
                route.observe(node, Some("connect"));
                backoff(ctx, rng).await;
            }
        }
    }
    None
}

/// The keeper: a ping every third of the timeout after the last answered
/// one, retried every tenth after a failure, none while the nemesis
/// pauses the client; notes the loss at the lease's deadline, when the
/// connection drops, or when the server says the session expired.
async fn keep(
    ctx: Arc<Ctx>,
    idx: usize,
    (pinger, mut state, timeout): (Pinger, watch::Receiver<State>, Duration),
    lease: Arc<Lease>,
) {
    let interval = ns(timeout / 3);
    let retry = ns((timeout / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)));
    let control = &ctx.clients[idx];
    let mut next = lease.renewed() + interval;
    loop {
        let now = ctx.log.now();
        if lease.lost(now).is_some() {
            return;
        }
        match *state.borrow_and_update() {
            State::Connected => {}
            State::Expired => {
                lease.end(now, Loss::Gone);
                return;
            }
            State::Disconnected | State::Closed => {
                lease.end(now, Loss::GaveUp);
                return;
            }
        }
        let deadline = lease.deadline();
        let wake = if control.paused() {
            deadline
        } else {
            next.min(deadline)
        };
        tokio::select! {
            _ = tokio::time::sleep(until(wake, now)) => {}
            _ = state.changed() => continue,
            _ = control.wait_unpaused(), if control.paused() => continue,
        }
        if ctx.log.now() < next || control.paused() {
            continue;
        }
        let sent = ctx.log.now();
        let wait = until(deadline, sent).min(timeout / 3);
        let answered = tokio::time::timeout(wait, pinger.ping()).await;
        let now = ctx.log.now();
        match answered {
            Ok(Ok(())) => {
                lease.renew(sent, now);
                next = sent + interval;
            }
            _ => next = now + retry,
        }
    }
}

/// Lock rounds on one session until it must end; says how.
async fn session_loop(ctx: &Ctx, idx: usize, s: &ZkSession, rng: &mut StdRng) -> End {
    let dir = lock_dir(ctx);
    if let Err(e) = ensure_dir(&s.client, &dir).await {
        return match e {
            ZkError::SessionExpired => End::Lost(Loss::Gone),
            _ => End::Lost(Loss::GaveUp),
        };
    }
    loop {
        if let Some(why) = s.lost(ctx) {
            return End::Lost(why);
        }
        if ctx.stopping() {
            return End::Quiet;
        }
        let (token, mine) = match acquire(ctx, idx, s, &dir, rng).await {
            Acquired::Held(token, mine) => (token, mine),
            Acquired::Retry => continue,
            Acquired::End(end) => return end,
        };
        lock::increment(ctx, idx, s.pid, token).await;
        hold(ctx, idx, &s.lease, rng).await;
        let released = release(ctx, s, &mine).await;
        ctx.set_holding(idx, false);
        if let Some(end) = released {
            return end;
        }
    }
}

/// Creates `dir` and its parents (persistent, empty) if missing.
async fn ensure_dir(client: &Client, dir: &str) -> Result<(), ZkError> {
    let mut at = String::new();
    for part in dir.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        match client.create(&at, &[], CreateMode::Persistent).await {
            Ok(_) | Err(ZkError::Code(ErrorCode::NodeExists)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

enum Acquired {
    /// Held with this token, through this node.
    Held(u64, String),
    Retry,
    End(End),
}

/// The sequence number ZooKeeper appended (the last 10 characters).
fn seq_of(name: &str) -> Option<u64> {
    name.rsplit_once("lock-")?.1.parse().ok()
}

/// The lock's nodes among `children`, by sequence.
fn queue(children: Vec<String>) -> Vec<(u64, String)> {
    let mut q: Vec<(u64, String)> = children
        .into_iter()
        .filter_map(|c| seq_of(&c).map(|n| (n, c)))
        .collect();
    q.sort_unstable();
    q
}

/// What the recipe came to before the client holds.
enum Waited {
    Lowest,
    /// The wait ran out (the node is still queued).
    TimedOut,
    /// The session was lost while waiting.
    Lost(Loss),
    /// A call failed: its outcome, and whether the node may be left.
    Failed(ZkError),
}

/// The recipe, recorded as one `acquire`.
async fn acquire(ctx: &Ctx, idx: usize, s: &ZkSession, dir: &str, rng: &mut StdRng) -> Acquired {
    let wait_ms = rng.random_range(500..=ctx.settings.max_wait_ms.max(500));
    let call = Call {
        pid: s.pid,
        f: F::Acquire,
        key: ctx.settings.lock.clone(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    let created = s
        .client
        .create2(
            &format!("{dir}/lock-"),
            &[],
            CreateMode::EphemeralSequential,
        )
        .await;
    let (mine, stat) = match created {
        Ok(c) => c,
        Err(e) => {
            observe(ctx, idx, s, &e);
            return match e {
                // Not applied: the server said no.
                ZkError::Code(code) => {
                    ctx.log.fail(&call, &format!("create: {code:?}"));
                    backoff(ctx, rng).await;
                    Acquired::Retry
                }
                // The node may exist: the session is given up.
                other => {
                    ctx.log.info(&call, &format!("create: {other}"));
                    Acquired::End(End::Lost(loss_of(&other)))
                }
            };
        }
    };
    let token = u64::try_from(stat.czxid).unwrap_or(0);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    match wait_turn(ctx, s, dir, &mine, deadline).await {
        Waited::Lowest => {
            ctx.log.ok(
                &Call {
                    token: Some(token),
                    ..call
                },
                Value::Nil,
            );
            if let Some(why) = s.lost(ctx) {
                return Acquired::End(End::Lost(why));
            }
            ctx.set_holding(idx, true);
            Acquired::Held(token, mine)
        }
        Waited::TimedOut => match s.client.delete(&mine).await {
            Ok(()) | Err(ZkError::Code(ErrorCode::NoNode)) => {
                ctx.log.fail(&call, "timeout");
                Acquired::Retry
            }
            Err(e) => {
                observe(ctx, idx, s, &e);
                ctx.log.info(&call, &format!("withdraw: {e}"));
                Acquired::End(End::Lost(loss_of(&e)))
            }
        },
        // Never believed held; the node goes with the session.
        Waited::Lost(why) => {
            ctx.log.fail(&call, "session lost while waiting");
            Acquired::End(End::Lost(why))
        }
        Waited::Failed(e) => {
            observe(ctx, idx, s, &e);
            ctx.log.fail(&call, &format!("while waiting: {e}"));
            Acquired::End(End::Lost(loss_of(&e)))
        }
    }
}

/// Lists and watches until `mine` is the lowest node, the wait runs out
/// or the session is lost.
async fn wait_turn(
    ctx: &Ctx,
    s: &ZkSession,
    dir: &str,
    mine: &str,
    deadline: tokio::time::Instant,
) -> Waited {
    let name = mine.rsplit('/').next().unwrap_or_default();
    loop {
        if let Some(why) = s.lost(ctx) {
            return Waited::Lost(why);
        }
        let q = match s.client.children(dir).await {
            Ok(children) => queue(children),
            Err(e) => return Waited::Failed(e),
        };
        let Some(pos) = q.iter().position(|(_, n)| n == name) else {
            // Our node is gone: the session ended on the server.
            return Waited::Lost(Loss::Gone);
        };
        if pos == 0 {
            return Waited::Lowest;
        }
        let pred = format!("{dir}/{}", q[pos - 1].1);
        let watch = match s.client.exists_watch(&pred).await {
            Ok(Some(w)) => w,
            // Gone between the listing and the watch: list again.
            Ok(None) => continue,
            Err(e) => return Waited::Failed(e),
        };
        tokio::select! {
            fired = watch => match fired {
                Ok(EventType::NodeDeleted) if ctx.settings.inject_zk_no_relist => {
                    // The injected bug: the predecessor's deletion taken
                    // for the lock, with no listing to check it.
                    return Waited::Lowest;
                }
                // Fired: list again. Dropped: the connection is gone, and
                // the next look says so.
                Ok(_) | Err(_) => {}
            },
            _ = tokio::time::sleep_until(deadline) => return Waited::TimedOut,
            _ = s.lease.wait_lost() => {}
        }
    }
}

/// The critical section after the increment: a short random hold, as
/// long as the nemesis asks for a long one, and a stall while paused.
/// Ends early when the session is lost (except during a pause). Also the
/// `etcd-mutex` clients'.
pub(super) async fn hold(ctx: &Ctx, idx: usize, lease: &Lease, rng: &mut StdRng) {
    let control = &ctx.clients[idx];
    let short = Duration::from_millis(rng.random_range(0..=ctx.settings.max_hold_ms));
    tokio::select! {
        _ = async {
            tokio::time::sleep(short).await;
            control.wait_no_long_hold().await;
        } => {}
        _ = lease.wait_lost() => {}
    }
    control.wait_unpaused().await;
}

/// Deletes our node. `None` when released and the session goes on.
async fn release(ctx: &Ctx, s: &ZkSession, mine: &str) -> Option<End> {
    if let Some(why) = s.lost(ctx) {
        return Some(End::Lost(why));
    }
    let call = Call {
        pid: s.pid,
        f: F::Release,
        key: ctx.settings.lock.clone(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    match s.client.delete(mine).await {
        Ok(()) => {
            ctx.log.ok(&call, Value::Nil);
            None
        }
        Err(ZkError::Code(code)) => {
            // Our own node, not there (or not ours): the session is given up.
            ctx.log.fail(&call, &format!("delete: {code:?}"));
            Some(End::Lost(Loss::GaveUp))
        }
        Err(e) => {
            ctx.log.info(&call, &format!("delete: {e}"));
            Some(End::Lost(loss_of(&e)))
        }
    }
}

/// A failed call's session loss.
fn loss_of(e: &ZkError) -> Loss {
    match e {
        ZkError::SessionExpired => Loss::Gone,
        _ => Loss::GaveUp,
    }
}

/// A failure that says the member did not serve: a sticky client moves.
fn observe(ctx: &Ctx, idx: usize, s: &ZkSession, e: &ZkError) {
    if matches!(e, ZkError::ConnectionLoss | ZkError::Closed) {
        ctx.clients[idx].route.observe(s.node, Some("connect"));
    }
}

/// Whether the lock directory has no node left (the quiet phase's check),
/// asked through member `node`'s door.
pub async fn lock_is_free(ctx: &Ctx, node: u64) -> Result<bool, String> {
    let addr = ctx
        .zk_doors
        .get(&node)
        .ok_or_else(|| format!("n{node} has no ZooKeeper door"))?;
    let config = Config {
        connect_for: CONNECT_FOR,
        ..Config::new(vec![addr.clone()], Duration::from_secs(10))
    };
    let client = Client::connect(config)
        .await
        .map_err(|e| format!("n{node}: {e}"))?;
    let listed = client.children(&lock_dir(ctx)).await;
    client.close().await;
    match listed {
        Ok(children) => Ok(queue(children).is_empty()),
        Err(ZkError::Code(ErrorCode::NoNode)) => Ok(true),
        Err(e) => Err(format!("n{node}: list: {e}")),
    }
}

/// The door address of every member that has one.
pub type Doors = BTreeMap<u64, String>;

pub(super) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn until(at: u64, now: u64) -> Duration {
    Duration::from_nanos(at.saturating_sub(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_client::lost_margin;

    #[test]
    fn the_queue_is_by_sequence() {
        let q = queue(vec![
            "lock-0000000010".into(),
            "other".into(),
            "lock-0000000002".into(),
        ]);
        assert_eq!(
            q,
            vec![
                (2, "lock-0000000002".to_string()),
                (10, "lock-0000000010".to_string())
            ]
        );
        // The loss margin the lease uses is the HTTP clients'.
        assert!(lost_margin(Duration::from_secs(4)) > Duration::ZERO);
    }
}
