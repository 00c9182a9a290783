//! The log entries tree: big-endian index keys, bincode entry values.
//!
//! Generic over the entry type rather than the openraft type config, so it
//! knows only what it needs: entries serialize and carry their log id.

use std::ops::{Bound, RangeBounds};

use openraft::{LogId, NodeId, RaftLogId};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{decode_raw, encode_sealed, index_key, key_index, unseal};
use crate::error::StoreError;

/// Handle to the entries tree; cheap to clone (sled trees are shared).
#[derive(Clone)]
pub(crate) struct LogTree {
    tree: sled::Tree,
}

impl LogTree {
    /// Opens (or creates) the tree `name` of `db`.
    pub(crate) fn open(db: &sled::Db, name: &str) -> Result<Self, StoreError> {
        Ok(Self {
            tree: db.open_tree(name)?,
        })
    }

    /// Writes all `entries` atomically: after a crash either all of them are
    /// there or none, so an append never leaves a hole. Readable as soon as
    /// this returns; durable after the next barrier. Returns the index of
    /// the last entry written, if any.
    pub(crate) fn append<E, NID>(
        &self,
        entries: impl IntoIterator<Item = E>,
    ) -> Result<Option<u64>, StoreError>
    where
        E: Serialize + RaftLogId<NID>,
        NID: NodeId,
    {
        let mut records = Vec::new();
        let mut last = None;
        for entry in entries {
            let index = entry.get_log_id().index;
            last = Some(index);
            let key = index_key(index);
            records.push((key, encode_sealed("log entry", &key, &entry)?));
        }
        match <[_; 1]>::try_from(records) {
            // A single insert is atomic by itself and skips what sled does
            // for every batch: seal the current IO buffer and write a batch
            // manifest as a separate IO, one more `sync_file_range` wait
            // (measured: about -150 µs per one-entry append here).
            Ok([(key, value)]) => {
                self.tree.insert(key, value)?;
            }
            Err(records) if records.is_empty() => {}
            Err(records) => {
                let mut batch = sled::Batch::default();
                for (key, value) in records {
                    batch.insert(&key, value);
                }
                self.tree.apply_batch(batch)?;
            }
        }
        Ok(last)
    }

    /// Entries whose index is in `range`, in index order. Missing indexes
    /// are skipped (openraft allows that for `try_get_log_entries`).
    pub(crate) fn range<E, NID>(&self, range: impl RangeBounds<u64>) -> Result<Vec<E>, StoreError>
    where
        E: DeserializeOwned + RaftLogId<NID>,
        NID: NodeId,
    {
        let Some((start, end)) = half_open(&range) else {
            return Ok(Vec::new());
        };
        let start = Bound::Included(index_key(start));
        let end = end.map_or(Bound::Unbounded, |e| Bound::Excluded(index_key(e)));
        self.tree
            .range::<[u8; 8], _>((start, end))
            .map(|kv| {
                let (key, value) = kv?;
                decode_entry(&key, &value)
            })
            .collect()
    }

    /// Log id of the entry with the highest index, if any.
    pub(crate) fn last_log_id<E, NID>(&self) -> Result<Option<LogId<NID>>, StoreError>
    where
        E: DeserializeOwned + RaftLogId<NID>,
        NID: NodeId,
    {
        match self.tree.last()? {
            None => Ok(None),
            Some((key, value)) => {
                let entry: E = decode_entry(&key, &value)?;
                Ok(Some(entry.get_log_id().clone()))
            }
        }
    }

    /// Log id of the entry with the highest index `<= index`, if any.
    pub(crate) fn last_log_id_upto<E, NID>(
        &self,
        index: u64,
    ) -> Result<Option<LogId<NID>>, StoreError>
    where
        E: DeserializeOwned + RaftLogId<NID>,
        NID: NodeId,
    {
        match self.tree.range(..=index_key(index)).next_back() {
            None => Ok(None),
            Some(kv) => {
                let (key, value) = kv?;
                let entry: E = decode_entry(&key, &value)?;
                Ok(Some(entry.get_log_id().clone()))
            }
        }
    }

    /// Index of the entry with the highest index, read from its key alone.
    pub(crate) fn last_index(&self) -> Result<Option<u64>, StoreError> {
        self.tree
            .last()?
            .map(|(key, _)| key_index(&key))
            .transpose()
    }

