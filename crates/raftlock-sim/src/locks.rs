//! The lock workload's clients: each opens a session, keeps it alive,
//! takes one lock with the real state machine's `Acquire` (a try-lock),
//! holds it briefly and releases it, again and again, as the Jepsen
//! harness's `mutex` clients do (`jepsen/src/workload/lock.rs`), on
//! simulated time.
//!
//! A client holds the lock until it releases it or *observes* that its
//! session is lost, by the Rust client's rule (the harness's
//! `workload::session::Lease`): at the send time of its last acknowledged
//! keepalive (or of the open) + TTL − margin, or at once when the cluster
//! answers that the session is gone. The end of a hold is recorded as the
//! harness records it: a `lost` or `expire` op by the client's next
//! process on behalf of the old one, invoked at the instant of the loss.
//! The history goes through the harness's mutex linearizability checker
//! (a holder counted until it observes its loss) and its fencing checker
//! (grant tokens strictly increase per lock).
//!
//! Keepalives go through one member (sticky, as the harness's clients:
//! another one only after a failure) and on to the member it names as
//! leader (as a follower forwards them), and are answered there
//! by the node's session logic (`sessions`). Every acknowledged keepalive
//! is also told to the world's `SessionOracle`, which checks that no
//! expiry comes before the last one's send time + TTL.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use raftlock_core::{Applied, Command, CoreError, QueueKind, Response, SessionId};
use raftlock_jepsen::workload::session::{Lease, Loss};
use raftlock_jepsen::{Event, EventType, Process, Value, F};
use raftlock_node::{NodeId, Proposal};

use crate::sessions::{keepalive_at, Refused};
use crate::world::WorldRef;

/// The lock the clients take.
pub const LOCK: &str = "sim";
/// The lock's key in the history.
const KEY: &str = "lock";
/// The TTL of every session.
pub const TTL_MS: u64 = 1_000;
/// A client gives up on an operation after this long: outcome unknown.
const OP_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Hops along leader hints before giving up.
const MAX_HOPS: usize = 3;

/// How a session ends.
#[derive(Debug, Clone, Copy)]
enum End {
    /// The client holds nothing in any reading of its history.
    Quiet,
    /// Lost, or given up: the end of its hold is recorded.
    Lost(Loss),
}

/// One open session.
struct Session {
    id: SessionId,
    pid: u64,
    lease: Arc<Lease>,
    keepalive: tokio::task::AbortHandle,
}

impl Session {
    fn lost(&self, world: &WorldRef) -> Option<Loss> {
        let now = world.with(|w| w.now_ns());
        self.lease.lost(now).map(|(_, why)| why)
    }
}

/// How a proposal ended.
enum Outcome {
    /// Committed and applied: the state machine's answer.
    Applied(Box<Applied>),
    /// Certainly not applied.
    Fail(String),
    /// Maybe applied.
    Info(String),
}

fn event(pid: u64, kind: EventType, f: F, value: Value) -> Event {
    Event::new(Process::Client(pid), kind, f, value).with_key(KEY)
}

fn pause(world: &WorldRef, lo: u64, hi: u64) -> Duration {
    world.with(|w| Duration::from_millis(w.rng.range(lo, hi)))
}

/// Runs lock client `idx` until the world stops.
pub async fn lock_client(world: WorldRef, idx: usize) {
    let mut ending: Option<(Session, End)> = None;
    loop {
        let pid = world.with(|w| w.new_process());
        if let Some((old, how)) = ending.take() {
            end_session(&world, old, pid, how).await;
        }
        if world.with(|w| w.stopping) {
            return;
        }
        let Some(session) = open(&world, idx, pid).await else {
            return;
        };
        let how = rounds(&world, &session).await;
        ending = Some((session, how));
    }
}

/// Opens a session for `pid`, retrying until it works or the run stops.
async fn open(world: &WorldRef, idx: usize, pid: u64) -> Option<Session> {
    while !world.with(|w| w.stopping) {
        let wait = pause(world, 0, 30);
        tokio::time::sleep(wait).await;
        let (id, sent) = world.with(|w| {
            let hi = u128::from(w.rng.next_u64()) << 64;
            (SessionId(hi | u128::from(w.rng.next_u64())), w.now_ns())
        });
        let command = Command::OpenSession {
            id,
            owner: format!("sim-lock-{idx}-process-{pid}"),
            ttl_ms: TTL_MS,
        };
        if let Outcome::Applied(a) = propose(world, command).await {
            if let Ok(Response::SessionOpened { ttl_ms, .. }) = a.result {
                let lease = Arc::new(Lease::new(sent, ttl_ms));
                world.with(|w| {
                    if let Some(v) = w.sessions.on_renewed(id, pid, ttl_ms, sent) {
                        w.violation(v);
                    }
                });
                let task = tokio::spawn(keepalive_loop(world.clone(), id, pid, lease.clone()));
                return Some(Session {
                    id,
                    pid,
                    lease,
                    keepalive: task.abort_handle(),
                });
            }
        }
        // An unknown outcome may leave a session behind: it holds nothing
        // and expires on its own.
        let wait = pause(world, 50, 150);
        tokio::time::sleep(wait).await;
    }
    None
}

