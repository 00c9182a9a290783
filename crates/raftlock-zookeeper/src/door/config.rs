//! Where a member's door listens, from the cluster file `raftlock serve`
//! reads: each `[[members]]` entry may carry a `zookeeper` table.
//!
//! ```toml
//! [[members]]
//! id = 1
//! api_addr = "10.0.0.1:7001"
//! raft_addr = "10.0.0.1:7101"
//! zookeeper = { client_addr = "10.0.0.1:2181", bind = "0.0.0.0:2181" }
//! ```
//!
//! `client_addr` is what clients put in their connect string; `bind`
//! (default `client_addr`) is where the member listens. Without the table
//! the member serves no ZooKeeper port.

use serde::Deserialize;

/// One member's ZooKeeper addresses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperAddrs {
    /// The address clients dial.
    pub client_addr: String,
    /// Where to listen, when that differs (containers, NAT).
    #[serde(default)]
    pub bind: Option<String>,
}

impl ZooKeeperAddrs {
    /// The address to bind.
    pub fn bind_addr(&self) -> &str {
        self.bind.as_deref().unwrap_or(&self.client_addr)
    }
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    members: Vec<Member>,
}

#[derive(Deserialize)]
struct Member {
    id: u64,
    #[serde(default)]
    zookeeper: Option<ZooKeeperAddrs>,
}

/// Member `id`'s door addresses in a cluster file's text, `None` when it
/// has none; an error names a malformed `zookeeper` table.
pub fn from_cluster_toml(text: &str, id: u64) -> Result<Option<ZooKeeperAddrs>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("[members] zookeeper: {e}"))?;
    let Some(member) = file.members.into_iter().find(|m| m.id == id) else {
        return Ok(None);
    };
    if let Some(addrs) = &member.zookeeper {
        for addr in std::iter::once(&addrs.client_addr).chain(&addrs.bind) {
            raftlock_node::check_address(addr)
                .map_err(|e| format!("member {id}: zookeeper address {addr:?}: {e}"))?;
        }
    }
    Ok(member.zookeeper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_may_name_its_door() {
        let text = r#"
            [[members]]
            id = 1
            api_addr = "127.0.0.1:7001"
            raft_addr = "127.0.0.1:7101"
            zookeeper = { client_addr = "127.0.0.1:2181" }

            [[members]]
            id = 2
            api_addr = "127.0.0.1:7002"
            raft_addr = "127.0.0.1:7102"
            [members.zookeeper]
            client_addr = "zk2.example:2181"
            bind = "0.0.0.0:2181"

            [[members]]
            id = 3
            api_addr = "127.0.0.1:7003"
            raft_addr = "127.0.0.1:7103"
        "#;
        let one = from_cluster_toml(text, 1).expect("parses").expect("set");
        assert_eq!(one.bind_addr(), "127.0.0.1:2181");
        let two = from_cluster_toml(text, 2).expect("parses").expect("set");
        assert_eq!(
            (two.client_addr.as_str(), two.bind_addr()),
            ("zk2.example:2181", "0.0.0.0:2181")
        );
        assert_eq!(from_cluster_toml(text, 3), Ok(None));
        let bad = text.replace("client_addr = \"127.0.0.1:2181\"", "client_adr = \"x\"");
        assert!(from_cluster_toml(&bad, 1).is_err());
        let bad = text.replace("127.0.0.1:2181", "no-port");
        assert!(from_cluster_toml(&bad, 1).is_err());
    }
}
