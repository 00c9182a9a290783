//! The in-memory index of the log: for each live entry, where its record
//! is and its log id (so the log's state and purge targets need no disk
//! read). Rebuilt by the scan at open.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use openraft::{LogId, NodeId};

/// Where one entry's record is.
#[derive(Debug, Clone)]
pub(crate) struct Loc<NID: NodeId> {
    pub(crate) seq: u64,
    pub(crate) offset: u64,
    /// Bytes of the framed record.
    pub(crate) framed: u64,
    pub(crate) log_id: LogId<NID>,
}

/// Live entries by index. A map rather than a contiguous array: openraft's
/// storage suite writes over indexes that are not at the end (as a key-value
/// store allows), and the store keeps that behaviour.
pub(crate) struct Index<NID: NodeId> {
    map: BTreeMap<u64, Loc<NID>>,
}

impl<NID: NodeId> Default for Index<NID> {
    fn default() -> Self {
        Self {
            map: BTreeMap::new(),
        }
    }
}

impl<NID: NodeId> Index<NID> {
    pub(crate) fn insert(&mut self, loc: Loc<NID>) {
        self.map.insert(loc.log_id.index, loc);
    }

    /// Forgets the entries with index `>= index`.
    pub(crate) fn remove_from(&mut self, index: u64) {
        drop(self.map.split_off(&index));
    }

    /// Forgets the entries with index `<= index`.
    pub(crate) fn remove_upto(&mut self, index: u64) {
        self.map = match index.checked_add(1) {
            Some(from) => self.map.split_off(&from),
            None => BTreeMap::new(),
        };
    }

    /// Entries with index in `[start, end)` (`end == None`: unbounded).
    pub(crate) fn range(
        &self,
        start: u64,
        end: Option<u64>,
    ) -> impl Iterator<Item = (u64, &Loc<NID>)> + '_ {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        self.map
            .range((Bound::Included(start), end))
            .map(|(i, loc)| (*i, loc))
    }

    pub(crate) fn last(&self) -> Option<&LogId<NID>> {
        self.map.last_key_value().map(|(_, loc)| &loc.log_id)
    }

    pub(crate) fn last_upto(&self, index: u64) -> Option<&LogId<NID>> {
        self.map
            .range(..=index)
            .next_back()
            .map(|(_, loc)| &loc.log_id)
    }

    pub(crate) fn get(&self, index: u64) -> Option<&LogId<NID>> {
        self.map.get(&index).map(|loc| &loc.log_id)
    }

    /// The first run of missing indexes after `after` (after the first
    /// entry present when `None`), as `(first missing, last missing)`;
    /// `None` when the entries there are consecutive.
    pub(crate) fn first_gap_after(&self, after: Option<u64>) -> Option<(u64, u64)> {
        let from = match after {
            Some(a) => a.checked_add(1)?,
            None => 0,
        };
        let mut expected = after.map(|a| a + 1);
        for index in self.map.range(from..).map(|(i, _)| *i) {
            if let Some(expected) = expected.filter(|e| *e < index) {
                return Some((expected, index - 1));
            }
            expected = index.checked_add(1);
        }
        None
    }
}

/// `range` as `[start, end)`, `end == None` meaning unbounded; `None` if the
/// range is empty (including ranges openraft should never pass, such as a
/// start past the end).
pub(crate) fn half_open(range: &impl RangeBounds<u64>) -> Option<(u64, Option<u64>)> {
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
    use super::*;

    fn loc(i: u64) -> Loc<u64> {
        Loc {
            seq: 1,
            offset: i * 64,
            framed: 64,
            log_id: openraft::testing::log_id(1, 0, i),
        }
    }

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
        let excl = (Bound::Excluded(u64::MAX), Bound::Unbounded);
        assert_eq!(half_open(&excl), None);
    }

    #[test]
    fn truncate_purge_and_gaps() {
        let mut index = Index::default();
        for i in [1, 2, 3, 5, 6] {
            index.insert(loc(i));
        }
        assert_eq!(index.first_gap_after(None), Some((4, 4)));
        assert_eq!(index.first_gap_after(Some(4)), None);
        assert_eq!(index.first_gap_after(Some(0)), Some((4, 4)));
        index.remove_upto(2);
        assert_eq!(
            index.range(0, None).map(|(i, _)| i).collect::<Vec<_>>(),
            vec![3, 5, 6]
        );
        index.remove_from(5);
        assert_eq!(index.last().map(|id| id.index), Some(3));
        assert_eq!(index.last_upto(2), None);
        index.remove_upto(u64::MAX);
        assert!(index.last().is_none());
    }
}
