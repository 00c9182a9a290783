//! Configuration: one struct per node, loadable from a cluster TOML file
//! that lists every member. Every setting has a default; unknown keys and
//! bad values fail at start with a message naming the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use raftlock_tls::TlsSettings;
use serde::Deserialize;

use crate::raft::typ::{Member, NodeId};

/// Settings shared by every node of a cluster (the `[cluster]` table).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSettings {
    /// Leader heartbeat period. openraft also checks its election timer
    /// every 1.5 heartbeats, so this adds up to 1.5× itself to a failover.
    pub heartbeat_interval_ms: u64,
    /// Each node draws its election timeout T once, at start, from
    /// [min, max]. In openraft 0.9 a follower that knew a leader waits
    /// `election_timeout_max_ms` (the leader's lease, during which it also
    /// refuses other candidates' votes) plus T after the last message from
    /// that leader before it campaigns. So a dead leader is replaced after
    /// about max + T + 1.5 heartbeats, one T more when the first candidate
    /// does not win: 0.3 s typical and ≈ 0.5 s worst with the defaults
    /// (kill -9 → next grant measured 0.27–0.33 s in 13 runs).
    /// The same sum (max + min = 250 ms) is the longest silence a
    /// follower tolerates, and a follower hears nothing new while its last
    /// append waits for its own fsync: raise both where a disk or a process
    /// can stall that long (docs/benchmarks.md, gap 3).
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout (see the minimum).
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many applied entries, then purge the log
    /// it covers.
    pub snapshot_every_entries: u64,
    /// Allowed session TTLs (docs/api.md: default 1 s – 1 h): the shortest.
    pub session_ttl_min_ms: u64,
    /// The longest allowed session TTL.
    pub session_ttl_max_ms: u64,
    /// Node N keeps its files under `{data_dir}/node-N`; relative paths are
    /// relative to the config file.
    pub data_dir: PathBuf,
    /// sled's page cache cap. Its own default (1 GiB) lets RSS grow far.
    pub sled_cache_mb: u64,
    /// fsync every log append batch (power-loss durable). `false` keeps
    /// only kill -9 durability; for benchmarks that want to see the cost.
    pub fsync: bool,
    /// How long a follower waits for a leader to appear before answering
    /// `no_leader`.
    pub leader_wait_ms: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            // Failover ≤ 0.5 s (docs/benchmarks.md, gap 3). The price: on a
            // 2-core VM, 2 of ~25 loaded runs saw spurious elections while
            // other builds also ran there (none with the old 250–500 ms).
            heartbeat_interval_ms: 25,
            election_timeout_min_ms: 100,
            election_timeout_max_ms: 150,
            snapshot_every_entries: 10_000,
            session_ttl_min_ms: 1_000,
            session_ttl_max_ms: 3_600_000,
            data_dir: PathBuf::from("data"),
            sled_cache_mb: 64,
            fsync: true,
            leader_wait_ms: 3_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberEntry {
    id: NodeId,
    api_addr: String,
    raft_addr: String,
    /// Where this member listens, when that differs from the address the
    /// others dial (containers, NAT): `0.0.0.0:7001` behind `node1:7001`.
    #[serde(default)]
    api_bind: Option<String>,
    #[serde(default)]
    raft_bind: Option<String>,
    /// The member's ZooKeeper door (`client_addr`, `bind`): read by
    /// [`crate::door_addrs`] for the door; let through here as `[api]` is.
    #[serde(default, rename = "zookeeper")]
    _zookeeper: Option<toml::Table>,
    /// The member's etcd door (`client_addr`, `bind`), likewise.
    #[serde(default, rename = "etcd")]
    _etcd: Option<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    #[serde(default)]
    cluster: ClusterSettings,
    members: Vec<MemberEntry>,
    /// The `[api]` table belongs to the HTTP server (raftlock-server's
    /// `ApiConfig`), which reads it from the same file; the node only lets
    /// it through so `deny_unknown_fields` still catches typos elsewhere.
    #[serde(default, rename = "api")]
    _api: Option<toml::Table>,
    /// TLS on both ports (cluster-config/README.md, `[tls]`).
    #[serde(default)]
    tls: Option<TlsSettings>,
    /// `[[auth.tokens]]`: the HTTP server's too (raftlock-server's
    /// `AuthConfig`), let through the same way.
    #[serde(default, rename = "auth")]
    _auth: Option<toml::Table>,
}

