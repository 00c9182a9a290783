//! The leader's session expiry, as the node runs it, on simulated time:
//! the node's own `SessionTracker` (its `Clock` seam driven by the
//! simulator's paused tokio clock) fed by the same apply hooks, the same
//! take-over on election (deadlines set, sessions checkpointed), the same
//! expiry proposals, and keepalives answered by the node's rule: renew a
//! checkpointed session through the log, then wait for the node's
//! `QuorumClock` to confirm the leadership after the keepalive arrived,
//! then push the deadline.
//!
//! What is the simulator's own: the glue the node has in `leader.rs`,
//! `replica/keepalive.rs` and `state_machine.rs` around these pieces,
//! reduced to what decides a deadline (no metrics, no batching of
//! keepalives), and polling where the node waits on a `watch` (whose
//! wake-up order tokio draws outside the seed).

use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use raftlock_core::{Applied, Command, Effects, SessionId, StateMachine};
use raftlock_node::simulation::{Clock, KeepaliveRefused, Leadership, SessionTracker};
use raftlock_node::{NodeId, Proposal, Raft};
use tokio::time::Instant;

use crate::world::WorldRef;

/// The simulator's clock for the tracker: tokio's, which the run pauses
/// and advances (simulated time).
pub struct SimClock;

impl Clock for SimClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A fresh tracker on simulated time.
pub fn new_tracker() -> Arc<SessionTracker> {
    Arc::new(SessionTracker::new(Box::new(SimClock)))
}

/// How long a leader waits for a quorum to confirm it before a keepalive
/// is refused: the node's `confirm_wait` (4 heartbeats, at least the
/// minimum election timeout).
const CONFIRM_WAIT: Duration = Duration::from_millis(200);
/// How long a leader-side proposal (checkpoint, renewal, expiry) may take.
const WRITE_WAIT: Duration = Duration::from_millis(1_000);
/// Pause before a failed expiry is proposed again (the node's).
const EXPIRE_RETRY: Duration = Duration::from_millis(100);
/// How often the leadership watch and the confirmation look again.
const POLL: Duration = Duration::from_millis(5);

/// Sessions with a checkpoint in `state` (the node's `checkpointed`).
pub fn checkpointed(state: &StateMachine) -> Vec<SessionId> {
    state
        .session_leases()
        .filter(|l| l.checkpoint_remaining_ms.is_some())
        .map(|l| l.id)
        .collect()
}

/// A state loaded from a snapshot (start, or installed from the leader):
/// the node's hooks for it.
pub fn on_loaded(tracker: &SessionTracker, state: &StateMachine) {
    tracker.on_checkpointed(checkpointed(state));
    tracker.resync_hold_offs(&state.held_off());
}

/// What the node's `Shared::publish` tells the tracker after a command.
pub fn publish(tracker: &SessionTracker, command: &Command, applied: &Applied) {
    if applied.result.is_ok() {
        match command {
            Command::OpenSession { id, ttl_ms, .. } | Command::OpenSessionAs { id, ttl_ms, .. } => {
                tracker.on_opened(*id, *ttl_ms)
            }
            Command::CheckpointSessions { sessions } => {
                tracker.on_checkpointed(sessions.iter().map(|(id, _)| *id))
            }
            Command::RenewSessions { ids } => tracker.on_renewed(ids.iter().copied()),
            _ => {}
        }
    }
    let effects = &applied.effects;
    if *effects == Effects::default() {
        return;
    }
    tracker.on_ended(effects.ended_sessions.iter().copied());
    tracker.on_held_off(&effects.held_off);
    tracker.on_unowned_deleted(
        effects
            .deleted
            .iter()
            .filter(|d| d.owner.is_none())
            .map(|d| d.path.as_str()),
    );
}

fn parts(world: &WorldRef, id: NodeId) -> Option<(Raft, Arc<SessionTracker>)> {
    world.with(|w| {
        let m = w.nodes.get(&id)?;
        Some((m.raft.clone()?, m.tracker.clone()?))
    })
}

