//! Before a cluster starts: the binary, free ports, the cluster TOML.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Timing of the cluster under test. Shorter than the production defaults
/// so that faults turn into elections and expiries within a short run, but
/// loose enough for a loaded two-core machine.
#[derive(Debug, Clone)]
pub struct ClusterTiming {
    /// `[cluster] heartbeat_interval_ms`.
    pub heartbeat_ms: u64,
    /// `[cluster] election_timeout_min_ms` (max is twice this).
    pub election_min_ms: u64,
    /// `[cluster] leader_wait_ms`: how long a node waits for a leader
    /// before answering `no_leader`.
    pub leader_wait_ms: u64,
    /// `[cluster] snapshot_every_entries`: small, so runs exercise
    /// snapshots and log purges (and restarts load snapshots).
    pub snapshot_every: u64,
}

impl Default for ClusterTiming {
    fn default() -> Self {
        ClusterTiming {
            heartbeat_ms: 50,
            election_min_ms: 300,
            leader_wait_ms: 2_000,
            snapshot_every: 500,
        }
    }
}

/// The cluster TOML for `members` (id → (api, raft) address), with data
/// under `data_dir` (relative to the file).
pub fn cluster_toml(
    members: &BTreeMap<u64, (SocketAddr, SocketAddr)>,
    data_dir: &str,
    timing: &ClusterTiming,
) -> String {
    let mut s = String::from("# Written by raftlock-jepsen for one test run.\n[cluster]\n");
    let _ = writeln!(s, "heartbeat_interval_ms = {}", timing.heartbeat_ms);
    let _ = writeln!(s, "election_timeout_min_ms = {}", timing.election_min_ms);
    let _ = writeln!(
        s,
        "election_timeout_max_ms = {}",
        2 * timing.election_min_ms
    );
    let _ = writeln!(s, "snapshot_every_entries = {}", timing.snapshot_every);
    let _ = writeln!(s, "session_ttl_min_ms = 1000");
    let _ = writeln!(s, "session_ttl_max_ms = 600000");
    let _ = writeln!(s, "data_dir = {data_dir:?}");
    let _ = writeln!(s, "sled_cache_mb = 16");
    let _ = writeln!(s, "fsync = true");
    let _ = writeln!(s, "leader_wait_ms = {}", timing.leader_wait_ms);
    for (id, (api, raft)) in members {
        let _ = write!(
            s,
            "\n[[members]]\nid = {id}\napi_addr = \"{api}\"\nraft_addr = \"{raft}\"\n"
        );
    }
    s
}

/// Gives each member in `doors` a ZooKeeper door: a `zookeeper = {
/// client_addr = ... }` line in its `[[members]]` entry of `toml` (as
/// [`cluster_toml`] wrote it).
pub fn add_zookeeper_doors(toml: &mut String, doors: &BTreeMap<u64, String>) {
    for (id, addr) in doors {
        let entry = format!("\n[[members]]\nid = {id}\n");
        if let Some(at) = toml.find(&entry) {
            let line = format!("zookeeper = {{ client_addr = \"{addr}\" }}\n");
            toml.insert_str(at + entry.len(), &line);
        }
    }
}

/// Gives each member in `doors` an etcd door: an `etcd = { client_addr =
/// ... }` line in its `[[members]]` entry of `toml` (as [`cluster_toml`]
/// wrote it).
pub fn add_etcd_doors(toml: &mut String, doors: &BTreeMap<u64, String>) {
    for (id, addr) in doors {
        let entry = format!("\n[[members]]\nid = {id}\n");
        if let Some(at) = toml.find(&entry) {
            let line = format!("etcd = {{ client_addr = \"{addr}\" }}\n");
            toml.insert_str(at + entry.len(), &line);
        }
    }
}

