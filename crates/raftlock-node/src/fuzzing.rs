//! Entry points for the fuzz targets (`fuzz/`) and their corpus replay
//! test: each runs untrusted bytes through exactly the decoder the node uses
//! for them, and returns whether they decoded. Not an API: hidden from the
//! docs, and nothing here may panic on any input.

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};

use crate::raft::typ::TypeConfig;
use crate::replica::at_leader::LeaderRequest;

/// The internal route bodies as `routes.rs` decodes them (plain
/// `bincode::deserialize`): the leader route's request, and openraft's
/// append, vote and install-snapshot requests.
pub fn internal_bodies(bytes: &[u8]) -> [bool; 4] {
    [
        bincode::deserialize::<LeaderRequest>(bytes).is_ok(),
        bincode::deserialize::<AppendEntriesRequest<TypeConfig>>(bytes).is_ok(),
        bincode::deserialize::<VoteRequest<u64>>(bytes).is_ok(),
        bincode::deserialize::<InstallSnapshotRequest<TypeConfig>>(bytes).is_ok(),
    ]
}

/// A snapshot file's bytes as `snapshot_file::load` parses them, then the
/// state inside as the state machine decodes it at start. The bytes are
/// tried as they are and with a valid trailer of checksums appended, so
/// the fuzzer also reaches the header and meta parsing behind them.
pub fn snapshot_file(bytes: &[u8]) -> [bool; 2] {
    let decode = |file: Vec<u8>| match crate::disk::snapshot_file::parse(file) {
        Ok(stored) => raftlock_core::StateMachine::from_snapshot(&stored.data).is_ok(),
        Err(_) => false,
    };
    [
        decode(bytes.to_vec()),
        decode(crate::disk::snapshot_file::with_trailer(bytes)),
    ]
}

/// Valid inputs to start each fuzz target from, as `(target, bytes)`:
/// encoded by the same code that writes them in production.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use raftlock_core::{Command, QueueKind, SessionId, StateMachine};

    let mut state = StateMachine::new();
    let mut commands = Vec::new();
    for i in 0..6u128 {
        let id = SessionId(1_000 + i);
        commands.push(Command::OpenSession {
            id,
            owner: "seed".into(),
            ttl_ms: 5_000,
        });
        commands.push(Command::Acquire {
            kind: QueueKind::Lock,
            name: format!("/locks/l{}", i % 3),
            session: id,
            data: vec![i as u8; 3],
            wait: true,
        });
    }
    for command in &commands {
        state.apply(command);
    }
    let mut out = Vec::new();
    for command in commands.iter().take(2) {
        out.push(("command", bincode::serialize(command).unwrap_or_default()));
    }
    let proposal = crate::raft::typ::Proposal(commands.clone());
    out.push((
        "proposal",
        bincode::serialize(&proposal).unwrap_or_default(),
    ));
    let write = LeaderRequest::Write(crate::raft::typ::Proposal(commands[..2].to_vec()));
    out.push((
        "internal_body",
        bincode::serialize(&write).unwrap_or_default(),
    ));
    let keepalive = LeaderRequest::Keepalive(SessionId(1_000));
    out.push((
        "internal_body",
        bincode::serialize(&keepalive).unwrap_or_default(),
    ));
    let snapshot = state.to_snapshot().unwrap_or_default();
    out.push(("core_snapshot", snapshot.clone()));
    if let Ok(backup) = crate::disk::backup::Backup::capture(&state, 12) {
        out.push(("backup", backup.into_bytes()));
    }
    let dir = std::env::temp_dir().join(format!("raftlock-fuzz-seed-{}", std::process::id()));
    let meta = crate::raft::typ::SnapshotMeta {
        last_log_id: Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(1, 1),
            12,
        )),
        last_membership: Default::default(),
        snapshot_id: "1-12".into(),
    };
    if std::fs::create_dir_all(&dir).is_ok()
        && crate::disk::snapshot_file::save(&dir, &meta, &snapshot).is_ok()
    {
        if let Ok(bytes) = std::fs::read(dir.join("snapshot.bin")) {
            // Also without its trailer (one block: 20 bytes), for the
            // target's second try, which appends a valid one.
            let body = bytes[..bytes.len().saturating_sub(20)].to_vec();
            out.push(("snapshot_file", bytes));
            out.push(("snapshot_file", body));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}