/// Member `id`'s leadership watch (the node's `watch_leadership`): takes
/// over every session deadline when it becomes leader of a term, hands
/// them back when it stops leading.
pub async fn watch_leadership(world: WorldRef, id: NodeId) {
    let mut leading_term = None;
    loop {
        let Some((raft, tracker)) = parts(&world, id) else {
            return;
        };
        let (state, term) = {
            let m = raft.metrics();
            let m = m.borrow();
            (m.state, m.current_term)
        };
        let leader_now = state == ServerState::Leader;
        if leader_now && leading_term != Some(term) {
            leading_term = Some(term);
            if take_over(&world, id, &raft, &tracker).await.is_err() {
                tracker.step_down();
                leading_term = None;
            }
        } else if !leader_now && leading_term.is_some() {
            leading_term = None;
            tracker.step_down();
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The node's `take_over_sessions`: everything committed applied, then
/// every deadline set and the unchecked sessions checkpointed.
async fn take_over(
    world: &WorldRef,
    id: NodeId,
    raft: &Raft,
    tracker: &SessionTracker,
) -> Result<(), ()> {
    let caught_up = async {
        let read = raft.get_read_log_id().await.map_err(drop)?;
        let index = read.0.map_or(0, |l| l.index);
        crate::workload::wait_applied(world, id, index).await
    };
    tokio::time::timeout(WRITE_WAIT, caught_up)
        .await
        .map_err(drop)??;
    let to_checkpoint = world.with(|w| {
        let m = w.nodes.get(&id).ok_or(())?;
        let state = &m.sm.state;
        let to_checkpoint = tracker.become_leader(state.session_leases());
        tracker.take_over_hold_offs(&state.held_off());
        Ok::<_, ()>(to_checkpoint)
    })?;
    if !to_checkpoint.is_empty() {
        let command = Command::CheckpointSessions {
            sessions: to_checkpoint,
        };
        write(raft, command).await.map_err(drop)?;
    }
    Ok(())
}

async fn write(raft: &Raft, command: Command) -> Result<Applied, String> {
    let proposal = Proposal::one(command);
    match tokio::time::timeout(WRITE_WAIT, raft.client_write(proposal)).await {
        Ok(Ok(resp)) => resp
            .data
            .0
            .into_iter()
            .next()
            .ok_or_else(|| "no reply".to_string()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// Member `id`'s expiry task (the node's `expire_sessions`): proposes the
/// expiry of every session past its deadline, retried while it leads.
pub async fn expire_sessions(world: WorldRef, id: NodeId) {
    loop {
        let Some((raft, tracker)) = parts(&world, id) else {
            return;
        };
        let (due, next_expiry) = tracker.take_due();
        if !due.is_empty() {
            let proposal = Proposal(
                due.iter()
                    .map(|id| Command::ExpireSession { id: *id })
                    .collect(),
            );
            let written = tokio::time::timeout(WRITE_WAIT, raft.client_write(proposal)).await;
            if !matches!(written, Ok(Ok(_))) {
                tracker.retry_expiry(&due, EXPIRE_RETRY);
            }
            continue;
        }
        let (ended, next_end) = tracker.take_due_hold_offs();
        if !ended.is_empty() {
            let command = Command::EndLockDelays {
                nodes: ended.clone(),
            };
            if write(&raft, command).await.is_err() {
                tracker.retry_hold_offs(&ended, EXPIRE_RETRY);
            }
            continue;
        }
        let next = match (next_expiry, next_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let at = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            _ = tracker.changed() => {}
            _ = tokio::time::sleep_until(at) => {}
        }
    }
}

/// Why a keepalive at a member was not acknowledged.
#[derive(Debug)]
pub enum Refused {
    /// The member does not lead (or has not taken over deadlines yet);
    /// the hint is whom it believes leads.
    NotLeader(Option<NodeId>),
    /// The session is gone, or its expiry is in flight.
    NotFound,
    /// Nobody can say (a renewal that did not commit, a member that
    /// stopped): the client tries again.
    Unavailable(String),
}

/// A keepalive of `session` arriving at member `id` now (the node's
/// `keepalive_many_here` for one session); the session's TTL when
/// acknowledged.
pub async fn keepalive_at(
    world: &WorldRef,
    id: NodeId,
    session: SessionId,
) -> Result<u64, Refused> {
    let arrived = Instant::now();
    let Some((raft, tracker)) = parts(world, id) else {
        return Err(Refused::Unavailable(format!("member {id} is down")));
    };
    if !tracker.is_leading() {
        return Err(Refused::NotLeader(raft.metrics().borrow().current_leader));
    }
    let lease = world.with(|w| {
        w.nodes
            .get(&id)
            .and_then(|m| m.sm.state.session_lease(session))
    });
    let Some(lease) = lease else {
        return Err(Refused::NotFound);
    };
    if lease.checkpoint_remaining_ms.is_some() {
        let renewed = write(&raft, Command::RenewSessions { ids: vec![session] }).await;
        match renewed.map(|a| a.result) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Refused::Unavailable(e.to_string())),
            Err(e) => return Err(Refused::Unavailable(e)),
        }
    }
    confirm_leadership(world, id, &raft, arrived).await?;
    match tracker.keepalive(session, lease.ttl_ms) {
        Ok(()) => Ok(lease.ttl_ms),
        Err(KeepaliveRefused::NotLeading) => Err(Refused::NotLeader(None)),
        Err(KeepaliveRefused::Ending) => Err(Refused::NotFound),
    }
}

/// The node's `confirm_leadership`: waits until a quorum accepted this
/// member's leadership through requests sent at or after `since`.
async fn confirm_leadership(
    world: &WorldRef,
    id: NodeId,
    raft: &Raft,
    since: Instant,
) -> Result<(), Refused> {
    let deadline = since + CONFIRM_WAIT;
    loop {
        let confirmed = {
            let metrics = raft.metrics();
            let m = metrics.borrow();
            if m.state != ServerState::Leader {
                return Err(Refused::NotLeader(m.current_leader));
            }
            let leadership = Leadership {
                me: id,
                vote: &m.vote,
                membership: m.membership_config.membership(),
            };
            confirmed_at(world, id, &leadership)
        };
        if confirmed.is_some_and(|t| t >= since) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Refused::NotLeader(None));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// When a quorum last confirmed `leadership`: the node's rule, or with
/// the injected defect one acknowledgement short of a majority.
fn confirmed_at(world: &WorldRef, id: NodeId, leadership: &Leadership<'_>) -> Option<Instant> {
    let now = Instant::now();
    if cfg!(feature = "inject-keepalive-quorum-off-by-one") {
        return world.with(|w| {
            let acks = &w.nodes.get(&id)?.acks;
            let heard = |peer: &NodeId| -> Option<Instant> {
                if *peer == id {
                    return Some(now);
                }
                acks.get(peer)
                    .filter(|(vote, _)| vote == leadership.vote)
                    .map(|(_, sent)| *sent)
            };
            leadership
                .membership
                .get_joint_config()
                .iter()
                .map(|voters| {
                    let mut times: Vec<Instant> = voters.iter().filter_map(heard).collect();
                    // The defect: `len / 2`, not `len / 2 + 1`.
                    let short = (voters.len() / 2).max(1);
                    times.sort_unstable_by(|a, b| b.cmp(a));
                    times.get(short - 1).copied()
                })
                .try_fold(None::<Instant>, |earliest, t| {
                    let t = t?;
                    Some(Some(earliest.map_or(t, |e| e.min(t))))
                })
                .flatten()
        });
    }
    let quorum = world.with(|w| w.nodes.get(&id).and_then(|m| m.quorum.clone()))?;
    quorum.confirmed_at(leadership, now)
}