/// Lock rounds on one session until it must end.
async fn rounds(world: &WorldRef, session: &Session) -> End {
    loop {
        if let Some(why) = session.lost(world) {
            return End::Lost(why);
        }
        if world.with(|w| w.stopping) {
            return End::Quiet;
        }
        let wait = pause(world, 0, 50);
        tokio::time::sleep(wait).await;
        let pid = session.pid;
        world.with(|w| w.record_lock(event(pid, EventType::Invoke, F::Acquire, Value::Nil)));
        let command = Command::Acquire {
            kind: QueueKind::Lock,
            name: LOCK.into(),
            session: session.id,
            data: Vec::new(),
            wait: false,
        };
        match propose(world, command).await {
            Outcome::Applied(a) => match a.result {
                Ok(Response::Acquired(acq)) if acq.held => {
                    world.with(|w| {
                        w.record_lock(
                            event(pid, EventType::Ok, F::Acquire, Value::Nil)
                                .with_token(acq.fencing_token),
                        )
                    });
                }
                Ok(other) => {
                    // Queued (a try-lock never is) or another answer: the
                    // session is given up.
                    let e = format!("unexpected answer {other:?}");
                    record_info(world, pid, F::Acquire, e);
                    return End::Lost(Loss::GaveUp);
                }
                Err(CoreError::SessionNotFound(_)) => {
                    record_info(world, pid, F::Acquire, "session not found".into());
                    gone(world, session);
                    return End::Lost(Loss::Gone);
                }
                Err(e) => {
                    record_fail(world, pid, F::Acquire, e.to_string());
                    continue;
                }
            },
            Outcome::Fail(e) => {
                record_fail(world, pid, F::Acquire, e);
                let wait = pause(world, 20, 100);
                tokio::time::sleep(wait).await;
                continue;
            }
            Outcome::Info(e) => {
                record_info(world, pid, F::Acquire, e);
                return End::Lost(Loss::GaveUp);
            }
        }
        // Granted after the session was lost: never acted on.
        if let Some(why) = session.lost(world) {
            return End::Lost(why);
        }
        // The critical section.
        let hold = pause(world, 10, 200);
        tokio::time::sleep(hold).await;
        if let Some(end) = release(world, session).await {
            return end;
        }
    }
}

/// Releases the lock; `None` when released and the session goes on.
async fn release(world: &WorldRef, session: &Session) -> Option<End> {
    let pid = session.pid;
    loop {
        if let Some(why) = session.lost(world) {
            return Some(End::Lost(why));
        }
        world.with(|w| w.record_lock(event(pid, EventType::Invoke, F::Release, Value::Nil)));
        let command = Command::Release {
            kind: QueueKind::Lock,
            name: LOCK.into(),
            session: session.id,
            withdraw: None,
        };
        match propose(world, command).await {
            Outcome::Applied(a) => match a.result {
                Ok(Response::Released {
                    was_holder: true, ..
                }) => {
                    world
                        .with(|w| w.record_lock(event(pid, EventType::Ok, F::Release, Value::Nil)));
                    return None;
                }
                Err(CoreError::SessionNotFound(_)) => {
                    record_fail(world, pid, F::Release, "session not found".into());
                    gone(world, session);
                    return Some(End::Lost(Loss::Gone));
                }
                other => {
                    // Not the holder by the server's own grant: recorded as
                    // is, the session given up.
                    record_fail(world, pid, F::Release, format!("{other:?}"));
                    return Some(End::Lost(Loss::GaveUp));
                }
            },
            Outcome::Fail(e) => {
                // Still holding: try again until the session is lost.
                record_fail(world, pid, F::Release, e);
                let wait = pause(world, 20, 100);
                tokio::time::sleep(wait).await;
            }
            Outcome::Info(e) => {
                record_info(world, pid, F::Release, e);
                return Some(End::Lost(Loss::GaveUp));
            }
        }
    }
}

fn record_fail(world: &WorldRef, pid: u64, f: F, error: String) {
    world.with(|w| w.record_lock(event(pid, EventType::Fail, f, Value::Nil).with_error(error)));
}

fn record_info(world: &WorldRef, pid: u64, f: F, error: String) {
    world.with(|w| w.record_lock(event(pid, EventType::Info, f, Value::Nil).with_error(error)));
}

fn gone(world: &WorldRef, session: &Session) {
    let now = world.with(|w| w.now_ns());
    session.lease.end(now, Loss::Gone);
}

