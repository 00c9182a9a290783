//! The `membership` fault: add a spare member or remove a voter, through
//! the public API (docs/api.md, "Cluster"), while the clients go on.
//!
//! - **add**: start a spare id with `--join`, as the same kind of process
//!   as the founders (`raftlock serve --join`, or `raftlock-jepsen member
//!   --join` in runs with member processes, which joins through the same
//!   code: `raftlock_node::join`). The process asks any member to add it
//!   (learner, caught up, then voter by joint consensus); the nemesis
//!   waits until the members list it as a voter and it is healthy. It
//!   then joins the roster, so clients and other faults (disk faults
//!   included) use it.
//! - **remove**: `DELETE /v1/cluster/members/{id}` of the leader (half
//!   the time) or a random voter, sent through another member and retried while the answer
//!   says nothing changed. Never below [`MIN_VOTERS`]. Once the removal has
//!   committed the id leaves the roster, but its process keeps running for
//!   the fault's hold time (its sticky clients keep talking to a member
//!   that is no longer one); then it is killed and its data directory
//!   deleted, so the id can only come back as a new member with an empty
//!   disk (`raftlock member remove N`, then add: the documented way to
//!   reuse an id).
//!
//! The seed picks add or remove and the target; both must be possible
//! (spares left, more than [`MIN_VOTERS`] voters) or the other is done.
//! The fault's interval spans the change and the hold. A change that does
//! not complete in time is counted as failed (and reported on stderr), and
//! the cluster is brought back to a known state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::api::{MembersView, Reply};
use crate::control::Cluster;
use crate::history::F;
use crate::workload::Ctx;

/// The membership nemesis never goes below this many voters.
pub const MIN_VOTERS: usize = 3;

/// How long an add may take (the leader gives a learner 60 s to catch up).
const ADD_LIMIT: Duration = Duration::from_secs(75);
/// How long a removal is retried.
const REMOVE_LIMIT: Duration = Duration::from_secs(30);
/// Between polls and retries.
const POLL: Duration = Duration::from_millis(200);

/// What was changed, and how the fault ends.
pub(super) enum Changed {
    /// A spare became a voter (or the add failed): nothing to undo.
    Added,
    /// A voter was removed: kill it and wipe its disk when the fault ends.
    Removed(u64),
}

/// One membership change: picks it, records the fault's start (the change
/// itself takes time and belongs to the fault's interval), performs it.
/// Returns the fault's name and what to undo; `None` when no change is
/// possible (no spare and only [`MIN_VOTERS`] voters).
pub(super) async fn change(cluster: &Cluster, ctx: &Ctx, pick: u64) -> Option<(String, Changed)> {
    let members = cluster.members();
    let spares = cluster.spares().await;
    let can_add = !spares.is_empty();
    let can_remove = members.len() > MIN_VOTERS;
    let mut rng = StdRng::seed_from_u64(pick);
    let add = match (can_add, can_remove) {
        (false, false) => return None,
        (true, false) => true,
        (false, true) => false,
        (true, true) => rng.random_bool(0.5),
    };
    if add {
        let id = spares[rng.random_range(0..spares.len())];
        let name = format!("membership add n{id}");
        ctx.log.nemesis(F::Start, &name);
        match add_member(cluster, id).await {
            Ok(()) => {
                cluster.roster.insert(id);
                cluster.changes.adds.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                cluster.changes.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("nemesis: {name} failed: {e}");
                abandon(cluster, id).await;
            }
        }
        Some((name, Changed::Added))
    } else {
        // Half the removals aim at the leader (it hands over as the
        // change commits), the others at a random member.
        let leader = cluster.leader().await;
        let random = members[rng.random_range(0..members.len())];
        let id = match leader {
            Some(l) if members.contains(&l) && rng.random_bool(0.5) => l,
            _ => random,
        };
        let role = if leader == Some(id) { " (leader)" } else { "" };
        let name = format!("membership remove n{id}{role}");
        ctx.log.nemesis(F::Start, &name);
        let via: Vec<u64> = members.iter().copied().filter(|&m| m != id).collect();
        match remove_member(cluster, id, &via, &mut rng).await {
            Ok(()) => {
                cluster.roster.remove(id);
                cluster.changes.removes.fetch_add(1, Ordering::Relaxed);
                Some((name, Changed::Removed(id)))
            }
            Err(e) => {
                // It may still be a member: it stays in the roster.
                cluster.changes.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("nemesis: {name} failed: {e}");
                Some((name, Changed::Added))
            }
        }
    }
}

