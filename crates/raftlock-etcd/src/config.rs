//! Where each member's etcd door listens, from the cluster file `raftlock
//! serve` reads: each `[[members]]` entry may carry an `etcd` table.
//!
//! ```toml
//! [[members]]
//! id = 1
//! api_addr = "10.0.0.1:7001"
//! raft_addr = "10.0.0.1:7101"
//! etcd = { client_addr = "10.0.0.1:2379", bind = "0.0.0.0:2379" }
//! ```
//!
//! `client_addr` is what clients put in `--endpoints` (and what
//! `MemberList` answers as the member's client URL); `bind` (default
//! `client_addr`) is where the member listens. Without the table the
//! member serves no etcd port.

use serde::Deserialize;

/// One member's etcd addresses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdAddrs {
    /// The address clients dial.
    pub client_addr: String,
    /// Where to listen, when that differs (containers, NAT).
    #[serde(default)]
    pub bind: Option<String>,
}

impl EtcdAddrs {
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
    etcd: Option<EtcdAddrs>,
}

/// Every member's etcd addresses in a cluster file's text, by member id
/// (members without a door left out); an error names a malformed table.
pub fn all_from_cluster_toml(text: &str) -> Result<Vec<(u64, EtcdAddrs)>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("[members] etcd: {e}"))?;
    let mut out = Vec::new();
    for member in file.members {
        if let Some(addrs) = member.etcd {
            for addr in std::iter::once(&addrs.client_addr).chain(&addrs.bind) {
                raftlock_node::check_address(addr)
                    .map_err(|e| format!("member {}: etcd address {addr:?}: {e}", member.id))?;
            }
            out.push((member.id, addrs));
        }
    }
    Ok(out)
}

/// Member `id`'s door addresses, `None` when it has none.
pub fn from_cluster_toml(text: &str, id: u64) -> Result<Option<EtcdAddrs>, String> {
    Ok(all_from_cluster_toml(text)?
        .into_iter()
        .find(|(m, _)| *m == id)
        .map(|(_, a)| a))
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
            etcd = { client_addr = "127.0.0.1:2379" }

            [[members]]
            id = 2
            api_addr = "127.0.0.1:7002"
            raft_addr = "127.0.0.1:7102"
            [members.etcd]
            client_addr = "etcd2.example:2379"
            bind = "0.0.0.0:2379"

            [[members]]
            id = 3
            api_addr = "127.0.0.1:7003"
            raft_addr = "127.0.0.1:7103"
        "#;
        let one = from_cluster_toml(text, 1).expect("parses").expect("set");
        assert_eq!(one.bind_addr(), "127.0.0.1:2379");
        let two = from_cluster_toml(text, 2).expect("parses").expect("set");
        assert_eq!(
            (two.client_addr.as_str(), two.bind_addr()),
            ("etcd2.example:2379", "0.0.0.0:2379")
        );
        assert_eq!(from_cluster_toml(text, 3), Ok(None));
        assert_eq!(all_from_cluster_toml(text).map(|a| a.len()), Ok(2));
        let bad = text.replace("client_addr = \"127.0.0.1:2379\"", "client_adr = \"x\"");
        assert!(from_cluster_toml(&bad, 1).is_err());
        let bad = text.replace("127.0.0.1:2379", "no-port");
        assert!(from_cluster_toml(&bad, 1).is_err());
    }
}
