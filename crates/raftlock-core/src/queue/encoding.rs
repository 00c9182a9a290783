//! A queue's snapshot encoding: the two maps the queue always was
//! (sequence → entry, session → sequence), written in key order from
//! either in-memory form. Snapshots written before the small form existed
//! still decode, and replicas write the same bytes for the same queue.

use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{LargeQueue, LockQueue, QueueEntry, Repr, SMALL_QUEUE_MAX};
use crate::types::SessionId;

/// The encoded queue, as decoded.
#[derive(Deserialize)]
#[serde(rename = "LockQueue")]
pub(super) struct EncodedQueue {
    entries: BTreeMap<u64, QueueEntry>,
    by_session: BTreeMap<SessionId, u64>,
}

impl TryFrom<EncodedQueue> for LockQueue {
    type Error = String;

    /// Refuses a session index that disagrees with the entries: the
    /// decoded queue keeps one of them, so they must say the same thing.
    fn try_from(encoded: EncodedQueue) -> Result<Self, Self::Error> {
        let EncodedQueue {
            entries,
            by_session,
        } = encoded;
        let agree = entries.len() == by_session.len()
            && entries
                .iter()
                .all(|(seq, e)| by_session.get(&e.session) == Some(seq));
        if !agree {
            return Err("a lock queue's session index disagrees with its entries".into());
        }
        let repr = if entries.len() <= SMALL_QUEUE_MAX {
            Repr::Small(entries.into_iter().collect())
        } else {
            Repr::Large(Box::new(LargeQueue {
                entries,
                by_session,
            }))
        };
        Ok(LockQueue { repr })
    }
}

impl Serialize for LockQueue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("LockQueue", 2)?;
        out.serialize_field("entries", &EncodedEntries(self))?;
        out.serialize_field("by_session", &EncodedIndex(self))?;
        out.end()
    }
}

/// Sequence → entry, in sequence order.
struct EncodedEntries<'a>(&'a LockQueue);

impl Serialize for EncodedEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter())
    }
}

/// Session → sequence, in session order whatever the representation.
struct EncodedIndex<'a>(&'a LockQueue);

impl Serialize for EncodedIndex<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0.repr {
            Repr::Small(v) => {
                let mut index: Vec<(SessionId, u64)> =
                    v.iter().map(|(seq, e)| (e.session, *seq)).collect();
                index.sort_unstable();
                serializer.collect_map(index)
            }
            Repr::Large(l) => l.by_session.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape a queue had when it was always two maps.
    #[derive(Serialize)]
    struct MapsQueue {
        entries: BTreeMap<u64, QueueEntry>,
        by_session: BTreeMap<SessionId, u64>,
    }

    fn as_maps(q: &LockQueue) -> MapsQueue {
        MapsQueue {
            entries: q.iter().map(|(s, e)| (s, e.clone())).collect(),
            by_session: q.iter().map(|(s, e)| (e.session, s)).collect(),
        }
    }

    #[test]
    fn encodes_as_the_two_maps_in_either_representation() {
        let mut q = LockQueue::default();
        // Session ids out of sequence order, so the index must be sorted.
        for i in 0..SMALL_QUEUE_MAX as u64 + 3 {
            q.push(SessionId(u128::from(i * 7919 % 101)), 10 + i);
            let bytes = bincode::serialize(&q).expect("encode");
            assert_eq!(bytes, bincode::serialize(&as_maps(&q)).expect("encode"));
            let decoded: LockQueue = bincode::deserialize(&bytes).expect("decode");
            assert_eq!(decoded, q, "at {} entries", q.len());
        }
    }

    #[test]
    fn a_disagreeing_session_index_is_refused() {
        let mut q = LockQueue::default();
        q.push(SessionId(1), 10);
        q.push(SessionId(2), 11);
        let mut maps = as_maps(&q);
        maps.by_session.insert(SessionId(2), 10);
        let bytes = bincode::serialize(&maps).expect("encode");
        assert!(bincode::deserialize::<LockQueue>(&bytes).is_err());
        maps.by_session.insert(SessionId(3), 11);
        let bytes = bincode::serialize(&maps).expect("encode");
        assert!(bincode::deserialize::<LockQueue>(&bytes).is_err());
    }
}
