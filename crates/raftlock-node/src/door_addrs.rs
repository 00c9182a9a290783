//! Where a member's protocol doors listen, from the cluster file `raftlock
//! serve` reads: each `[[members]]` entry may carry one table per door
//! (`zookeeper`, `etcd`), with the same two keys.
//!
//! ```toml
//! [[members]]
//! id = 1
//! api_addr = "10.0.0.1:7001"
//! raft_addr = "10.0.0.1:7101"
//! zookeeper = { client_addr = "10.0.0.1:2181", bind = "0.0.0.0:2181" }
//! etcd = { client_addr = "10.0.0.1:2379" }
//! ```
//!
//! `client_addr` is what clients dial (a ZooKeeper connect string, etcd's
//! `--endpoints` and `MemberList`); `bind` (default `client_addr`) is where
//! the member listens. Without the table the member serves no such port.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::check_address;

/// One member's addresses for one door.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorAddrs {
    /// The address clients dial.
    pub client_addr: String,
    /// Where to listen, when that differs (containers, NAT).
    #[serde(default)]
    pub bind: Option<String>,
}

impl DoorAddrs {
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
    #[serde(flatten)]
    tables: BTreeMap<String, toml::Value>,
}

/// Every member's addresses for the door whose table is `door`, by member
/// id (members without one left out); an error names the malformed table.
pub fn all_door_addrs(text: &str, door: &str) -> Result<Vec<(u64, DoorAddrs)>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("[members] {door}: {e}"))?;
    let mut out = Vec::new();
    for mut member in file.members {
        let Some(table) = member.tables.remove(door) else {
            continue;
        };
        let addrs: DoorAddrs = table
            .try_into()
            .map_err(|e| format!("member {}: {door}: {e}", member.id))?;
        for addr in std::iter::once(&addrs.client_addr).chain(&addrs.bind) {
            check_address(addr)
                .map_err(|e| format!("member {}: {door} address {addr:?}: {e}", member.id))?;
        }
        out.push((member.id, addrs));
    }
    Ok(out)
}

/// Member `id`'s addresses for door `door`, `None` when it has none.
pub fn door_addrs(text: &str, door: &str, id: u64) -> Result<Option<DoorAddrs>, String> {
    Ok(all_door_addrs(text, door)?
        .into_iter()
        .find(|(m, _)| *m == id)
        .map(|(_, a)| a))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
        [[members]]
        id = 1
        api_addr = "127.0.0.1:7001"
        raft_addr = "127.0.0.1:7101"
        etcd = { client_addr = "127.0.0.1:2379" }
        zookeeper = { client_addr = "127.0.0.1:2181" }

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

    #[test]
    fn each_member_may_name_its_doors() {
        let one = door_addrs(TEXT, "etcd", 1).expect("parses").expect("set");
        assert_eq!(one.bind_addr(), "127.0.0.1:2379");
        let two = door_addrs(TEXT, "etcd", 2).expect("parses").expect("set");
        assert_eq!(
            (two.client_addr.as_str(), two.bind_addr()),
            ("etcd2.example:2379", "0.0.0.0:2379")
        );
        assert_eq!(door_addrs(TEXT, "etcd", 3), Ok(None));
        assert_eq!(all_door_addrs(TEXT, "etcd").map(|a| a.len()), Ok(2));
        let zk = all_door_addrs(TEXT, "zookeeper").expect("parses");
        assert_eq!(zk.len(), 1);
        assert_eq!(zk[0].1.bind_addr(), "127.0.0.1:2181");
    }

    #[test]
    fn a_malformed_table_is_named() {
        let typo = TEXT.replace("client_addr = \"127.0.0.1:2379\"", "client_adr = \"x\"");
        let err = door_addrs(&typo, "etcd", 1).expect_err("unknown key");
        assert!(err.contains("member 1: etcd"), "{err}");
        let no_port = TEXT.replace("127.0.0.1:2181", "no-port");
        let err = door_addrs(&no_port, "zookeeper", 1).expect_err("no port");
        assert!(err.contains("zookeeper address"), "{err}");
        let not_a_table = TEXT.replace("etcd = { client_addr = \"127.0.0.1:2379\" }", "etcd = 5");
        assert!(door_addrs(&not_a_table, "etcd", 1).is_err());
    }
}
