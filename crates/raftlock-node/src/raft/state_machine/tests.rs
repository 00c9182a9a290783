//! Snapshots through the openraft-facing store: built into, sent from and
//! loaded from their file only.

use openraft::{CommittedLeaderId, Entry};
use raftlock_core::{Command, QueueKind, SessionId};

use super::*;
use crate::sessions::tracker::TokioClock;

fn open(dir: &std::path::Path) -> Arc<Shared> {
    open_with(dir, SnapshotFloor::detached())
}

fn open_with(dir: &std::path::Path, floor: SnapshotFloor) -> Arc<Shared> {
    Shared::open(
        dir.to_path_buf(),
        Arc::new(WaiterRegistry::default()),
        Arc::new(SessionTracker::new(Box::new(TokioClock))),
        floor,
    )
    .expect("open")
}

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

/// Entry `index` opens a session and takes a lock with it.
fn entry(index: u64) -> (Entry<TypeConfig>, Vec<Command>) {
    let id = SessionId(u128::from(index));
    let commands = vec![
        Command::OpenSession {
            id,
            owner: "test".into(),
            ttl_ms: 5_000,
        },
        Command::Acquire {
            kind: QueueKind::Lock,
            name: format!("l{index}"),
            session: id,
            data: vec![],
            wait: true,
        },
    ];
    let entry = Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(Proposal(commands.clone())),
    };
    (entry, commands)
}

/// Applies entries `indexes` to `store` and to `expected`.
async fn apply(
    store: &mut StateMachineStore,
    expected: &mut StateMachine,
    indexes: std::ops::RangeInclusive<u64>,
) {
    let mut entries = Vec::new();
    for index in indexes {
        let (entry, commands) = entry(index);
        for command in &commands {
            assert!(expected.apply(command).result.is_ok());
        }
        entries.push(entry);
    }
    store.apply(entries).await.expect("apply");
}

