//! The nemesis: runs the seeded fault [`schedule()`] against the cluster and
//! the clients, recording each fault as `start`/`stop` events named after
//! what was done (`kill n2`, `partition-leader n1 | n2 n3 (drop)`, …), and
//! heals everything when the run ends.
//!
//! One fault at a time: each step waits, applies its fault, holds it, and
//! undoes it. Faults aimed at "the leader" ask the members who leads when
//! the step runs (a random node if nobody knows). Every fault picks among
//! the members of the moment ([`Cluster::roster`]), which the
//! [`membership`] fault changes.

pub mod membership;
pub mod schedule;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tokio::sync::watch;

use crate::control::net::grouped;
use crate::control::Cluster;
use crate::history::F;
use crate::proxy::LinkState;
use crate::workload::Ctx;
pub use schedule::{schedule, Fault, Pacing, Step};

/// How an applied fault is undone.
#[derive(Debug, Clone, Copy)]
enum Undo {
    /// Start the killed node again.
    Restart(u64),
    /// SIGCONT the paused node.
    Resume(u64),
    /// Restore every link.
    Heal,
    /// Let the paused client go.
    Unpause(usize),
    /// Restore every link and end the long holds.
    HealAndLetGo,
    /// Kill the removed member and wipe its data directory.
    Retire(u64),
    /// Nothing (a member was added).
    Nothing,
    /// Give the member whose disk "filled up" room again: it rejoins by
    /// itself, in the same process.
    FreeSpace(u64),
    /// Make the member's log syncs quick again.
    QuickSync(u64),
    /// Remove the ballast from the member's data tmpfs: it must rejoin by
    /// itself, in the same process.
    RemoveBallast(u64),
}

/// An applied fault.
struct Applied {
    /// Its name in the history.
    name: String,
    /// How it ends.
    undo: Undo,
    /// How long it is held.
    hold: Duration,
    /// True when its `start` event is already recorded (a membership
    /// change records it before the change, which takes a while).
    started: bool,
}

/// How long `isolate-leader` waits for one of the leader's clients to
/// hold the lock before it cuts the links anyway.
const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Runs `steps` until they are done or `stop` turns true, then heals the
/// cluster (links, paused and killed nodes, paused clients). Returns the
/// number of faults injected.
pub async fn run(
    cluster: Arc<Cluster>,
    ctx: Arc<Ctx>,
    steps: Vec<Step>,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let mut injected = 0;
    for step in steps {
        if wait_or_stop(step.wait, &mut stop).await {
            break;
        }
        let Some(applied) = apply(&cluster, &ctx, &step).await else {
            continue;
        };
        injected += 1;
        if !applied.started {
            ctx.log.nemesis(F::Start, &applied.name);
        }
        let stopped = wait_or_stop(applied.hold, &mut stop).await;
        undo_fault(&cluster, &ctx, applied.undo).await;
        ctx.log.nemesis(F::Stop, &applied.name);
        if stopped {
            break;
        }
    }
    heal(&cluster, &ctx).await;
    injected
}

/// Undoes every fault there could be: links, paused clients, paused and
/// killed members; a process that is not a member (removed, or a failed
/// join) is stopped and wiped.
pub async fn heal(cluster: &Cluster, ctx: &Ctx) {
    cluster.net.heal();
    for client in &ctx.clients {
        client.pause.send_replace(false);
        client.long_hold.send_replace(false);
    }
    for &id in &cluster.ids {
        if !cluster.roster.contains(id) && cluster.running(id).await {
            if let Err(e) = cluster.retire(id).await {
                eprintln!("nemesis: wiping n{id} failed: {e}");
            }
        }
    }
    if let Err(e) = cluster.heal_processes().await {
        eprintln!("nemesis: restarting a node failed: {e}");
    }
}

/// True when stopped before `d` elapsed.
async fn wait_or_stop(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}

