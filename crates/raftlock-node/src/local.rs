//! Several nodes in one process on loopback ports the OS picks: for tests,
//! examples, benchmarks, and applications that embed a whole cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{ClusterSettings, NodeConfig};
use crate::node::{Node, StartError};
use crate::raft::typ::{Member, NodeId};

/// A cluster of in-process nodes with their data under one directory.
pub struct LocalCluster {
    nodes: Vec<Option<Node>>,
    configs: Vec<NodeConfig>,
}

impl LocalCluster {
    /// Starts `size` members (ids 1..=size) with data under `dir`. The
    /// members' `api_addr` is a placeholder: serve an API separately.
    pub async fn start(
        dir: &Path,
        size: u64,
        settings: ClusterSettings,
    ) -> Result<LocalCluster, StartError> {
        let placeholders = (0..size).map(|_| "127.0.0.1:0".to_string()).collect();
        Self::start_with_api_addrs(dir, placeholders, settings).await
    }

    /// As [`start`](Self::start), with member `i + 1`'s `api_addr` set to
    /// `api_addrs[i]`: the address an API the caller serves listens on, so
    /// the membership (and the API's `/v1/cluster`) names it.
    pub async fn start_with_api_addrs(
        dir: &Path,
        api_addrs: Vec<String>,
        settings: ClusterSettings,
    ) -> Result<LocalCluster, StartError> {
        let mut listeners = Vec::new();
        let mut members = BTreeMap::new();
        for (id, api_addr) in (1..).zip(api_addrs) {
            let bind = |source| StartError::Listen {
                addr: "127.0.0.1:0".into(),
                source,
            };
            let listener = TcpListener::bind("127.0.0.1:0").await.map_err(bind)?;
            let raft_addr = listener.local_addr().map_err(bind)?.to_string();
            members.insert(
                id,
                Member {
                    api_addr,
                    raft_addr,
                    incarnation: 0,
                },
            );
            listeners.push(listener);
        }
        let configs: Vec<NodeConfig> = members
            .keys()
            .map(|&id| NodeConfig {
                id,
                members: members.clone(),
                data_dir: PathBuf::from(dir).join(format!("node-{id}")),
                settings: settings.clone(),
                peer_overrides: BTreeMap::new(),
                tls: None,
            })
            .collect();
        // Start together: the founder initializes, the others must be up
        // to answer its votes.
        let starts: Vec<_> = configs
            .iter()
            .cloned()
            .zip(listeners)
            .map(|(config, listener)| tokio::spawn(Node::start_with_listener(config, listener)))
            .collect();
        let mut nodes = Vec::new();
        for start in starts {
            let node = start
                .await
                .map_err(|e| StartError::Raft(format!("start task failed: {e}")))??;
            nodes.push(Some(node));
        }
        Ok(LocalCluster { nodes, configs })
    }

    /// Member `id`; panics if it is stopped (a test's own mistake).
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes
            .get((id - 1) as usize)
            .and_then(Option::as_ref)
            .unwrap_or_else(|| panic!("member {id} is not running"))
    }

    /// The running members.
    pub fn running(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().flatten()
    }

    /// Waits until every running member agrees on a running leader.
    pub async fn leader(&self, timeout: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut seen = self.running().map(|n| n.status().leader_id);
            if let Some(Some(leader)) = seen.next() {
                if seen.all(|l| l == Some(leader)) && self.running().any(|n| n.id() == leader) {
                    return Some(leader);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection: cuts every link between member `id` and the others
    /// in both directions (`isolated = false` restores them). Clients of
    /// the member still reach it: only the cluster's own traffic is cut.
    pub fn isolate(&self, id: NodeId, isolated: bool) {
        let others: Vec<NodeId> = (1..=self.nodes.len() as NodeId)
            .filter(|n| *n != id)
            .collect();
        for node in self.running() {
            if node.id() == id {
                node.cut_links(&others, isolated);
            } else {
                node.cut_links(&[id], isolated);
            }
        }
    }

    /// Stops member `id` (graceful shutdown; its data stays).
    pub async fn stop(&mut self, id: NodeId) {
        if let Some(node) = self.nodes.get_mut((id - 1) as usize).and_then(Option::take) {
            node.shutdown().await;
        }
    }

    /// Restarts a stopped member on its old address and data.
    pub async fn restart(&mut self, id: NodeId) -> Result<(), StartError> {
        let config = self.configs[(id - 1) as usize].clone();
        let addr = config.me().raft_addr.clone();
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| StartError::Listen { addr, source })?;
        self.nodes[(id - 1) as usize] = Some(Node::start_with_listener(config, listener).await?);
        Ok(())
    }

    /// Stops every member.
    pub async fn shutdown(&mut self) {
        for id in 1..=self.nodes.len() as NodeId {
            self.stop(id).await;
        }
    }
}
