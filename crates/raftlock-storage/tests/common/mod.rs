//! Test scaffolding shared by the integration tests: a type config and a
//! minimal in-memory state machine (openraft's conformance suite needs one;
//! the real state machine lives in the node crate).

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use raftlock_storage::{Durability, SledLogConfig, SledLogStore};
use serde::{Deserialize, Serialize};

/// Application command of the test config: set `key` to `value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Put {
    pub key: String,
    pub value: Vec<u8>,
}

/// Response: the previous value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Previous(pub Option<Vec<u8>>);

openraft::declare_raft_types!(
    /// Type config for the tests; `D` is a struct (not openraft's default
    /// `String`) so the store is exercised with a real serde payload.
    pub TestConfig: D = Put, R = Previous
);

pub type Store = SledLogStore<TestConfig>;

/// Opens a store in `dir` with the given durability.
pub fn open(dir: &std::path::Path, durability: Durability) -> Store {
    Store::open(&SledLogConfig::new(dir).with_durability(durability)).expect("open store")
}

/// Edits tree `tree` of the closed database in `dir` (tests that name the
/// on-disk layout on purpose).
pub fn edit(
    dir: &std::path::Path,
    tree: &str,
    f: impl FnOnce(&sled::Tree) -> sled::Result<()>,
) -> anyhow::Result<()> {
    let db = sled::open(dir)?;
    f(&db.open_tree(tree)?)?;
    db.flush()?;
    Ok(())
}

pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    openraft::testing::log_id(term, 0, index)
}

/// A normal entry whose payload names its index.
pub fn put_entry(term: u64, index: u64, value_len: usize) -> Entry<TestConfig> {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Put {
            key: format!("k{index}"),
            value: vec![(index % 251) as u8; value_len],
        }),
    }
}

/// The applied state and the data, serialized as the snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SmData {
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, BasicNode>,
    kv: BTreeMap<String, Vec<u8>>,
}

#[derive(Default)]
struct SmInner {
    data: SmData,
    current: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// In-memory state machine; clones share state (the snapshot builder is a
/// clone). A std `Mutex`, never held across an `.await`.
#[derive(Clone, Default)]
pub struct MemStateMachine {
    inner: Arc<Mutex<SmInner>>,
}

impl MemStateMachine {
    fn lock(&self) -> MutexGuard<'_, SmInner> {
        self.inner.lock().expect("state machine mutex poisoned")
    }
}

impl RaftSnapshotBuilder<TestConfig> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TestConfig>, StorageError<u64>> {
        let mut inner = self.lock();
        let bytes = bincode::serialize(&inner.data)
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        inner.snapshots_built += 1;
        let meta = SnapshotMeta {
            last_log_id: inner.data.last_applied,
            last_membership: inner.data.last_membership.clone(),
            snapshot_id: format!("snap-{}", inner.snapshots_built),
        };
        inner.current = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TestConfig> for MemStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let inner = self.lock();
        Ok((inner.data.last_applied, inner.data.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Previous>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TestConfig>> + Send,
    {
        let mut inner = self.lock();
        let mut replies = Vec::new();
        for entry in entries {
            inner.data.last_applied = Some(entry.log_id);
            let reply = match entry.payload {
                EntryPayload::Blank => Previous(None),
                EntryPayload::Normal(put) => Previous(inner.data.kv.insert(put.key, put.value)),
                EntryPayload::Membership(m) => {
                    inner.data.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    Previous(None)
                }
            };
            replies.push(reply);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let data: SmData = bincode::deserialize(&bytes)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let mut inner = self.lock();
        inner.data = data;
        inner.current = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TestConfig>>, StorageError<u64>> {
        let inner = self.lock();
        Ok(inner.current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        }))
    }
}
