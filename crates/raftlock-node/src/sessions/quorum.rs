//! When did a quorum last confirm this node's leadership?
//!
//! openraft 0.9 keeps a leader leading after it lost its quorum (it has no
//! check-quorum step-down), so "I am the leader" from its metrics is only
//! this node's belief. Anything a leader answers from memory (a keepalive
//! above all) must instead rest on a quorum having accepted this node's
//! leadership *after* the question arrived: then no other leader can have
//! been elected before that arrival, because any later election needs a
//! vote from a member of that quorum, which it could only cast after
//! accepting our request.
//!
//! The transport (`network.rs`) records, per peer, the send instant of the
//! latest AppendEntries (heartbeat or entries) that the peer accepted under
//! this node's vote. A peer that accepted it held our vote at some moment
//! after that send instant. Heartbeats go out every `heartbeat_interval_ms`,
//! so a question waits at most about one heartbeat round for its answer,
//! with no extra messages: every question arriving in one heartbeat
//! interval shares the same round (batching for free). Only this node's
//! own monotonic clock is compared with itself, so clock drift between
//! members does not enter.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use openraft::{Membership, Vote};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::raft::typ::{Member, NodeId};

/// A peer's latest accepted request.
#[derive(Debug, Clone, Copy)]
struct Ack {
    vote: Vote<NodeId>,
    sent: Instant,
}

/// Per-peer acceptance times, fed by the transport.
pub struct QuorumClock {
    acks: Mutex<HashMap<NodeId, Ack>>,
    /// Bumped on every recorded acceptance, to wake waiting questions.
    recorded: watch::Sender<u64>,
}

impl Default for QuorumClock {
    fn default() -> Self {
        QuorumClock {
            acks: Mutex::default(),
            recorded: watch::channel(0).0,
        }
    }
}

/// Which leadership a question is about: this node's vote and the voters
/// that must confirm it.
pub struct Leadership<'a> {
    /// This node.
    pub me: NodeId,
    /// Its current vote.
    pub vote: &'a Vote<NodeId>,
    /// The voters (one or two configurations) that must confirm it.
    pub membership: &'a Membership<NodeId, Member>,
}

impl QuorumClock {
    /// `peer` accepted a request of `vote` that was sent at `sent`.
    pub fn record(&self, peer: NodeId, vote: Vote<NodeId>, sent: Instant) {
        {
            let mut acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
            let newer = match acks.get(&peer) {
                Some(old) if old.vote == vote => sent > old.sent,
                // A different vote: only a newer leadership replaces it.
                Some(old) => vote > old.vote,
                None => true,
            };
            if newer {
                acks.insert(peer, Ack { vote, sent });
            }
        }
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The latest instant T such that, in every voter configuration (two
    /// during a joint membership change), a majority accepted requests of
    /// this leadership sent at or after T. This node counts as accepting
    /// at `now`.
    pub fn confirmed_at(&self, leadership: &Leadership<'_>, now: Instant) -> Option<Instant> {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        let heard = |id: &NodeId| -> Option<Instant> {
            if *id == leadership.me {
                return Some(now);
            }
            acks.get(id)
                .filter(|a| a.vote == *leadership.vote)
                .map(|a| a.sent)
        };
        leadership
            .membership
            .get_joint_config()
            .iter()
            .map(|voters| majority_time(voters, heard))
            .try_fold(None::<Instant>, |earliest, t| {
                let t = t?;
                Some(Some(earliest.map_or(t, |e| e.min(t))))
            })
            .flatten()
    }

    /// Wakes on every recorded acceptance.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.recorded.subscribe()
    }
}

/// The time by which a majority of `voters` was heard from: the
/// majority-th latest of their times, `None` without a majority.
fn majority_time(
    voters: &BTreeSet<NodeId>,
    heard: impl Fn(&NodeId) -> Option<Instant>,
) -> Option<Instant> {
    let mut times: Vec<Instant> = voters.iter().filter_map(heard).collect();
    let majority = voters.len() / 2 + 1;
    if times.len() < majority {
        return None;
    }
    times.sort_unstable_by(|a, b| b.cmp(a));
    times.get(majority - 1).copied()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn membership(voters: &[&[NodeId]]) -> Membership<NodeId, Member> {
        let configs: Vec<BTreeSet<NodeId>> =
            voters.iter().map(|v| v.iter().copied().collect()).collect();
        let nodes: BTreeMap<NodeId, Member> = configs
            .iter()
            .flatten()
            .map(|id| (*id, Member::default()))
            .collect();
        Membership::new(configs, nodes)
    }

    #[test]
    fn a_quorum_needs_a_majority_under_the_same_vote() {
        let clock = QuorumClock::default();
        let t0 = Instant::now();
        let vote = Vote::new_committed(3, 1);
        let members = membership(&[&[1, 2, 3]]);
        let me = Leadership {
            me: 1,
            vote: &vote,
            membership: &members,
        };
        let now = t0 + Duration::from_secs(1);
        assert_eq!(clock.confirmed_at(&me, now), None, "only itself");
        // A peer's acceptance under an older leadership does not count.
        clock.record(2, Vote::new_committed(2, 2), t0);
        assert_eq!(clock.confirmed_at(&me, now), None);
        clock.record(2, vote, t0 + Duration::from_millis(10));
        assert_eq!(
            clock.confirmed_at(&me, now),
            Some(t0 + Duration::from_millis(10)),
            "itself and node 2: the later of the two majority times"
        );
        clock.record(3, vote, t0 + Duration::from_millis(30));
        assert_eq!(
            clock.confirmed_at(&me, now),
            Some(t0 + Duration::from_millis(30))
        );
        // An older acceptance never moves it back.
        clock.record(3, vote, t0 + Duration::from_millis(20));
        assert_eq!(
            clock.confirmed_at(&me, now),
            Some(t0 + Duration::from_millis(30))
        );
    }

    #[test]
    fn a_joint_membership_needs_both_majorities() {
        let clock = QuorumClock::default();
        let t0 = Instant::now();
        let vote = Vote::new_committed(1, 1);
        let members = membership(&[&[1, 2, 3], &[1, 4, 5]]);
        let me = Leadership {
            me: 1,
            vote: &vote,
            membership: &members,
        };
        clock.record(2, vote, t0);
        assert_eq!(clock.confirmed_at(&me, t0), None, "old config only");
        clock.record(5, vote, t0 + Duration::from_millis(5));
        assert_eq!(
            clock.confirmed_at(&me, t0 + Duration::from_secs(1)),
            Some(t0)
        );
    }
}
