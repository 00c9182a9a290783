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

/// Why a member's door could not be bound or started.
#[derive(Debug, thiserror::Error)]
pub enum MemberDoorError {
    /// The door's entry of the cluster file is malformed.
    #[error("cluster file: {0}")]
    Config(String),
    /// The door's address is taken or cannot be bound.
    #[error("cannot listen on {door} bind {addr}: {source}")]
    Bind {
        /// The door (`zookeeper`, `etcd`).
        door: &'static str,
        /// The address tried.
        addr: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The `[tls]` table's certificate or key cannot be loaded.
    #[error("{door} door TLS: {source}")]
    Tls {
        /// The door.
        door: &'static str,
        /// Why it failed.
        source: raftlock_tls::TlsError,
    },
    /// The bound listener cannot be served.
    #[error("{door} door: {source}")]
    Io {
        /// The door.
        door: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// A member's door listener as the cluster file configures it, bound
/// before Raft starts (so a port conflict fails first), not yet serving.
/// `raftlock serve` and the Jepsen harness's member processes bind every
/// door this way; each door crate starts its server on it.
pub struct BoundDoor {
    /// The door (`zookeeper`, `etcd`).
    pub door: &'static str,
    /// The bound listener.
    pub listener: tokio::net::TcpListener,
    /// This member's addresses for the door.
    pub addrs: DoorAddrs,
    /// Every member's client address for the door, by member id.
    pub client_addrs: Vec<(u64, String)>,
}

impl BoundDoor {
    /// Binds member `id`'s `door` if the cluster file (its text) gives it
    /// one (`<door> = { client_addr = ... }` in its `[[members]]` entry);
    /// `None` when it does not.
    pub async fn bind(
        cluster_toml: &str,
        door: &'static str,
        id: u64,
    ) -> Result<Option<Self>, MemberDoorError> {
        let all = all_door_addrs(cluster_toml, door).map_err(MemberDoorError::Config)?;
        let Some(addrs) = all.iter().find(|(m, _)| *m == id).map(|(_, a)| a.clone()) else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addrs.bind_addr())
            .await
            .map_err(|source| MemberDoorError::Bind {
                door,
                addr: addrs.bind_addr().to_string(),
                source,
            })?;
        let client_addrs = all.into_iter().map(|(m, a)| (m, a.client_addr)).collect();
        Ok(Some(Self {
            door,
            listener,
            addrs,
            client_addrs,
        }))
    }

    /// The API's certificate and client policy for the door, when the
    /// cluster has `[tls]`.
    pub fn tls_server(
        &self,
        tls: Option<&crate::TlsSettings>,
    ) -> Result<Option<std::sync::Arc<raftlock_tls::rustls::ServerConfig>>, MemberDoorError> {
        tls.map(raftlock_tls::api_server_config)
            .transpose()
            .map_err(|source| MemberDoorError::Tls {
                door: self.door,
                source,
            })
    }
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

    #[tokio::test]
    async fn a_door_binds_where_the_file_says_and_names_itself_when_it_cannot() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = taken.local_addr().expect("bound").to_string();
        let text = format!(
            "[[members]]\nid = 1\napi_addr = \"127.0.0.1:7001\"\nraft_addr = \"127.0.0.1:7101\"\n\
             etcd = {{ client_addr = \"{addr}\" }}\nzookeeper = {{ client_addr = \"127.0.0.1:0\" }}\n"
        );
        let err = BoundDoor::bind(&text, "etcd", 1)
            .await
            .err()
            .expect("the port is taken");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot listen on etcd bind {addr}: ")),
            "{err}"
        );
        let bound = BoundDoor::bind(&text, "zookeeper", 1)
            .await
            .expect("binds")
            .expect("configured");
        assert_eq!(bound.door, "zookeeper");
        assert_eq!(bound.client_addrs, vec![(1, "127.0.0.1:0".to_string())]);
        assert!(BoundDoor::bind(&text, "zookeeper", 2)
            .await
            .expect("parses")
            .is_none());
    }
}
