//! Which member ids are in the cluster now, as the harness knows it.
//!
//! Without the `membership` nemesis this is every started member for the
//! whole run. With it, members come and go: the nemesis adds a spare id
//! once it has become a voter and drops an id once its removal has
//! committed. Health checks, the other nemeses, final reads and the
//! clients' routing ([`crate::workload::route`]) follow it.

use std::sync::RwLock;

use rand::rngs::StdRng;
use rand::Rng;

/// The current members, in id order.
#[derive(Debug, Default)]
pub struct Roster {
    members: RwLock<Vec<u64>>,
}

impl Roster {
    /// A roster of `ids`.
    pub fn new(ids: impl IntoIterator<Item = u64>) -> Roster {
        let mut members: Vec<u64> = ids.into_iter().collect();
        members.sort_unstable();
        members.dedup();
        Roster {
            members: RwLock::new(members),
        }
    }

    /// The members now, in id order.
    pub fn members(&self) -> Vec<u64> {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Number of members now.
    pub fn len(&self) -> usize {
        self.members.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when no member is left (never, in a running cluster).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `id` is a member now.
    pub fn contains(&self, id: u64) -> bool {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&id)
    }

    /// Adds `id` (once it votes).
    pub fn insert(&self, id: u64) {
        let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
        if let Err(pos) = members.binary_search(&id) {
            members.insert(pos, id);
        }
    }

    /// Drops `id` (once its removal has committed).
    pub fn remove(&self, id: u64) {
        self.members
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&m| m != id);
    }

    /// The member after `id` in cyclic id order (`id` need not be a
    /// member any more): where a client of `id` goes next.
    pub fn next_after(&self, id: u64) -> Option<u64> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        members
            .iter()
            .copied()
            .find(|&m| m > id)
            .or_else(|| members.first().copied())
    }

    /// Member number `i mod len`.
    pub fn nth(&self, i: usize) -> Option<u64> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        (!members.is_empty()).then(|| members[i % members.len()])
    }

    /// A random member.
    pub fn pick(&self, rng: &mut StdRng) -> Option<u64> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        (!members.is_empty()).then(|| members[rng.random_range(0..members.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_after_skips_to_the_following_member_cyclically() {
        let roster = Roster::new([3, 1, 2]);
        assert_eq!(roster.members(), vec![1, 2, 3]);
        assert_eq!(roster.next_after(1), Some(2));
        assert_eq!(roster.next_after(3), Some(1));
        roster.remove(2);
        // A client of the removed member moves to the next one.
        assert_eq!(roster.next_after(2), Some(3));
        roster.insert(5);
        roster.insert(5);
        assert_eq!(roster.members(), vec![1, 3, 5]);
        assert_eq!(roster.next_after(4), Some(5));
        assert_eq!(roster.next_after(5), Some(1));
        assert_eq!(roster.nth(4), Some(3));
    }
}