/// Where one member listens. Separate from its advertised [`Member`]
/// addresses (which the others dial and the Raft membership records)
/// so a member can bind `0.0.0.0` inside a container while the others
/// reach it as `node1.internal:7101`. Not part of [`NodeConfig`]: the
/// caller binds, then hands the listener to [`crate::Node::start_with_listener`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAddrs {
    /// The client API's listen address (`api_bind`, default `api_addr`).
    pub api: String,
    /// The Raft routes' listen address (`raft_bind`, default `raft_addr`).
    pub raft: String,
}

/// Checks that `addr` is `host:port`, where host is an IPv4 address, a
/// bracketed IPv6 address (`[::1]`) or a DNS name (`node1.internal`,
/// `localhost`). Syntax only: names resolve when a listener binds or a
/// peer is dialled, so a member may start before its peers' names exist.
pub fn check_address(addr: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{addr:?} is not a host:port address ({why})"));
    if addr.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return bad("no port");
    };
    if port.parse::<u16>().is_err() {
        return bad("the port must be a number 0-65535");
    }
    if host.starts_with('[') || host.contains(':') {
        return bad("an IPv6 address must be written [addr]:port");
    }
    if host.is_empty() || host.len() > 253 {
        return bad("the host must be 1-253 characters");
    }
    // RFC 1123 labels; `_` too, which container runtimes put in names.
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !host.trim_end_matches('.').split('.').all(label_ok) {
        return bad("the host is neither an IP address nor a DNS name");
    }
    Ok(())
}

/// Everything one node needs to start.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id; must be a key of `members`.
    pub id: NodeId,
    /// The whole cluster, this node included.
    pub members: BTreeMap<NodeId, Member>,
    /// Where this node keeps its log, vote and snapshots.
    pub data_dir: PathBuf,
    /// Timing, snapshot and TTL settings shared by the whole cluster.
    pub settings: ClusterSettings,
    /// Address to dial for a peer's Raft routes instead of its configured
    /// `raft_addr` (lets a test harness put a proxy on any link).
    pub peer_overrides: BTreeMap<NodeId, String>,
    /// The `[tls]` table, paths resolved: with it the Raft port speaks
    /// mutual TLS (and the client API TLS, which raftlock-server serves).
    pub tls: Option<TlsSettings>,
}

