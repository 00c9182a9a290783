//! The nemesis: faults drawn from the seed, one after another, each
//! recorded as `start`/`stop` events in the history.

use std::collections::BTreeSet;
use std::time::Duration;

use raftlock_jepsen::{Event, EventType, Process, Value, F};
use raftlock_node::NodeId;

use crate::cluster::{crash_member, crash_member_torn, is_up, leader, start_member};
use crate::world::WorldRef;

/// The faults the nemesis draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The members split in two groups, both ways.
    Partition,
    /// One member's messages to another are lost, not the way back.
    OneWay,
    /// The leader is cut off from everyone, both ways.
    IsolateLeader,
    /// Loss, duplication and extra delay (and so reordering) on every link.
    Flaky,
    /// One member crashes, losing unsynced writes, and restarts later.
    Crash,
    /// Every member loses power at once, and all restart.
    PowerLoss,
    /// One member's log syncs take much longer.
    SlowDisk,
    /// One member's log syncs (and vote syncs) fail with `EIO` or
    /// `ENOSPC`: nothing of a failed sync is durable or acknowledged, every
    /// later sync of that incarnation fails too, and openraft stops the
    /// member at the storage error; it restarts from its disk when the
    /// fault ends, as raftlock's member recovers after a failed barrier.
    DiskError,
    /// One member crashes in the middle of writing back: a prefix of its
    /// unsynced writes reached the disk, the next one is torn, and the
    /// torn record is cut off when it reopens.
    TornCrash,
    /// A voter is demoted to learner (joint consensus through openraft's
    /// `change_membership`), and promoted back when the fault ends.
    Membership,
    /// One member's process is paused (as by SIGSTOP): its messages and
    /// syncs wait, and arrive late when it resumes. Its timers still run,
    /// so it may campaign as soon as it resumes, as a resumed process does.
    Pause,
}

