//! A sled tree holding one typed value: the vote, the committed log id and
//! the last purged log id each live in their own tree, so each is a single
//! small write that never contends with the log's keys.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{decode_sealed, encode_sealed, unseal};
use crate::error::StoreError;
use crate::sled_dirty::SledDirty;

/// The only key used in a cell's tree.
const KEY: &[u8] = b"value";

/// One bincode-encoded `T` in its own sled tree.
pub(crate) struct Cell<T> {
    tree: sled::Tree,
    /// Names the value in errors (`"vote"`, ...).
    what: &'static str,
    dirty: SledDirty,
    _value: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> Cell<T> {
    /// Opens (or creates) the tree `name` of `db`.
    pub(crate) fn open(
        db: &sled::Db,
        name: &str,
        what: &'static str,
        dirty: &SledDirty,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            tree: db.open_tree(name)?,
            what,
            dirty: dirty.clone(),
            _value: PhantomData,
        })
    }

    /// The stored value, `None` if never set.
    pub(crate) fn get(&self) -> Result<Option<T>, StoreError> {
        self.tree
            .get(KEY)?
            .map(|bytes| decode_sealed(self.what, KEY, &bytes))
            .transpose()
    }

    /// The stored value's bincode bytes, checksum verified, `None` if never
    /// set (the watermark record keeps the vote as bytes).
    pub(crate) fn get_raw(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(stored) = self.tree.get(KEY)? else {
            return Ok(None);
        };
        let payload = unseal(KEY, &stored).map_err(|seal| StoreError::Checksum {
            what: self.what,
            detail: seal.to_string(),
        })?;
        Ok(Some(payload.to_vec()))
    }

    /// Replaces the value (in memory and sled's log; durability is the
    /// caller's barrier).
    pub(crate) fn set(&self, value: &T) -> Result<(), StoreError> {
        self.tree
            .insert(KEY, encode_sealed(self.what, KEY, value)?)?;
        self.dirty.mark();
        Ok(())
    }
}