fn node_name(ids: &[u64]) -> String {
    ids.iter()
        .map(|i| format!("n{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Applies a step's fault; its name, how to undo it, and how long to hold
/// it. `None` when the fault does not apply (a client pause in a workload
/// without sessions, a membership change with nothing to change).
async fn apply(cluster: &Cluster, ctx: &Ctx, step: &Step) -> Option<Applied> {
    if step.fault == Fault::Membership {
        let (name, changed) = membership::change(cluster, ctx, step.pick).await?;
        let undo = match changed {
            membership::Changed::Added => Undo::Nothing,
            membership::Changed::Removed(id) => Undo::Retire(id),
        };
        return Some(Applied {
            name,
            undo,
            hold: step.hold,
            started: true,
        });
    }
    let ids = &cluster.members();
    let random_node = ids[(step.pick % ids.len() as u64) as usize];
    let leader = match step.fault {
        Fault::KillLeader | Fault::PauseLeader | Fault::PartitionLeader | Fault::IsolateLeader => {
            Some(cluster.leader().await.unwrap_or(random_node))
        }
        // A disk fault hits the leader half of the time.
        Fault::DiskFull | Fault::SlowFsync | Fault::DiskFill if step.pick.is_multiple_of(2) => {
            Some(cluster.leader().await.unwrap_or(random_node))
        }
        _ => None,
    };
    let target = leader.unwrap_or(random_node);
    let fault = step.fault;
    let mut rng = StdRng::seed_from_u64(step.pick);
    let mode = if step.pick.is_multiple_of(4) {
        (LinkState::Refuse, "refuse")
    } else {
        (LinkState::Drop, "drop")
    };
    let partition = |groups: Vec<Vec<u64>>, sep: &str| {
        cluster.net.apply(grouped(&groups), mode.0);
        let shape = groups
            .iter()
            .map(|g| node_name(g))
            .collect::<Vec<_>>()
            .join(sep);
        (
            format!("{fault} {shape} ({})", mode.1),
            Undo::Heal,
            step.hold,
        )
    };
    let applied = match fault {
        Fault::Kill | Fault::KillLeader => {
            cluster.kill(target).await;
            (
                format!("{fault} n{target}"),
                Undo::Restart(target),
                step.hold,
            )
        }
        Fault::Pause | Fault::PauseLeader => {
            if let Err(e) = cluster.pause(target).await {
                eprintln!("nemesis: SIGSTOP n{target} failed: {e}");
                return None;
            }
            (
                format!("{fault} n{target}"),
                Undo::Resume(target),
                step.hold,
            )
        }
        Fault::PartitionOne | Fault::PartitionLeader => {
            let rest: Vec<u64> = ids.iter().copied().filter(|&i| i != target).collect();
            partition(vec![vec![target], rest], " | ")
        }
        Fault::PartitionHalves => {
            let mut shuffled = ids.clone();
            shuffled.shuffle(&mut rng);
            let (minority, majority) = shuffled.split_at(ids.len() / 2);
            partition(vec![minority.to_vec(), majority.to_vec()], " | ")
        }
        Fault::PartitionBridge => {
            let mut shuffled = ids.clone();
            shuffled.shuffle(&mut rng);
            let mid = ids.len() / 2;
            partition(
                vec![shuffled[..=mid].to_vec(), shuffled[mid..].to_vec()],
                " ~ ",
            )
        }
        Fault::Delay => {
            let delay = Duration::from_millis(20 + step.pick % 180);
            cluster.net.set_all(LinkState::Up { delay });
            (
                format!("delay {}ms", delay.as_millis()),
                Undo::Heal,
                step.hold,
            )
        }
        Fault::ClientPause => {
            if ctx.clients.is_empty() || !ctx.settings.sessions {
                return None;
            }
            let holding: Vec<usize> = (0..ctx.clients.len())
                .filter(|&i| ctx.clients[i].holding.load(Ordering::Relaxed))
                .collect();
            let idx = if holding.is_empty() {
                (step.pick % ctx.clients.len() as u64) as usize
            } else {
                holding[(step.pick % holding.len() as u64) as usize]
            };
            ctx.clients[idx].pause.send_replace(true);
            // Long enough for the session to expire.
            let hold = step
                .hold
                .max(Duration::from_millis(ctx.settings.ttl_ms + 1_500));
            (format!("client-pause c{idx}"), Undo::Unpause(idx), hold)
        }
        Fault::IsolateLeader => {
            let name = isolate_leader(cluster, ctx, target, mode).await;
            // Long enough for the majority to elect, expire the holder's
            // session and grant the lock to another client.
            let hold = step
                .hold
                .max(Duration::from_millis(ctx.settings.ttl_ms + 3_000));
            (name, Undo::HealAndLetGo, hold)
        }
        Fault::DiskFull => {
            disk_fault(cluster, target, "/fault/disk-full", serde_json::json!({})).await?;
            (
                format!("{fault} n{target}"),
                Undo::FreeSpace(target),
                step.hold,
            )
        }
        Fault::SlowFsync => {
            let delay_ms = 100 + (step.pick >> 8) % 201;
            let body = serde_json::json!({ "delay_ms": delay_ms });
            disk_fault(cluster, target, "/fault/slow-fsync", body).await?;
            (
                format!("{fault} n{target} {delay_ms}ms"),
                Undo::QuickSync(target),
                step.hold,
            )
        }
        Fault::DiskFill => match cluster.fill_disk(target).await {
            Ok(bytes) => (
                format!("{fault} n{target} ({} MiB of ballast)", bytes >> 20),
                Undo::RemoveBallast(target),
                step.hold,
            ),
            Err(e) => {
                eprintln!("nemesis: filling n{target}'s disk failed: {e}");
                return None;
            }
        },
        Fault::Membership => return None,
    };
    let (name, undo, hold) = applied;
    Some(Applied {
        name,
        undo,
        hold,
        started: false,
    })
}

async fn undo_fault(cluster: &Cluster, ctx: &Ctx, undo: Undo) {
    match undo {
        Undo::Restart(id) => {
            if let Err(e) = cluster.restart(id).await {
                eprintln!("nemesis: restarting n{id} failed: {e}");
            }
        }
        Undo::Resume(id) => {
            if let Err(e) = cluster.resume(id).await {
                eprintln!("nemesis: SIGCONT n{id} failed: {e}");
            }
        }
        Undo::Heal => cluster.net.heal(),
        Undo::Unpause(idx) => {
            ctx.clients[idx].pause.send_replace(false);
        }
        Undo::HealAndLetGo => {
            cluster.net.heal();
            for client in &ctx.clients {
                client.long_hold.send_replace(false);
            }
        }
        Undo::Retire(id) => {
            if let Err(e) = cluster.retire(id).await {
                eprintln!("nemesis: wiping n{id} failed: {e}");
            }
        }
        Undo::Nothing => {}
        Undo::FreeSpace(id) => {
            let body = serde_json::json!({ "full": false });
            if disk_fault(cluster, id, "/fault/disk-full", body)
                .await
                .is_none()
            {
                // Not answered: the member may stay out of Raft, so restart
                // it (a new process opens its log afresh).
                if let Err(e) = cluster.reboot(id).await {
                    eprintln!("nemesis: restarting n{id} failed: {e}");
                }
            }
        }
        Undo::RemoveBallast(id) => {
            if let Err(e) = cluster.free_disk(id) {
                eprintln!("nemesis: removing n{id}'s ballast failed: {e}");
            }
        }
        Undo::QuickSync(id) => {
            let body = serde_json::json!({ "delay_ms": 0 });
            if disk_fault(cluster, id, "/fault/slow-fsync", body)
                .await
                .is_none()
            {
                // Not answered: the slow syncs may go on, so restart the
                // member (a new process syncs at full speed).
                if let Err(e) = cluster.reboot(id).await {
                    eprintln!("nemesis: restarting n{id} failed: {e}");
                }
            }
        }
    }
}

/// Sends a disk fault to member `id`'s fault hooks; `None` (and a line on
/// stderr) when it has none (a run without member processes) or did not
/// take it.
async fn disk_fault(cluster: &Cluster, id: u64, path: &str, body: serde_json::Value) -> Option<()> {
    let faults = cluster.faults.as_ref().filter(|f| id as usize <= f.len())?;
    match faults.inject(id, path, body).await {
        crate::api::Reply::Ok(()) => Some(()),
        other => {
            eprintln!("nemesis: {path} on n{id} not taken: {:?}", other.code());
            None
        }
    }
}

/// `isolate-leader`: the clients attached to `leader` (sticky or embedded
/// ones; with random routing, every client) are asked to keep the lock
/// once they hold it; once one of them holds it (or after
/// [`HOLDER_WAIT`]), every Raft link of `leader` is cut. Its clients keep
/// talking to it; the other members' clients keep theirs. A leader that
/// goes on renewing its clients' sessions from memory lets its
/// holder keep the lock while the majority expires the session and grants
/// the lock to another client. Returns the fault's name, which lists the
/// attached clients (`*` marks the holder).
async fn isolate_leader(
    cluster: &Cluster,
    ctx: &Ctx,
    leader: u64,
    (how, how_name): (LinkState, &str),
) -> String {
    let attached: Vec<usize> = (0..ctx.clients.len())
        .filter(|&i| ctx.clients[i].route.attached() == Some(leader))
        .collect();
    // Randomly routed clients belong to no member: any of them may hold.
    let random = ctx.clients.iter().all(|c| c.route.attached().is_none());
    let keepers: Vec<usize> = if random {
        (0..ctx.clients.len()).collect()
    } else {
        attached.clone()
    };
    for &i in &keepers {
        ctx.clients[i].long_hold.send_replace(true);
    }
    let holder = if ctx.settings.sessions {
        wait_for_holder(ctx, &keepers, HOLDER_WAIT).await
    } else {
        None
    };
    let rest: Vec<u64> = cluster
        .members()
        .into_iter()
        .filter(|&i| i != leader)
        .collect();
    cluster
        .net
        .apply(grouped(&[vec![leader], rest.clone()]), how);
    let clients = attached
        .iter()
        .map(|i| format!("c{i}{}", if holder == Some(*i) { "*" } else { "" }))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "isolate-leader n{leader} [{clients}] | {} ({how_name})",
        node_name(&rest)
    )
}

/// Waits until one of `who` holds the lock (at most `limit`).
async fn wait_for_holder(ctx: &Ctx, who: &[usize], limit: Duration) -> Option<usize> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // Registered before the check, so a change in between is not missed.
        let changed = ctx.holding_changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(&i) = who
            .iter()
            .find(|&&i| ctx.clients[i].holding.load(Ordering::Relaxed))
        {
            return Some(i);
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return None;
        }
    }
}