    /// The first run of missing indexes after `after` (after the first
    /// entry present when `None`), as `(first missing, last missing)`; `None`
    /// when the entries there are consecutive. A log with no entry after
    /// `after` has no gap. Reads every key after `after`: for start-up.
    pub(crate) fn first_gap_after(
        &self,
        after: Option<u64>,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let keys = match after {
            Some(after) => match after.checked_add(1) {
                Some(from) => self.tree.range(index_key(from)..),
                None => return Ok(None),
            },
            None => self.tree.iter(),
        };
        let mut expected = after.map(|a| a + 1);
        for key in keys.keys() {
            let index = key_index(&key?)?;
            if let Some(expected) = expected.filter(|e| *e < index) {
                return Ok(Some((expected, index - 1)));
            }
            expected = index.checked_add(1);
        }
        Ok(None)
    }

    /// Every `(index, stored value)` pair from `from` on, for the check at
    /// open. Reads the whole tail: for start-up only.
    pub(crate) fn raw_from(&self, from: u64) -> Result<Vec<(u64, sled::IVec)>, StoreError> {
        self.tree
            .range(index_key(from)..)
            .map(|kv| {
                let (key, value) = kv?;
                Ok((key_index(&key)?, value))
            })
            .collect()
    }

    /// Deletes the entries with index `>= index`, atomically.
    pub(crate) fn remove_from(&self, index: u64) -> Result<(), StoreError> {
        self.remove_keys(self.tree.range(index_key(index)..))
    }

    /// Deletes the entries with index `<= index`, oldest first, one key at
    /// a time.
    ///
    /// Not in one batch: sled copies a leaf for every key it removes and
    /// frees the copies through epoch-based reclamation, which runs only
    /// as threads pin and unpin. A batch holds one pin (and sled's global
    /// write lock) for all of its keys, so purging the 10,000 entries a
    /// snapshot covers as one batch allocated ~30 MB at once (heaptrack,
    /// 10,000 sessions), and that peak stayed in the process's RSS; batches
    /// of 128 keys still had 10–13 MB alive at the peak, single removes 5 MB
    /// (and take no longer: 55–85 ms for 9,000 entries). Removing from
    /// the head in order cannot leave a hole: a crash part way leaves a
    /// shorter prefix at or below the purge pointer the store saved first,
    /// and the store removes it again at open.
    pub(crate) fn remove_upto(&self, index: u64) -> Result<(), StoreError> {
        let keys = self
            .tree
            .range(..=index_key(index))
            .keys()
            .collect::<Result<Vec<_>, _>>()?;
        for key in keys {
            self.tree.remove(key)?;
        }
        Ok(())
    }

    /// One batch, so a crash cannot leave a hole in the middle of the log.
    fn remove_keys(&self, iter: sled::Iter) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for key in iter.keys() {
            batch.remove(key?);
        }
        self.tree.apply_batch(batch)?;
        Ok(())
    }
}

/// Decodes one stored entry and checks it sits under its own index.
pub(crate) fn decode_entry<E, NID>(key: &[u8], value: &[u8]) -> Result<E, StoreError>
where
    E: DeserializeOwned + RaftLogId<NID>,
    NID: NodeId,
{
    let index = key_index(key)?;
    let payload = unseal(key, value).map_err(|seal| StoreError::EntryChecksum {
        index,
        detail: seal.to_string(),
    })?;
    let entry: E =
        decode_raw(payload).map_err(|source| StoreError::CorruptEntry { index, source })?;
    let entry_index = entry.get_log_id().index;
    if entry_index != index {
        return Err(StoreError::IndexMismatch {
            key: index,
            entry: entry_index,
        });
    }
    Ok(entry)
}

/// `range` as `[start, end)`, `end == None` meaning unbounded; `None` if the
/// range is empty (including ranges openraft should never pass, such as a
/// start past the end), so no inverted range ever reaches sled.
fn half_open(range: &impl RangeBounds<u64>) -> Option<(u64, Option<u64>)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        // `u64::MAX` inclusive has no exclusive bound: treat as unbounded.
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => None,
    };
    match end {
        Some(end) if end <= start => None,
        _ => Some((start, end)),
    }
}

#[cfg(test)]
mod tests {
    use super::half_open;

    #[test]
    fn ranges_normalize_to_half_open() {
        assert_eq!(half_open(&(3..7)), Some((3, Some(7))));
        assert_eq!(half_open(&(3..=7)), Some((3, Some(8))));
        assert_eq!(half_open(&(3..)), Some((3, None)));
        assert_eq!(half_open(&(..)), Some((0, None)));
        assert_eq!(half_open(&(..=u64::MAX)), Some((0, None)));
        assert_eq!(half_open(&(5..5)), None);
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = 7..3;
        assert_eq!(half_open(&inverted), None);
        let excl = (
            std::ops::Bound::Excluded(u64::MAX),
            std::ops::Bound::Unbounded,
        );
        assert_eq!(half_open(&excl), None);
    }
}