/// A configuration that cannot start a node, naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or has a key of the wrong type or an
    /// unknown key.
    #[error("config {path}: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's message, with the line.
        message: String,
    },
    /// A value is out of range or inconsistent with another.
    #[error("config key `{key}`: {message}")]
    Invalid {
        /// The key at fault, e.g. `cluster.heartbeat_ms`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

impl NodeConfig {
    /// Loads the cluster file and picks member `id`.
    pub fn from_cluster_file(path: &Path, id: NodeId) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_cluster_toml(&text, id, base).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })
    }

    /// Loads the cluster file, picks member `id`, and returns where that
    /// member listens too (`api_bind` / `raft_bind`, defaulting to the
    /// advertised addresses).
    pub fn from_cluster_file_with_binds(
        path: &Path,
        id: NodeId,
    ) -> Result<(Self, BindAddrs), ConfigError> {
        let config = Self::from_cluster_file(path, id)?;
        // Parsed twice (once above): a cluster file is tiny, and this keeps
        // `from_cluster_file`'s signature for embedders.
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let binds = binds_of(&parse_file(&text)?, id, &config)?;
        Ok((config, binds))
    }

    /// Loads the cluster file for member `id`, which the file need not
    /// list: a member joining a running cluster (`raftlock serve --join`).
    /// A listed member keeps its entry; an unlisted one gets `me` as its
    /// addresses, which are also where it listens. The file's members
    /// then only say where the cluster is; the Raft membership, not the
    /// file, decides who belongs.
    pub fn from_cluster_file_joining(
        path: &Path,
        id: NodeId,
        me: Option<Member>,
    ) -> Result<(Self, BindAddrs), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file = parse_file(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })?;
        if file.members.iter().any(|m| m.id == id) {
            return Self::from_cluster_file_with_binds(path, id);
        }
        let me = me.ok_or_else(|| {
            invalid(
                "id",
                format!("node id {id} is not in the config; a joining member needs its own addresses (--api-addr, --raft-addr)"),
            )
        })?;
        for (key, addr) in [("api_addr", &me.api_addr), ("raft_addr", &me.raft_addr)] {
            check_address(addr).map_err(|m| invalid(key, m))?;
        }
        let listed = file
            .members
            .first()
            .map(|m| m.id)
            .ok_or_else(|| invalid("members", "at least one member is required"))?;
        let mut config = Self::from_cluster_file(path, listed)?;
        config.id = id;
        config.data_dir = config.settings.data_dir.join(format!("node-{id}"));
        config.members.insert(id, me.clone());
        let binds = BindAddrs {
            api: me.api_addr,
            raft: me.raft_addr,
        };
        Ok((config, binds))
    }

    /// Parses cluster TOML; relative data dirs resolve against `base`.
    pub fn from_cluster_toml(text: &str, id: NodeId, base: &Path) -> Result<Self, ConfigError> {
        let file = parse_file(text)?;
        let mut members = BTreeMap::new();
        for (i, m) in file.members.iter().enumerate() {
            let addrs = [
                ("api_addr", Some(&m.api_addr)),
                ("raft_addr", Some(&m.raft_addr)),
                ("api_bind", m.api_bind.as_ref()),
                ("raft_bind", m.raft_bind.as_ref()),
            ];
            for (key, addr) in addrs {
                if let Some(addr) = addr {
                    check_address(addr).map_err(|m| invalid(&format!("members[{i}].{key}"), m))?;
                }
            }
            let member = Member {
                api_addr: m.api_addr.clone(),
                raft_addr: m.raft_addr.clone(),
                incarnation: 0,
            };
            if members.insert(m.id, member).is_some() {
                return Err(invalid(
                    &format!("members[{i}].id"),
                    format!("id {} appears twice", m.id),
                ));
            }
        }
        let mut settings = file.cluster;
        if settings.data_dir.is_relative() {
            settings.data_dir = base.join(&settings.data_dir);
        }
        let tls = file.tls.map(|mut tls| {
            tls.resolve_against(base);
            tls
        });
        let config = NodeConfig {
            id,
            data_dir: settings.data_dir.join(format!("node-{id}")),
            members,
            settings,
            peer_overrides: BTreeMap::new(),
            tls,
        };
        config.validate()?;
        Ok(config)
    }

    /// The listen addresses of member `id` (after the file parsed).
    #[cfg(test)]
    fn binds_from_toml(text: &str, id: NodeId) -> Result<BindAddrs, ConfigError> {
        let config = Self::from_cluster_toml(text, id, Path::new("."))?;
        binds_of(&parse_file(text)?, id, &config)
    }

    /// Checks the values; called by `Node::start` too, for embedders.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.settings;
        if self.members.is_empty() {
            return Err(invalid("members", "at least one member is required"));
        }
        if !self.members.contains_key(&self.id) {
            return Err(invalid(
                "id",
                format!(
                    "node id {} is not among the members {:?}",
                    self.id,
                    self.members.keys().collect::<Vec<_>>()
                ),
            ));
        }
        if s.heartbeat_interval_ms == 0 {
            return Err(invalid("cluster.heartbeat_interval_ms", "must be positive"));
        }
        if s.election_timeout_min_ms <= s.heartbeat_interval_ms {
            return Err(invalid(
                "cluster.election_timeout_min_ms",
                "must be larger than heartbeat_interval_ms",
            ));
        }
        if s.election_timeout_max_ms <= s.election_timeout_min_ms {
            return Err(invalid(
                "cluster.election_timeout_max_ms",
                "must be larger than election_timeout_min_ms",
            ));
        }
        if s.snapshot_every_entries == 0 {
            return Err(invalid(
                "cluster.snapshot_every_entries",
                "must be positive",
            ));
        }
        if s.session_ttl_min_ms == 0 || s.session_ttl_min_ms > s.session_ttl_max_ms {
            return Err(invalid(
                "cluster.session_ttl_min_ms",
                "must be positive and at most session_ttl_max_ms",
            ));
        }
        if s.sled_cache_mb == 0 {
            return Err(invalid("cluster.sled_cache_mb", "must be positive"));
        }
        Ok(())
    }

    /// The address to dial for `peer`'s Raft routes.
    pub fn raft_addr_of(&self, peer: NodeId) -> Option<&str> {
        self.peer_overrides
            .get(&peer)
            .or_else(|| self.members.get(&peer).map(|m| &m.raft_addr))
            .map(String::as_str)
    }

    /// This node's own entry in `members`.
    pub fn me(&self) -> &Member {
        // validate() guarantees membership; fall back defensively.
        static EMPTY: Member = Member {
            api_addr: String::new(),
            raft_addr: String::new(),
            incarnation: 0,
        };
        self.members.get(&self.id).unwrap_or(&EMPTY)
    }

    pub(crate) fn leader_wait(&self) -> Duration {
        Duration::from_millis(self.settings.leader_wait_ms)
    }
}

