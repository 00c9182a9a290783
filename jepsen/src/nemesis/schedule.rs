//! Fault kinds, the `--nemesis` syntax, and the seeded schedule.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// kill -9 a random node, restart it when the fault ends.
    Kill,
    /// kill -9 the leader, restart it when the fault ends.
    KillLeader,
    /// SIGSTOP a random node, SIGCONT when the fault ends.
    Pause,
    /// SIGSTOP the leader.
    PauseLeader,
    /// Cut one random node off from all others.
    PartitionOne,
    /// Cut the leader off from all others.
    PartitionLeader,
    /// Random halves: a minority and a majority that cannot talk.
    PartitionHalves,
    /// Bridge: two halves that each talk to one shared middle node only.
    PartitionBridge,
    /// Add latency to every link.
    Delay,
    /// Stall a client (preferably one holding the lock) past its TTL.
    ClientPause,
    /// Cut the leader's Raft links while the clients attached to it keep
    /// using it, one of them holding the lock for the whole fault.
    IsolateLeader,
    /// Add a spare member or remove a voter (never below three).
    Membership,
    /// The next log sync of the leader or a random member fails with
    /// `ENOSPC`, as on a full disk: a clean stop (`503 disk_full`); the
    /// member is restarted when the fault ends, as an operator would after
    /// freeing space.
    DiskFull,
    /// Every log sync of the leader or a random member takes 100–300 ms
    /// longer, as on a disk with a slow `fdatasync`.
    SlowFsync,
    /// A real full disk: the data directory of the leader or a random
    /// member (each a size-limited tmpfs in runs with this fault) is
    /// filled with a ballast file, so whichever write needs space first
    /// (a log chunk, a snapshot, sled) meets `ENOSPC`. The ballast goes
    /// when the fault ends, and the member must come back by itself.
    DiskFill,
}

impl Fault {
    /// Every fault, for `--nemesis all`.
    pub const ALL: [Fault; 12] = [
        Fault::Kill,
        Fault::KillLeader,
        Fault::Pause,
        Fault::PauseLeader,
        Fault::PartitionOne,
        Fault::PartitionLeader,
        Fault::PartitionHalves,
        Fault::PartitionBridge,
        Fault::Delay,
        Fault::ClientPause,
        Fault::IsolateLeader,
        Fault::Membership,
    ];

    /// The disk faults (`--nemesis disk`). Not part of `all`: they need
    /// `raftlock-jepsen member` processes, which carry the fault hooks,
    /// instead of `raftlock serve` (see [`crate::member::fault`]), and
    /// `all` keeps testing the shipped binary.
    pub const DISK: [Fault; 2] = [Fault::DiskFull, Fault::SlowFsync];

    /// True for a fault injected through a member's fault hooks.
    pub fn is_disk(self) -> bool {
        Fault::DISK.contains(&self)
    }

    /// True for a fault that needs each member's data directory on a
    /// tmpfs of its own (mounting one needs root). Not part of `all` or
    /// `disk`: name it (`--nemesis all,disk,disk-fill`).
    pub fn needs_tmpfs(self) -> bool {
        self == Fault::DiskFill
    }

    /// The name used on the command line and in histories.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::KillLeader => "kill-leader",
            Fault::Pause => "pause",
            Fault::PauseLeader => "pause-leader",
            Fault::PartitionOne => "partition-one",
            Fault::PartitionLeader => "partition-leader",
            Fault::PartitionHalves => "partition-halves",
            Fault::PartitionBridge => "partition-bridge",
            Fault::Delay => "delay",
            Fault::ClientPause => "client-pause",
            Fault::IsolateLeader => "isolate-leader",
            Fault::Membership => "membership",
            Fault::DiskFull => "disk-full",
            Fault::SlowFsync => "slow-fsync",
            Fault::DiskFill => "disk-fill",
        }
    }

    /// Parses a comma-separated `--nemesis` value. Groups: `partition` =
    /// every partition shape, `kill` = kill and kill-leader, `pause` =
    /// pause and pause-leader, `disk` = disk-full and slow-fsync, `all` =
    /// everything but the disk faults, `none` = nothing. Exact
    /// names (`partition-leader`, `kill-leader`, `disk-fill`, …) pick one
    /// kind.
    pub fn parse_list(spec: &str) -> Result<Vec<Fault>, String> {
        let mut out = Vec::new();
        for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let group: Vec<Fault> = match word {
                "none" => vec![],
                "all" => Fault::ALL.to_vec(),
                "partition" => vec![
                    Fault::PartitionOne,
                    Fault::PartitionLeader,
                    Fault::PartitionHalves,
                    Fault::PartitionBridge,
                ],
                "kill" => vec![Fault::Kill, Fault::KillLeader],
                "pause" => vec![Fault::Pause, Fault::PauseLeader],
                "partition-majority" => vec![Fault::PartitionHalves],
                "disk" => Fault::DISK.to_vec(),
                other => match Fault::ALL
                    .iter()
                    .chain(Fault::DISK.iter())
                    .chain(std::iter::once(&Fault::DiskFill))
                    .find(|f| f.name() == other)
                {
                    Some(f) => vec![*f],
                    None => {
                        return Err(format!(
                            "unknown nemesis {other:?}; known: none, all, partition, kill, pause, \
                         disk, {}, {}, {}",
                            Fault::ALL.map(Fault::name).join(", "),
                            Fault::DISK.map(Fault::name).join(", "),
                            Fault::DiskFill.name()
                        ))
                    }
                },
            };
            out.extend(group);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Timing of the schedule.
#[derive(Debug, Clone)]
pub struct Pacing {
    /// Quiet time before the first fault.
    pub first: (Duration, Duration),
    /// Quiet time between faults.
    pub between: (Duration, Duration),
    /// How long a fault lasts.
    pub hold: (Duration, Duration),
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            first: (Duration::from_millis(1_000), Duration::from_millis(2_000)),
            between: (Duration::from_millis(1_000), Duration::from_millis(3_000)),
            hold: (Duration::from_millis(2_000), Duration::from_millis(6_000)),
        }
    }
}

