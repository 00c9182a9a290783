//! Small durable records for the node crate, in the same database as the
//! log so they share its durability worker and need no second engine.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{decode_sealed, encode_sealed};
use crate::error::StoreError;
use crate::sled_dirty::SledDirty;
use crate::sync_worker::SyncWorker;

/// A handful of named, bincode-encoded values (for example the node's own
/// id or the file name of its latest state-machine snapshot) that must
/// survive a crash. Not meant for bulk data: every write waits for a
/// durability barrier.
///
/// Obtained from [`SledLogStore::meta`](crate::SledLogStore::meta); cheap
/// to clone. It keeps the database open while any handle lives.
#[derive(Clone)]
pub struct MetaStore {
    tree: sled::Tree,
    sync: Arc<SyncWorker>,
    dirty: SledDirty,
}

impl MetaStore {
    pub(crate) fn new(tree: sled::Tree, sync: Arc<SyncWorker>, dirty: SledDirty) -> Self {
        Self { tree, sync, dirty }
    }

    /// The value stored under `key`, `None` if absent. Bytes that do not
    /// decode as `T` are an error.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        self.tree
            .get(key)?
            .map(|bytes| decode_sealed("metadata value", key.as_bytes(), &bytes))
            .transpose()
    }

    /// Stores `value` under `key`; durable when this returns.
    pub async fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        self.tree
            .insert(key, encode_sealed("metadata value", key.as_bytes(), value)?)?;
        self.dirty.mark();
        self.sync.sync().await
    }

    /// Removes `key` (absent is fine); durable when this returns.
    pub async fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.tree.remove(key)?;
        self.dirty.mark();
        self.sync.sync().await
    }
}
