//! The network between the nodes: one [`LinkProxy`] per directed link,
//! and the partition shapes built from them.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::proxy::{LinkProxy, LinkState};

/// Every directed link i→j (i ≠ j) of the cluster, through a proxy.
#[derive(Debug)]
pub struct Net {
    /// Keyed by (from, to) member ids.
    links: BTreeMap<(u64, u64), LinkProxy>,
}

impl Net {
    /// Starts a proxy for every ordered pair of `raft_addrs` (member id →
    /// real Raft address).
    pub async fn start(raft_addrs: &BTreeMap<u64, SocketAddr>) -> std::io::Result<Net> {
        let mut links = BTreeMap::new();
        for &from in raft_addrs.keys() {
            for (&to, &addr) in raft_addrs {
                if from != to {
                    links.insert((from, to), LinkProxy::start(addr).await?);
                }
            }
        }
        Ok(Net { links })
    }

    /// The address node `from` must dial to reach `to`.
    pub fn proxy_addr(&self, from: u64, to: u64) -> Option<SocketAddr> {
        self.links.get(&(from, to)).map(LinkProxy::addr)
    }

    /// Sets one directed link.
    pub fn set(&self, from: u64, to: u64, state: LinkState) {
        if let Some(link) = self.links.get(&(from, to)) {
            link.set(state);
        }
    }

    /// Sets every link.
    pub fn set_all(&self, state: LinkState) {
        for link in self.links.values() {
            link.set(state);
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.set_all(LinkState::HEALTHY);
    }

    /// Cuts both directions between every pair of nodes that `connected`
    /// says cannot talk (with `how`, `Drop` or `Refuse`); heals the rest.
    pub fn apply(&self, connected: impl Fn(u64, u64) -> bool, how: LinkState) {
        for (&(from, to), link) in &self.links {
            if connected(from, to) && connected(to, from) {
                link.set(LinkState::HEALTHY);
            } else {
                link.set(how);
            }
        }
    }

    /// Links that are not healthy now, for reports.
    pub fn cut_links(&self) -> Vec<(u64, u64)> {
        self.links
            .iter()
            .filter(|(_, l)| l.state() != LinkState::HEALTHY)
            .map(|(k, _)| *k)
            .collect()
    }
}

/// Which nodes can talk, as a partition into groups (each node in one).
pub fn grouped(groups: &[Vec<u64>]) -> impl Fn(u64, u64) -> bool + '_ {
    move |a, b| groups.iter().any(|g| g.contains(&a) && g.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_connect_only_within() {
        let groups = vec![vec![1, 2], vec![3]];
        let c = grouped(&groups);
        assert!(c(1, 2));
        assert!(!c(1, 3));
        assert!(!c(3, 2));
    }

    #[tokio::test]
    async fn apply_cuts_both_directions() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let addrs: BTreeMap<u64, SocketAddr> = (1..=3).map(|i| (i, addr)).collect();
        let net = Net::start(&addrs).await.unwrap();
        let groups = vec![vec![1, 2], vec![3]];
        net.apply(grouped(&groups), LinkState::Drop);
        assert_eq!(net.cut_links(), vec![(1, 3), (2, 3), (3, 1), (3, 2)]);
        net.heal();
        assert!(net.cut_links().is_empty());
    }
}
