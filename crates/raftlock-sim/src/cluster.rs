//! Starting, crashing and restarting members, and watching who leads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use raftlock_node::simulation::QuorumClock;
use raftlock_node::{Member as RaftMember, NodeId, Raft};

use crate::net::SimNetworkFactory;
use crate::store::{sync_worker, SimLogStore, SimStateMachine, SmState};
use crate::world::WorldRef;

/// Heartbeat interval, as the node's default.
pub const HEARTBEAT_MS: u64 = 50;

/// Starts member `id` over its disk as it is now (first start, or after a
/// crash): a fresh state machine from its durable snapshot, an election
/// timeout drawn from the seed.
pub async fn start_member(world: &WorldRef, id: NodeId) -> Result<(), String> {
    let (incarnation, timeout, epoch) = world.with(|w| {
        // openraft draws each election timeout from `rand::thread_rng`, out
        // of the seed's reach: a one-millisecond range leaves it nothing to
        // draw, and the seed picks the member's timeout instead.
        let timeout = w.rng.range(150, 300);
        let m = w.nodes.get_mut(&id).ok_or("no such member")?;
        m.incarnation += 1;
        m.sync_failed = None;
        m.sm = SmState::restore(m.disk.snapshot.as_ref())?;
        // The node's in-memory session state starts afresh, as after a
        // restart, from what the snapshot holds (the log replays the rest
        // through the apply hooks).
        let tracker = crate::sessions::new_tracker();
        crate::sessions::on_loaded(&tracker, &m.sm.state);
        m.tracker = Some(tracker);
        m.quorum = Some(Arc::new(QuorumClock::default()));
        m.acks.clear();
        Ok::<_, String>((m.incarnation, timeout, m.disk.epoch()))
    })?;
    let config = openraft::Config {
        cluster_name: "raftlock-sim".into(),
        heartbeat_interval: HEARTBEAT_MS,
        election_timeout_min: timeout,
        election_timeout_max: timeout + 1,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(100),
        // A short tail, so lagging members are sent snapshots.
        max_in_snapshot_log_to_keep: 10,
        ..Default::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    let (log_store, syncs) = SimLogStore::open(world.clone(), id)?;
    let worker = tokio::spawn(sync_worker(
        world.clone(),
        id,
        epoch,
        log_store.log(),
        syncs,
    ));
    let network = SimNetworkFactory {
        world: world.clone(),
        from: id,
        incarnation,
    };
    let sm = SimStateMachine::new(world.clone(), id);
    let raft = Raft::new(id, Arc::new(config), network, log_store, sm)
        .await
        .map_err(|e| e.to_string())?;
    world.with(|w| {
        if let Some(m) = w.nodes.get_mut(&id) {
            m.raft = Some(raft);
            m.tasks.push(worker.abort_handle());
        }
    });
    // The leader's session expiry runs where there are sessions to
    // expire: a run without lock clients is left as it was.
    if world.with(|w| w.lock_clients > 0) {
        let leadership = tokio::spawn(crate::sessions::watch_leadership(world.clone(), id));
        let expiry = tokio::spawn(crate::sessions::expire_sessions(world.clone(), id));
        world.with(|w| {
            if let Some(m) = w.nodes.get_mut(&id) {
                m.tasks.push(leadership.abort_handle());
                m.tasks.push(expiry.abort_handle());
            }
        });
    }
    Ok(())
}

/// Founds the cluster from member `founder`.
pub async fn found(world: &WorldRef, founder: NodeId) -> Result<(), String> {
    let (raft, members) = world.with(|w| {
        let members: BTreeMap<NodeId, RaftMember> = w
            .ids()
            .into_iter()
            .map(|id| {
                (
                    id,
                    RaftMember::new(format!("sim-{id}"), format!("sim-{id}")),
                )
            })
            .collect();
        (w.raft(founder), members)
    });
    let raft = raft.ok_or("founder is down")?;
    raft.initialize(members).await.map_err(|e| e.to_string())
}

/// Crashes member `id` as a power loss would: its process is gone and its
/// disk keeps only what was synced.
pub async fn crash_member(world: &WorldRef, id: NodeId) {
    crash_member_torn(world, id, None).await
}

/// Crashes member `id`; with `torn = Some((kept, per_mille))`, in the
/// middle of writing back (see `Disk::crash_torn`).
pub async fn crash_member_torn(world: &WorldRef, id: NodeId, torn: Option<(usize, u64)>) {
    let raft = world.with(|w| {
        let m = w.nodes.get_mut(&id)?;
        match torn {
            Some((kept, per_mille)) => m.disk.crash_torn(kept, per_mille),
            None => m.disk.crash(),
        }
        w.check_committed_durable(id);
        // Reads waiting on its state machine end: their sender is dropped.
        w.applied_waiters.retain(|(n, _, _)| *n != id);
        let m = w.nodes.get_mut(&id)?;
        for t in m.tasks.drain(..) {
            t.abort();
        }
        m.tracker = None;
        m.quorum = None;
        m.raft.take()
    });
    if let Some(raft) = raft {
        // Its stores are stale now (the disk epoch moved), so nothing it
        // still does reaches the disk; this only stops its tasks.
        let _ = raft.shutdown().await;
    }
}

/// True while member `id` runs.
pub fn is_up(world: &WorldRef, id: NodeId) -> bool {
    world.with(|w| w.raft(id).is_some())
}

/// The member that currently says it leads, if any.
pub fn leader(world: &WorldRef) -> Option<NodeId> {
    world.with(|w| {
        w.ids().into_iter().find(|&id| {
            w.raft(id)
                .is_some_and(|r| r.metrics().borrow().state == ServerState::Leader)
        })
    })
}

/// Samples every member's metrics each `every` and checks that every
/// leader leads under its own committed vote and no two members under one
/// leader id.
pub async fn watch_leaders(world: WorldRef, every: Duration) {
    loop {
        world.with(|w| {
            let seen: Vec<(NodeId, openraft::Vote<NodeId>)> = w
                .ids()
                .into_iter()
                .filter_map(|id| {
                    let raft = w.raft(id)?;
                    let m = raft.metrics().borrow().clone();
                    (m.state == ServerState::Leader).then_some((id, m.vote))
                })
                .collect();
            for (id, vote) in seen {
                if let Some(v) = w.oracle.on_leader(id, vote) {
                    w.violation(v);
                }
            }
        });
        tokio::time::sleep(every).await;
    }
}