/// `n` distinct free loopback addresses, on ports below the kernel's
/// ephemeral range, for members that bind them later.
///
/// Not port 0: the OS hands those out from the ephemeral range, and the
/// port is free again between this call and the member's bind (and while
/// a killed member is down). That same range serves every outgoing
/// connection's source port and every proxy's port-0 listener, so a
/// socket of this very run could take it: CI once saw a link proxy get a
/// member's API port, and the member never started. Below the range only
/// an explicit bind can take a port.
pub fn free_addrs(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    const LOWEST: u16 = 10_000;
    let below = ephemeral_range_start().unwrap_or(32_768);
    if below <= LOWEST + 1_000 {
        // An unusual port range: fall back to what the OS hands out.
        let listeners = (0..n)
            .map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))
            .collect::<std::io::Result<Vec<_>>>()?;
        return listeners.iter().map(|l| l.local_addr()).collect();
    }
    // Held until all are found, so no port is picked twice.
    let mut listeners = Vec::with_capacity(n);
    for _ in 0..(100 * n + 100) {
        if listeners.len() == n {
            break;
        }
        let port = rand::random_range(LOWEST..below);
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(l);
        }
    }
    if listeners.len() < n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!(
                "found only {} free ports in {LOWEST}..{below}",
                listeners.len()
            ),
        ));
    }
    listeners.iter().map(|l| l.local_addr()).collect()
}

/// First port of the kernel's ephemeral range (Linux), if readable.
fn ephemeral_range_start() -> Option<u16> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Where the `raftlock` binary is when none is given: `RAFTLOCK_BIN`, else
/// next to this executable (`target/debug/raftlock` for
/// `target/debug/raftlock-jepsen`, also from `target/debug/deps/` for test
/// binaries), else `target/debug/raftlock` of this workspace.
pub fn default_raftlock_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("RAFTLOCK_BIN") {
        return PathBuf::from(path);
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            let candidate = dir.join("raftlock");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    workspace_root().join("target/debug/raftlock")
}

/// The `raftlock-jepsen` binary that runs members with embedded clients
/// (`raftlock-jepsen member`): `RAFTLOCK_JEPSEN_BIN`, else this executable
/// when it is `raftlock-jepsen`, else `raftlock-jepsen` next to it (test
/// binaries live in `target/debug/deps/`), else `target/debug/` of this
/// workspace.
pub fn default_member_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("RAFTLOCK_JEPSEN_BIN") {
        return PathBuf::from(path);
    }
    if let Ok(exe) = std::env::current_exe() {
        if exe.file_name().is_some_and(|n| n == "raftlock-jepsen") {
            return exe;
        }
        for dir in exe.ancestors().skip(1).take(2) {
            let candidate = dir.join("raftlock-jepsen");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    workspace_root().join("target/debug/raftlock-jepsen")
}

/// The workspace this crate was built in.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doors_go_into_their_members_entries() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let members = BTreeMap::from([(1, (a, a)), (2, (a, a))]);
        let mut text = cluster_toml(&members, "data", &ClusterTiming::default());
        let doors = BTreeMap::from([(2, "127.0.0.1:2181".to_string())]);
        add_zookeeper_doors(&mut text, &doors);
        let two = text.split("[[members]]").nth(2).unwrap_or_default();
        assert!(
            two.contains("zookeeper = { client_addr = \"127.0.0.1:2181\" }"),
            "{text}"
        );
        assert_eq!(text.matches("zookeeper").count(), 1, "{text}");
        let etcd = BTreeMap::from([(1, "127.0.0.1:2379".to_string())]);
        add_etcd_doors(&mut text, &etcd);
        let one = text.split("[[members]]").nth(1).unwrap_or_default();
        assert!(
            one.contains("etcd = { client_addr = \"127.0.0.1:2379\" }"),
            "{text}"
        );
        assert_eq!(text.matches("etcd =").count(), 1, "{text}");
    }

    #[test]
    fn toml_lists_members_and_timing() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let members = BTreeMap::from([(1, (a, b))]);
        let text = cluster_toml(&members, "data", &ClusterTiming::default());
        assert!(text.contains("election_timeout_max_ms = 600"));
        assert!(text.contains("api_addr = \"127.0.0.1:1\""));
        assert!(text.contains("data_dir = \"data\""));
    }

    #[test]
    fn free_addrs_are_distinct() {
        let addrs = free_addrs(4).unwrap();
        let mut ports: Vec<u16> = addrs.iter().map(SocketAddr::port).collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 4);
        // Outside the range that port 0 and outgoing connections use.
        if let Some(below) = ephemeral_range_start().filter(|b| *b > 11_000) {
            assert!(ports.iter().all(|p| *p < below), "{ports:?} vs {below}");
        }
    }
}