#[tokio::test]
async fn snapshots_are_sent_installed_and_loaded_from_their_file_only() {
    let (a_dir, b_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = StateMachineStore::new(open(a_dir.path()), DurableIndex::everything());
    let mut expected = StateMachine::new();
    apply(&mut a, &mut expected, 1..=200).await;
    assert!(a.get_current_snapshot().await.expect("get").is_none());

    let built = a
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build");
    assert_eq!(built.meta.last_log_id, Some(log_id(200)));
    let at_build = expected.clone();
    // Applied after the build: not in the snapshot.
    apply(&mut a, &mut expected, 201..=210).await;

    // Sent to a peer: read back from the file, nothing kept in memory.
    let sent = a
        .get_current_snapshot()
        .await
        .expect("get")
        .expect("a snapshot");
    assert_eq!(sent.meta, built.meta);
    let mut b = StateMachineStore::new(open(b_dir.path()), DurableIndex::everything());
    b.install_snapshot(&sent.meta, sent.snapshot)
        .await
        .expect("install");
    assert_eq!(*b.shared.read(), at_build);
    assert_eq!(b.shared.snapshots_installed(), 1);
    assert_eq!(
        b.applied_state().await.expect("applied").0,
        Some(log_id(200))
    );

    // The installing side serves it from its own file too, and a
    // restart of either side starts from its file.
    let resent = b.get_current_snapshot().await.expect("get").expect("one");
    assert_eq!(resent.meta, built.meta);
    assert_eq!(
        StateMachine::from_snapshot(resent.snapshot.get_ref()).expect("decode"),
        at_build
    );
    drop((a, b));
    for dir in [a_dir.path(), b_dir.path()] {
        let mut reopened = StateMachineStore::new(open(dir), DurableIndex::everything());
        assert_eq!(*reopened.shared.read(), at_build);
        let applied = reopened.applied_state().await.expect("applied");
        assert_eq!(applied.0, Some(log_id(200)));
        // The log tail on top, as openraft replays it after a restart.
        let mut tail = at_build.clone();
        apply(&mut reopened, &mut tail, 201..=210).await;
        assert_eq!(*reopened.shared.read(), expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_built_during_apply_has_the_index_of_its_state() {
    const ENTRIES: u64 = 3_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = StateMachineStore::new(open(dir.path()), DurableIndex::everything());
    let shared = store.shared.clone();
    let builder = tokio::task::spawn_blocking(move || {
        let mut checked = 0;
        loop {
            let (meta, bytes) = shared.write_snapshot().expect("build");
            let index = meta.last_log_id.map_or(0, |l| l.index);
            if bytes > 0 {
                let data = snapshot_file::load(&shared.snapshot_dir)
                    .expect("load")
                    .expect("one")
                    .data;
                let state = StateMachine::from_snapshot(&data).expect("decode");
                // Entry i opened session i: a state with one entry more
                // than its meta says would be applied twice at restart.
                assert_eq!(state.counts().sessions as u64, index, "after {checked}");
                checked += 1;
            }
            if index == ENTRIES {
                return;
            }
        }
    });
    let mut expected = StateMachine::new();
    for index in 1..=ENTRIES {
        apply(&mut store, &mut expected, index..=index).await;
    }
    builder.await.expect("builder");
}

#[tokio::test]
async fn an_older_build_never_replaces_a_newer_snapshot_in_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = StateMachineStore::new(open(dir.path()), DurableIndex::everything());
    let mut expected = StateMachine::new();
    apply(&mut store, &mut expected, 1..=10).await;
    // A snapshot at 20 saved (as an install does) while a build of the
    // state at 10 is under way.
    let newer = SnapshotMeta {
        last_log_id: Some(log_id(20)),
        last_membership: StoredMembership::default(),
        snapshot_id: "newer".into(),
    };
    store
        .shared
        .save_snapshot(&newer, &expected.to_snapshot().expect("encode"))
        .expect("save");
    let (meta, bytes) = store.shared.write_snapshot().expect("build");
    assert_eq!((meta, bytes), (newer.clone(), 0));
    let in_file = snapshot_file::load(dir.path()).expect("load").expect("one");
    assert_eq!(in_file.meta, newer);
}

/// First index in the log on disk.
async fn first_in_log(log: &mut raftlock_storage::SledLogStore<TypeConfig>) -> Option<u64> {
    use openraft::RaftLogReader;
    let entries = log.try_get_log_entries(..).await.expect("read log");
    entries.first().map(|e| e.log_id.index)
}

/// The log store purges only what a durable snapshot covers: installing a
/// snapshot from the leader and building one each raise its floor once the
/// file is written, which carries out the purge openraft asked for earlier.
#[tokio::test]
async fn durable_snapshots_raise_the_log_stores_floor() {
    use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
    use raftlock_storage::{SledLogConfig, SledLogStore};

    let (leader_dir, dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let config = SledLogConfig::new(dir.path().join("log")).with_snapshot_gated_purge(true);
    let mut log = SledLogStore::<TypeConfig>::open(&config).expect("open log");
    let floor = log.snapshot_floor();
    let shared = open_with(dir.path(), floor.clone());
    let mut store = StateMachineStore::new(shared, DurableIndex::everything());
    assert_eq!(floor.current(), None, "no snapshot on disk");
    log.blocking_append((1..=50).map(|i| entry(i).0))
        .await
        .expect("append");

    // A follower: openraft purges through the snapshot it is installing
    // before the state machine has written it.
    log.purge(log_id(40)).await.expect("purge");
    assert_eq!(first_in_log(&mut log).await, Some(1), "no durable snapshot");
    let mut leader = StateMachineStore::new(open(leader_dir.path()), DurableIndex::everything());
    let mut expected = StateMachine::new();
    apply(&mut leader, &mut expected, 1..=40).await;
    let mut builder = leader.get_snapshot_builder().await;
    builder.build_snapshot().await.expect("build");
    let sent = leader.get_current_snapshot().await.expect("get");
    let sent = sent.expect("a snapshot");
    store
        .install_snapshot(&sent.meta, sent.snapshot)
        .await
        .expect("install");
    assert_eq!(floor.current(), Some(40));
    assert_eq!(first_in_log(&mut log).await, Some(41));

    // Its own snapshot, later: the floor follows.
    apply(&mut store, &mut expected, 41..=45).await;
    let mut builder = store.get_snapshot_builder().await;
    builder.build_snapshot().await.expect("build");
    assert_eq!(floor.current(), Some(45));
}
