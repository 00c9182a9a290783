//! One function per fuzz target: untrusted bytes in, through the decoder
//! raftlock uses for them, nothing out. None may panic on any input; the
//! fuzz targets in `fuzz/` call these, and `tests/replay.rs` replays the
//! committed corpus (`fuzz/corpus/<target>/`, `fuzz/artifacts/<target>/`)
//! through them in every `cargo test`.

use std::path::Path;

use raftlock_core::{Command, StateMachine};
use raftlock_node::{Backup, NodeConfig, Proposal, Reply};
use raftlock_server::ApiConfig;

/// A target: the bytes to decode.
pub type Target = fn(&[u8]);

/// Every target: its name (the directory under `fuzz/corpus/`) and its
/// function.
pub const TARGETS: &[(&str, Target)] = &[
    ("command", command),
    ("proposal", proposal),
    ("internal_body", internal_body),
    ("core_snapshot", core_snapshot),
    ("snapshot_file", snapshot_file),
    ("backup", backup),
    ("node_config", node_config),
    ("api_config", api_config),
    ("json_body", json_body),
    ("zookeeper_frame", zookeeper_frame),
];

/// A core command as bincode (inside log entries and proposals).
pub fn command(bytes: &[u8]) {
    let _ = bincode::deserialize::<Command>(bytes);
}

/// A node proposal and its reply as bincode (log entry payloads, the
/// leader route's write and its answer).
pub fn proposal(bytes: &[u8]) {
    let _ = bincode::deserialize::<Proposal>(bytes);
    let _ = bincode::deserialize::<Reply>(bytes);
}

/// The internal routes' bodies: the leader route's `LeaderRequest` and
/// openraft's append, vote and install-snapshot requests.
pub fn internal_body(bytes: &[u8]) {
    let _ = raftlock_node::fuzzing::internal_bodies(bytes);
}

/// The core's snapshot decoder (snapshot files, installs, backups).
pub fn core_snapshot(bytes: &[u8]) {
    if let Ok(state) = StateMachine::from_snapshot(bytes) {
        // A decoded state must encode again.
        let _ = state.to_snapshot();
    }
}

/// A member's `snapshot.bin`, checksums and all, then the state inside.
pub fn snapshot_file(bytes: &[u8]) {
    let _ = raftlock_node::fuzzing::snapshot_file(bytes);
}

/// A backup file as `raftlock restore` reads it.
pub fn backup(bytes: &[u8]) {
    if let Ok(backup) = Backup::from_bytes(bytes.to_vec()) {
        let _ = backup.summary();
        let _ = backup.state();
    }
}

/// The cluster config file as a member reads it (no file system access:
/// relative data directories resolve against a fixed base).
pub fn node_config(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        for id in [1, 2, 7] {
            let _ = NodeConfig::from_cluster_toml(text, id, Path::new("/nonexistent/base"));
        }
    }
}

/// The `[api]` table of the cluster config, as the server reads it.
pub fn api_config(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = ApiConfig::from_cluster_toml(text);
    }
}

/// The HTTP API's JSON request bodies.
pub fn json_body(bytes: &[u8]) {
    let _ = raftlock_server::fuzz_json_bodies(bytes);
}

/// ZooKeeper's wire: a client's and a server's byte streams through the
/// front door's codecs, and every frame in them through the request and
/// reply decoders.
pub fn zookeeper_frame(bytes: &[u8]) {
    let _ = raftlock_zookeeper::fuzzing::frames(bytes);
}