impl Fault {
    /// The fault's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Partition => "partition",
            Fault::OneWay => "one-way",
            Fault::IsolateLeader => "isolate-leader",
            Fault::Flaky => "flaky",
            Fault::Crash => "crash",
            Fault::PowerLoss => "power-loss",
            Fault::SlowDisk => "slow-disk",
            Fault::DiskError => "disk-error",
            Fault::TornCrash => "torn-crash",
            Fault::Membership => "membership",
            Fault::Pause => "pause",
        }
    }

    /// Parses a comma-separated list of names; `all` is every fault.
    pub fn parse_list(list: &str) -> Result<Vec<Fault>, String> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "all" {
                out.extend(Fault::ALL);
                continue;
            }
            match Fault::ALL.into_iter().find(|f| f.name() == name) {
                Some(f) => out.push(f),
                None => {
                    let known: Vec<_> = Fault::ALL.iter().map(|f| f.name()).collect();
                    return Err(format!(
                        "unknown fault {name:?} (all, {})",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Every fault.
    pub const ALL: [Fault; 11] = [
        Fault::Partition,
        Fault::OneWay,
        Fault::IsolateLeader,
        Fault::Flaky,
        Fault::Crash,
        Fault::PowerLoss,
        Fault::SlowDisk,
        Fault::Membership,
        Fault::Pause,
        Fault::DiskError,
        Fault::TornCrash,
    ];
}

fn note(world: &WorldRef, f: F, what: &str) {
    world.with(|w| {
        let event = Event::new(
            Process::Nemesis,
            EventType::Info,
            f,
            Value::Str(what.into()),
        );
        if w.lock_clients > 0 {
            w.record_lock(event.clone());
        }
        w.record(event)
    });
}

/// Injects faults until the world stops, then heals everything and
/// restarts every crashed member.
pub async fn nemesis(world: WorldRef, faults: Vec<Fault>, until: Duration) {
    let end = tokio::time::Instant::now() + until;
    if faults.is_empty() {
        tokio::time::sleep_until(end).await;
    }
    while tokio::time::Instant::now() < end && !faults.is_empty() {
        let (fault, quiet, length) = world.with(|w| {
            (
                faults[w.rng.pick(faults.len())],
                Duration::from_millis(w.rng.range(100, 800)),
                Duration::from_millis(w.rng.range(200, 2_000)),
            )
        });
        tokio::time::sleep(quiet).await;
        let what = inject(&world, fault).await;
        let Some(what) = what else { continue };
        world.with(|w| w.faults += 1);
        note(&world, F::Start, &what);
        tokio::time::sleep(length).await;
        heal(&world).await;
        note(&world, F::Stop, &what);
    }
    heal(&world).await;
}

/// Starts `fault`; returns its description, or `None` if it does not
/// apply now (no leader to isolate).
async fn inject(world: &WorldRef, fault: Fault) -> Option<String> {
    let ids = world.with(|w| w.ids());
    match fault {
        Fault::Partition => world.with(|w| {
            let mut side: Vec<NodeId> = ids.iter().copied().filter(|_| w.rng.chance(0.5)).collect();
            if side.is_empty() || side.len() == ids.len() {
                side = vec![ids[w.rng.pick(ids.len())]];
            }
            for &a in &side {
                for &b in ids.iter().filter(|b| !side.contains(b)) {
                    w.links.cut.insert((a, b));
                    w.links.cut.insert((b, a));
                }
            }
            Some(format!("partition {side:?} from the rest"))
        }),
        Fault::OneWay => world.with(|w| {
            let a = ids[w.rng.pick(ids.len())];
            let others: Vec<_> = ids.iter().copied().filter(|&b| b != a).collect();
            let b = others[w.rng.pick(others.len())];
            w.links.cut.insert((a, b));
            Some(format!("cut {a} -> {b} one way"))
        }),
        Fault::IsolateLeader => {
            let l = leader(world)?;
            world.with(|w| {
                for &b in ids.iter().filter(|&&b| b != l) {
                    w.links.cut.insert((l, b));
                    w.links.cut.insert((b, l));
                }
            });
            Some(format!("isolate leader {l}"))
        }
        Fault::Flaky => world.with(|w| {
            w.links.loss = w.rng.range(5, 30) as f64 / 100.0;
            w.links.duplicate = w.rng.range(5, 30) as f64 / 100.0;
            w.links.extra_delay_ms = w.rng.range(5, 60);
            Some(format!(
                "flaky links: loss {:.2} duplicate {:.2} delay +0..{}ms",
                w.links.loss, w.links.duplicate, w.links.extra_delay_ms
            ))
        }),
        Fault::Crash => {
            let id = world.with(|w| ids[w.rng.pick(ids.len())]);
            crash_member(world, id).await;
            Some(format!("crash {id}"))
        }
        Fault::PowerLoss => {
            for &id in &ids {
                crash_member(world, id).await;
            }
            Some("power loss, every member".into())
        }
        Fault::SlowDisk => world.with(|w| {
            let id = ids[w.rng.pick(ids.len())];
            let ms = w.rng.range(20, 300);
            if let Some(m) = w.nodes.get_mut(&id) {
                m.slow_sync_ms = ms;
            }
            Some(format!("slow disk on {id}: +{ms}ms per sync"))
        }),
        Fault::DiskError => world.with(|w| {
            let id = ids[w.rng.pick(ids.len())];
            let error = if w.rng.chance(0.5) { "EIO" } else { "ENOSPC" };
            if let Some(m) = w.nodes.get_mut(&id) {
                m.sync_error = Some(error);
            }
            Some(format!("syncs fail with {error} on {id}"))
        }),
        Fault::TornCrash => {
            let (id, kept, per_mille) = world.with(|w| {
                (
                    ids[w.rng.pick(ids.len())],
                    w.rng.pick(4),
                    w.rng.range(0, 1000),
                )
            });
            crash_member_torn(world, id, Some((kept, per_mille))).await;
            Some(format!(
                "crash {id} mid-write-back: {kept} unsynced write(s) kept, {per_mille}‰ of the next"
            ))
        }
        Fault::Pause => world.with(|w| {
            let id = ids[w.rng.pick(ids.len())];
            w.paused.insert(id);
            Some(format!("pause {id}"))
        }),
        Fault::Membership => {
            let l = leader(world)?;
            let raft = world.with(|w| w.raft(l))?;
            let out = world.with(|w| ids[w.rng.pick(ids.len())]);
            let voters: BTreeSet<NodeId> = ids.iter().copied().filter(|&v| v != out).collect();
            let change = raft.change_membership(voters, true);
            match tokio::time::timeout(MEMBERSHIP_WAIT, change).await {
                Ok(Ok(_)) => Some(format!("demote {out} to learner (leader {l})")),
                // Not committed (yet): the change may still take effect,
                // and the heal restores the full membership either way.
                _ => Some(format!(
                    "demote {out} to learner (leader {l}), not confirmed"
                )),
            }
        }
    }
}

/// How long a membership change may take before the nemesis moves on.
const MEMBERSHIP_WAIT: Duration = Duration::from_secs(2);

/// Makes every member a voter again, through whoever leads; a healed
/// cluster that cannot do so within a few seconds is a violation.
async fn restore_membership(world: &WorldRef) {
    let all: BTreeSet<NodeId> = world.with(|w| w.ids().into_iter().collect());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        let raft = leader(world).and_then(|l| world.with(|w| w.raft(l)));
        if let Some(raft) = raft {
            let voters: BTreeSet<NodeId> = raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .voter_ids()
                .collect();
            if voters == all {
                return;
            }
            let change = raft.change_membership(all.clone(), true);
            if let Ok(Ok(_)) = tokio::time::timeout(MEMBERSHIP_WAIT, change).await {
                continue;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    world.with(|w| w.violation("liveness: the full membership was not restored".into()));
}

/// Ends every fault: links whole again, disks at speed, crashed members
/// restarted.
pub async fn heal(world: &WorldRef) {
    let (ids, failed) = world.with(|w| {
        w.links = Default::default();
        w.resume_all();
        for m in w.nodes.values_mut() {
            m.slow_sync_ms = 0;
            m.sync_error = None;
        }
        let failed: Vec<NodeId> = w
            .nodes
            .iter()
            .filter(|(_, m)| m.sync_failed.is_some() && m.raft.is_some())
            .map(|(&id, _)| id)
            .collect();
        (w.ids(), failed)
    });
    // A member whose sync failed left the Raft group: it restarts from
    // what its disk made durable.
    for id in failed {
        crash_member(world, id).await;
    }
    for id in ids {
        if !is_up(world, id) {
            if let Err(e) = start_member(world, id).await {
                world.with(|w| w.violation(format!("member {id} cannot restart: {e}")));
            }
        }
    }
    restore_membership(world).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_parse_by_name() {
        assert_eq!(
            Fault::parse_list("power-loss, crash").unwrap(),
            [Fault::PowerLoss, Fault::Crash]
        );
        assert_eq!(Fault::parse_list("all").unwrap(), Fault::ALL);
        assert!(Fault::parse_list("").unwrap().is_empty());
        assert!(Fault::parse_list("meteor").is_err());
    }
}