/// Adds spare `id` as the nemesis does (start it with `--join`, wait
/// until it is a healthy voter) and puts it in the roster; an add that
/// fails is taken back ([`abandon`]) and its reason returned.
pub async fn add(cluster: &Cluster, id: u64) -> Result<(), String> {
    match add_member(cluster, id).await {
        Ok(()) => {
            cluster.roster.insert(id);
            Ok(())
        }
        Err(e) => {
            abandon(cluster, id).await;
            Err(e)
        }
    }
}

/// Removes member `id` as the nemesis does (through the other members),
/// takes it out of the roster, then kills it and wipes its data
/// directory, so that it can only come back through [`add`].
pub async fn remove(cluster: &Cluster, id: u64) -> Result<(), String> {
    let via: Vec<u64> = cluster.members().into_iter().filter(|&m| m != id).collect();
    let mut rng = StdRng::seed_from_u64(id);
    remove_member(cluster, id, &via, &mut rng).await?;
    cluster.roster.remove(id);
    cluster
        .retire(id)
        .await
        .map_err(|e| format!("wiping n{id}: {e}"))
}

/// Starts spare `id` with `--join` and waits until the other members list
/// it as a voter (no change in progress) and it answers healthy.
async fn add_member(cluster: &Cluster, id: u64) -> Result<(), String> {
    cluster
        .start_joining(id)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let deadline = tokio::time::Instant::now() + ADD_LIMIT;
    let mut last = String::from("no member answered");
    loop {
        if !cluster.running(id).await {
            return Err(format!(
                "the joining process exited (see node-{id}.log); last: {last}"
            ));
        }
        match settled_view(cluster, &cluster.members()).await {
            Some(view) if view.voters.contains(&id) => {
                if cluster.api.healthy(id).await {
                    return Ok(());
                }
                last = format!("a voter, not healthy yet: {view:?}");
            }
            Some(view) => last = format!("not a voter yet: {view:?}"),
            None => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "not a healthy voter after {} s; last: {last}",
                ADD_LIMIT.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// After a failed add: if it became a voter after all, keep it; otherwise
/// take it out of the membership (it may be a learner) and stop it.
async fn abandon(cluster: &Cluster, id: u64) {
    let others = cluster.members();
    if settled_view(cluster, &others)
        .await
        .is_some_and(|v| v.voters.contains(&id))
        && cluster.running(id).await
    {
        cluster.roster.insert(id);
        return;
    }
    let mut rng = StdRng::seed_from_u64(id);
    if let Err(e) = remove_member(cluster, id, &others, &mut rng).await {
        eprintln!("nemesis: taking n{id} out after a failed add: {e}");
    }
    if let Err(e) = cluster.retire(id).await {
        eprintln!("nemesis: wiping n{id}: {e}");
    }
}

/// Removes `id` through the members `via` (a random one per attempt):
/// retried while the answer says nothing changed or may have changed,
/// until the membership no longer lists it.
async fn remove_member(
    cluster: &Cluster,
    id: u64,
    via: &[u64],
    rng: &mut StdRng,
) -> Result<(), String> {
    if via.is_empty() {
        return Err("no other member to ask".into());
    }
    let deadline = tokio::time::Instant::now() + REMOVE_LIMIT;
    loop {
        let node = via[rng.random_range(0..via.len())];
        let last = match cluster.api.remove_member(node, id).await {
            Reply::Ok(view) if !view.members.contains(&id) => return Ok(()),
            Reply::Ok(view) => format!("n{node} answered {view:?}"),
            // An earlier attempt that timed out did it.
            Reply::Fail(e) if e.code == "not_found" => return Ok(()),
            Reply::Fail(e) if e.code == "last_voter" || e.code == "bad_request" => {
                return Err(format!("n{node}: {}", e.text()));
            }
            Reply::Fail(e) | Reply::Info(e) => format!("n{node}: {}", e.text()),
        };
        if tokio::time::Instant::now() >= deadline {
            // The last attempt may have committed after all.
            return match settled_view(cluster, via).await {
                Some(view) if !view.members.contains(&id) => Ok(()),
                _ => Err(format!(
                    "still a member after {} s; last: {last}",
                    REMOVE_LIMIT.as_secs()
                )),
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The membership as the first of `asked` that answers with no change in
/// progress reports it.
async fn settled_view(cluster: &Cluster, asked: &[u64]) -> Option<MembersView> {
    for &node in asked {
        if let Reply::Ok(view) = cluster.api.members(node).await {
            if !view.joint {
                return Some(view);
            }
        }
    }
    None
}