fn parse_file(text: &str) -> Result<ClusterFile, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: PathBuf::new(),
        message: e.to_string(),
    })
}

fn binds_of(file: &ClusterFile, id: NodeId, config: &NodeConfig) -> Result<BindAddrs, ConfigError> {
    let entry = file.members.iter().find(|m| m.id == id);
    let me = config.me();
    Ok(BindAddrs {
        api: entry
            .and_then(|m| m.api_bind.clone())
            .unwrap_or_else(|| me.api_addr.clone()),
        raft: entry
            .and_then(|m| m.raft_bind.clone())
            .unwrap_or_else(|| me.raft_addr.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [cluster]
        heartbeat_interval_ms = 20
        [[members]]
        id = 1
        api_addr = "127.0.0.1:7001"
        raft_addr = "127.0.0.1:7101"
    "#;

    #[test]
    fn defaults_fill_what_is_not_set() {
        let c = NodeConfig::from_cluster_toml(GOOD, 1, Path::new("/etc/rl")).expect("valid");
        assert_eq!(c.settings.heartbeat_interval_ms, 20);
        assert_eq!(c.settings.session_ttl_min_ms, 1_000);
        assert_eq!(c.data_dir, Path::new("/etc/rl/data/node-1"));
    }

    #[test]
    fn the_tls_table_resolves_against_the_config_file() {
        let c = NodeConfig::from_cluster_toml(GOOD, 1, Path::new("/etc/rl")).expect("valid");
        assert_eq!(c.tls, None, "plain HTTP without [tls]");
        let text = format!(
            "{GOOD}\n[tls]\nca = \"tls/ca.pem\"\ncert = \"/srv/m.pem\"\nkey = \"m-key.pem\"\nclient_auth = \"required\"\n"
        );
        let c = NodeConfig::from_cluster_toml(&text, 1, Path::new("/etc/rl")).expect("valid");
        let tls = c.tls.expect("[tls]");
        assert_eq!(tls.ca, Path::new("/etc/rl/tls/ca.pem"));
        assert_eq!(tls.cert, Path::new("/srv/m.pem"));
        assert_eq!(tls.key, Path::new("/etc/rl/m-key.pem"));
        assert_eq!(tls.client_auth, raftlock_tls::ClientAuth::Required);
        let typo = text.replace("client_auth = \"required\"", "client_auth = \"always\"");
        let e = NodeConfig::from_cluster_toml(&typo, 1, Path::new("/etc/rl"))
            .expect_err("bad client_auth")
            .to_string();
        assert!(e.contains("always"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                GOOD.replace("heartbeat_interval_ms", "heartbeat_ms"),
                "heartbeat_ms",
            ),
            (
                GOOD.replace("127.0.0.1:7101", "nowhere"),
                "members[0].raft_addr",
            ),
            (GOOD.replace("= 20", "= 0"), "cluster.heartbeat_interval_ms"),
            (GOOD.replace("= 20", "= \"fast\""), "heartbeat_interval_ms"),
        ];
        for (text, key) in cases {
            let err = NodeConfig::from_cluster_toml(&text, 1, Path::new(".")).expect_err(key);
            assert!(err.to_string().contains(key), "{err} should name {key}");
        }
        let err = NodeConfig::from_cluster_toml(GOOD, 9, Path::new(".")).expect_err("id");
        assert!(err.to_string().contains("`id`"), "{err}");
    }

    #[test]
    fn addresses_may_be_dns_names() {
        for good in [
            "localhost:7001",
            "node1.internal:7001",
            "raftlock_node-1:7101",
            "127.0.0.1:7001",
            "[::1]:7001",
            "node1.internal.:7001",
        ] {
            assert_eq!(check_address(good), Ok(()), "{good}");
        }
        for bad in [
            "nowhere",
            "localhost:",
            ":7001",
            "localhost:70000",
            "a b:7001",
            "::1:7001",
            "-node:7001",
            "node..internal:7001",
        ] {
            assert!(check_address(bad).is_err(), "{bad} should be refused");
        }
        let text = GOOD.replace("127.0.0.1:7001", "localhost:7001");
        let c = NodeConfig::from_cluster_toml(&text, 1, Path::new(".")).expect("valid");
        assert_eq!(c.me().api_addr, "localhost:7001");
    }

    #[test]
    fn binds_default_to_the_advertised_addresses() {
        let binds = NodeConfig::binds_from_toml(GOOD, 1).expect("valid");
        assert_eq!(binds.api, "127.0.0.1:7001");
        assert_eq!(binds.raft, "127.0.0.1:7101");
        let text = GOOD.replace(
            "raft_addr = \"127.0.0.1:7101\"",
            "raft_addr = \"node1.internal:7101\"\napi_bind = \"0.0.0.0:7001\"\nraft_bind = \"0.0.0.0:7101\"",
        );
        let binds = NodeConfig::binds_from_toml(&text, 1).expect("valid");
        assert_eq!(binds.api, "0.0.0.0:7001");
        assert_eq!(binds.raft, "0.0.0.0:7101");
        let bad = text.replace("0.0.0.0:7101", "0.0.0.0");
        let err = NodeConfig::binds_from_toml(&bad, 1).expect_err("bad bind");
        assert!(err.to_string().contains("members[0].raft_bind"), "{err}");
        // The server's [api] table passes the node's parser.
        let with_api = format!("{GOOD}\n[api]\nmax_sessions = 5\n");
        NodeConfig::from_cluster_toml(&with_api, 1, Path::new(".")).expect("[api] is let through");
        // So does a member's ZooKeeper door table.
        let with_zk = format!("{GOOD}zookeeper = {{ client_addr = \"127.0.0.1:2181\" }}\n");
        NodeConfig::from_cluster_toml(&with_zk, 1, Path::new("."))
            .expect("zookeeper is let through");
        // And its etcd door table.
        let with_etcd = format!("{GOOD}etcd = {{ client_addr = \"127.0.0.1:2379\" }}\n");
        NodeConfig::from_cluster_toml(&with_etcd, 1, Path::new(".")).expect("etcd is let through");
    }

    #[test]
    fn bundled_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cluster-config");
        let files = [
            ("local-3.toml", vec![1, 2, 3]),
            ("single.toml", vec![1]),
            ("production-5.toml", vec![1, 2, 3, 4, 5]),
        ];
        for (file, ids) in files {
            for id in ids {
                NodeConfig::from_cluster_file(&dir.join(file), id).expect(file);
            }
        }
        let production = NodeConfig::from_cluster_file(&dir.join("production-5.toml"), 1)
            .expect("production-5.toml");
        let tls = production.tls.expect("production-5.toml has [tls]");
        assert_eq!(tls.ca, Path::new("/etc/raftlock/tls/ca.pem"));
        assert_eq!(tls.client_auth, raftlock_tls::ClientAuth::None);
    }
}
