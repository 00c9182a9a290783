//! Leader-only background work: set every session deadline on election
//! (with lease checkpoints, see `tracker`), and expire sessions whose
//! deadline passed by proposing `ExpireSession` through Raft. Keepalives,
//! the other half of a session's life at the leader, are answered in
//! `replica/keepalive.rs`.

use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use raftlock_core::{Command, SessionId};

use crate::raft::typ::{Proposal, Reply};
use crate::replica::Replica;

/// Largest checkpoint entry (sessions per command), so a leader of 100,000
/// sessions does not write one multi-megabyte entry.
const CHECKPOINT_CHUNK: usize = 5_000;
/// Expiries per log entry (each may delete many nodes).
const EXPIRE_CHUNK: usize = 1_000;
/// Pause before a failed expiry proposal is tried again (while leading).
const EXPIRE_RETRY: Duration = Duration::from_millis(100);

pub(crate) async fn watch_leadership(replica: Arc<Replica>) {
    let mut metrics = replica.raft.metrics();
    let mut leading_term = None;
    let mut known_leader = None;
    loop {
        let (state, term, leader) = {
            let m = metrics.borrow_and_update();
            (m.state, m.current_term, m.current_leader)
        };
        if leader.is_some() && leader != known_leader {
            replica.shared.stats.leader_changed();
        }
        if leader.is_some() {
            known_leader = leader;
        }
        let leader_now = state == ServerState::Leader;
        if leader_now && leading_term != Some(term) {
            leading_term = Some(term);
            if let Err(e) = take_over_sessions(&replica).await {
                tracing::warn!("could not take over sessions as leader: {e}");
                replica.shared.tracker.step_down();
                leading_term = None;
            }
        } else if !leader_now && leading_term.is_some() {
            leading_term = None;
            replica.shared.tracker.step_down();
            tracing::info!(term, "lost leadership; session deadlines handed over");
        }
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { return },
            _ = replica.shutdown.stopped() => return,
        }
    }
}

async fn take_over_sessions(replica: &Replica) -> Result<(), String> {
    // Applied everything committed before this term, so the session list is
    // complete. Bounded: this task must stay free to notice a step-down.
    tokio::time::timeout(
        replica.leader_wait(),
        replica.raft.current().ensure_linearizable(),
    )
    .await
    .map_err(|_| "no quorum confirmed the new leadership in time".to_string())?
    .map_err(|e| e.to_string())?;
    let to_checkpoint = {
        // Under the read lock, so no session opens between reading the
        // leases and the tracker starting to track new ones.
        let state = replica.shared.read();
        let tracker = &replica.shared.tracker;
        let to_checkpoint = tracker.become_leader(state.session_leases());
        tracker.take_over_hold_offs(&state.held_off());
        to_checkpoint
    };
    tracing::info!(
        sessions = replica.shared.tracker.tracked(),
        checkpoints = to_checkpoint.len(),
        held_off = replica.shared.tracker.hold_offs_scheduled(),
        "became leader; tracking session deadlines and lock-delays"
    );
    for chunk in to_checkpoint.chunks(CHECKPOINT_CHUNK) {
        replica
            .write_one_here(Command::CheckpointSessions {
                sessions: chunk.to_vec(),
            })
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Proposes the expiry of every session past its deadline, and the end of
/// every lock-delay that is over (`hold_offs`). Each proposal is bounded
/// (`write_here`), so one write that cannot commit delays the others by at
/// most the leader wait; a failed one is retried while this node leads.
pub(crate) async fn expire_sessions(replica: Arc<Replica>) {
    let tracker = replica.shared.tracker.clone();
    loop {
        let (due, next_expiry) = tracker.take_due();
        // Sessions due together expire in one log entry.
        for chunk in due.chunks(EXPIRE_CHUNK) {
            expire(&replica, chunk).await;
        }
        let (ended, next_end) = tracker.take_due_hold_offs();
        for chunk in ended.chunks(EXPIRE_CHUNK) {
            end_lock_delays(&replica, chunk).await;
        }
        if !due.is_empty() || !ended.is_empty() {
            continue;
        }
        let next = match (next_expiry, next_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = match next {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(Duration::from_secs(3600)),
        };
        tokio::select! {
            _ = sleep => {}
            _ = tracker.changed() => {}
            _ = replica.shutdown.stopped() => return,
        }
    }
}

/// Hands on held-off locks whose delay is over: each lock's next in line
/// is granted and woken, as after a release.
async fn end_lock_delays(replica: &Replica, nodes: &[String]) {
    let proposal = Proposal(vec![Command::EndLockDelays {
        nodes: nodes.to_vec(),
    }]);
    match replica.write_here(proposal).await {
        Ok(_) => tracing::info!(locks = nodes.len(), "lock-delays over; locks handed on"),
        Err(e) => {
            tracing::warn!(
                locks = nodes.len(),
                "could not end lock-delays (retried while this node leads): {e}"
            );
            replica.shared.tracker.retry_hold_offs(nodes, EXPIRE_RETRY);
        }
    }
}

async fn expire(replica: &Replica, ids: &[SessionId]) {
    let proposal = Proposal(
        ids.iter()
            .map(|id| Command::ExpireSession { id: *id })
            .collect(),
    );
    match replica.write_here(proposal).await {
        Ok((_, Reply(results))) => {
            for (id, applied) in ids.iter().zip(results) {
                match applied.result {
                    Ok(_) => {
                        replica.shared.stats.expired(1);
                        tracing::info!(
                            session = %id,
                            "session expired (no keepalive within its TTL)"
                        );
                    }
                    Err(e) => tracing::warn!(session = %id, "could not expire session: {e}"),
                }
            }
        }
        Err(e) => {
            tracing::warn!(
                sessions = ids.len(),
                "could not expire sessions (retried while this node leads): {e}"
            );
            replica.shared.tracker.retry_expiry(ids, EXPIRE_RETRY);
        }
    }
}