/// Ends `session` and records how, by process `recorder` on its behalf.
async fn end_session(world: &WorldRef, session: Session, recorder: u64, how: End) {
    session.keepalive.abort();
    let attempts = match how {
        End::Quiet => 3,
        End::Lost(why) => {
            let now = world.with(|w| w.now_ns());
            let (at, why) = session.lease.end(now, why);
            let f = if why == Loss::Gone {
                F::Expire
            } else {
                F::Lost
            };
            let value = Value::Int(i64::try_from(session.pid).unwrap_or(i64::MAX));
            world.with(|w| {
                // Invoked at the loss (put in time order when the run
                // ends), completed now.
                w.lock_history
                    .push(event(recorder, EventType::Invoke, f.clone(), value.clone()).at(at));
                w.record_lock(event(recorder, EventType::Ok, f, value));
            });
            if why == Loss::Gone {
                return;
            }
            2
        }
    };
    // Closed, its lock comes free before its TTL; the record does not
    // depend on it.
    for _ in 0..attempts {
        if let Outcome::Applied(_) = propose(world, Command::CloseSession { id: session.id }).await
        {
            break;
        }
    }
}

/// The keepalive task, by the Rust client's schedule: a keepalive every
/// ttl / 3 after the last success, retried every ttl / 10 after a
/// failure, until the session is lost.
async fn keepalive_loop(world: WorldRef, id: SessionId, pid: u64, lease: Arc<Lease>) {
    let ttl = Duration::from_millis(TTL_MS);
    let interval = ns(ttl / 3);
    let retry = ns((ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)));
    let patience = ttl / 3;
    let mut next = lease.renewed() + interval;
    // Sticky, as the harness's clients are: keepalives go through one
    // member until it fails to answer, then through another.
    let pick = |world: &WorldRef| {
        world.with(|w| {
            let ids = w.ids();
            ids[w.rng.pick(ids.len())]
        })
    };
    let mut home = pick(&world);
    loop {
        let now = world.with(|w| w.now_ns());
        if lease.lost(now).is_some() {
            return;
        }
        let deadline = lease.deadline();
        tokio::time::sleep(until(next.min(deadline), now)).await;
        let sent = world.with(|w| w.now_ns());
        if sent < next {
            continue;
        }
        let wait = until(deadline, sent).min(patience);
        let reply = tokio::time::timeout(wait, keepalive(&world, home, id)).await;
        let now = world.with(|w| w.now_ns());
        match reply {
            Ok(Ok(ttl_ms)) => {
                lease.renew(sent, now);
                world.with(|w| {
                    w.sessions.keepalives += 1;
                    if let Some(v) = w.sessions.on_renewed(id, pid, ttl_ms, sent) {
                        w.violation(v);
                    }
                });
                next = sent + interval;
            }
            Ok(Err(Refused::NotFound)) => {
                lease.end(now, Loss::Gone);
                return;
            }
            Ok(Err(_)) | Err(_) => {
                next = now + retry;
                home = pick(&world);
            }
        }
    }
}

/// One keepalive through member `home`, on to the member it names as
/// leader.
async fn keepalive(world: &WorldRef, home: NodeId, session: SessionId) -> Result<u64, Refused> {
    let mut target = home;
    for _ in 0..MAX_HOPS {
        world.wait_unpaused(&[target]).await;
        match keepalive_at(world, target, session).await {
            Err(Refused::NotLeader(Some(leader))) if leader != target => {
                // Forwarded over the member's link to its leader.
                let cut = world.with(|w| {
                    w.links.cut.contains(&(target, leader))
                        || w.links.cut.contains(&(leader, target))
                });
                if cut {
                    return Err(Refused::Unavailable("leader unreachable".into()));
                }
                target = leader;
            }
            other => return other,
        }
    }
    Err(Refused::Unavailable("too many leader hops".into()))
}

/// Proposes `command` at a member picked at random, following leader
/// hints, within [`OP_TIMEOUT`].
async fn propose(world: &WorldRef, command: Command) -> Outcome {
    match tokio::time::timeout(OP_TIMEOUT, propose_inner(world, command)).await {
        Ok(o) => o,
        Err(_) => Outcome::Info("timed out".into()),
    }
}

async fn propose_inner(world: &WorldRef, command: Command) -> Outcome {
    let mut target: NodeId = world.with(|w| {
        let ids = w.ids();
        ids[w.rng.pick(ids.len())]
    });
    for _ in 0..MAX_HOPS {
        let Some(raft) = world.with(|w| w.raft(target)) else {
            return Outcome::Fail(format!("member {target} is down"));
        };
        world.wait_unpaused(&[target]).await;
        let failed = world.with(|w| w.nodes.get(&target).and_then(|m| m.sync_failed));
        if let Some(error) = failed {
            return Outcome::Fail(format!("member {target}: storage failed ({error})"));
        }
        match raft.client_write(Proposal::one(command.clone())).await {
            Ok(resp) => {
                return match resp.data.0.into_iter().next() {
                    Some(a) => Outcome::Applied(Box::new(a)),
                    None => Outcome::Info("no reply for the command".into()),
                }
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => match f.leader_id {
                Some(leader) => target = leader,
                None => return Outcome::Fail("no leader known".into()),
            },
            Err(e) => return Outcome::Info(e.to_string()),
        }
    }
    Outcome::Fail("too many leader hops".into())
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// From run time `now` until run time `at` (zero if past).
fn until(at: u64, now: u64) -> Duration {
    Duration::from_nanos(at.saturating_sub(now))
}