/// One planned fault. Targets that depend on the cluster (the leader)
/// are resolved when the step runs; `pick` makes the other choices.
#[derive(Debug, Clone)]
pub struct Step {
    /// Quiet time before it.
    pub wait: Duration,
    /// What.
    pub fault: Fault,
    /// For how long.
    pub hold: Duration,
    /// Random choices (target node, halves, delay, cut mode).
    pub pick: u64,
}

/// The whole run's faults, from the seed alone: the same seed and the
/// same `--nemesis` give the same sequence of faults and timings.
pub fn schedule(faults: &[Fault], seed: u64, pacing: &Pacing, span: Duration) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7321);
    let mut steps = Vec::new();
    if faults.is_empty() {
        return steps;
    }
    let mut at = Duration::ZERO;
    let between = |rng: &mut StdRng, (lo, hi): (Duration, Duration)| {
        Duration::from_millis(rng.random_range(lo.as_millis() as u64..=hi.as_millis() as u64))
    };
    while at < span {
        let wait = between(
            &mut rng,
            if steps.is_empty() {
                pacing.first
            } else {
                pacing.between
            },
        );
        let step = Step {
            wait,
            fault: faults[rng.random_range(0..faults.len())],
            hold: between(&mut rng, pacing.hold),
            pick: rng.random(),
        };
        at += step.wait + step.hold;
        steps.push(step);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_groups_and_names() {
        assert_eq!(
            Fault::parse_list("kill,partition-leader").unwrap(),
            vec![Fault::Kill, Fault::KillLeader, Fault::PartitionLeader]
        );
        assert_eq!(Fault::parse_list("partition").unwrap().len(), 4);
        assert!(Fault::parse_list("none").unwrap().is_empty());
        assert!(Fault::parse_list("bogus").is_err());
        assert!(Fault::parse_list("all")
            .unwrap()
            .contains(&Fault::Membership));
        assert_eq!(
            Fault::parse_list("membership").unwrap(),
            vec![Fault::Membership]
        );
        assert_eq!(
            Fault::parse_list("disk").unwrap(),
            vec![Fault::DiskFull, Fault::SlowFsync]
        );
        assert_eq!(
            Fault::parse_list("slow-fsync").unwrap(),
            vec![Fault::SlowFsync]
        );
        assert!(!Fault::parse_list("all")
            .unwrap()
            .iter()
            .any(|f| f.is_disk() || f.needs_tmpfs()));
        assert_eq!(
            Fault::parse_list("disk,disk-fill").unwrap(),
            vec![Fault::DiskFull, Fault::SlowFsync, Fault::DiskFill]
        );
    }

    #[test]
    fn schedule_is_a_function_of_the_seed() {
        let faults = Fault::parse_list("all").unwrap();
        let p = Pacing::default();
        let span = Duration::from_secs(60);
        let a = schedule(&faults, 7, &p, span);
        let b = schedule(&faults, 7, &p, span);
        let c = schedule(&faults, 8, &p, span);
        let key = |s: &[Step]| {
            s.iter()
                .map(|x| (x.wait, x.fault, x.hold, x.pick))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        assert!(a.len() >= 5);
    }
}
