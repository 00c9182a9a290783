//! One kept change as bytes: what lets the history hold its 10,000
//! changes in a fraction of the memory of `Change` values.
//!
//! A `Change` is 112 bytes (a node's owner aligns it to 16) plus a heap
//! allocation for its path, ~160 bytes for a lock node; at the benchmark's
//! 10,000 sessions that was ~200 bytes of every member's memory per
//! session (docs/benchmarks.md, gap 4). Encoded, the same change is ~60
//! bytes: numbers as LEB128 varints (revisions, versions and lengths are
//! small), the owner only when there is one, and no allocation of its own.
//!
//! Layout: revision, path length, path, then a tag: 0 deleted, 1 a node
//! without owner, 2 a node with one; for a node: version, create revision,
//! mod revision, next child sequence, the owner's 16 bytes (little
//! endian) if tagged so, data length, data.

use raftlock_core::{Node, NodeMeta, SessionId};

use super::Change;

const DELETED: u8 = 0;
const NODE: u8 = 1;
const OWNED_NODE: u8 = 2;

/// Appends the change of `path` at `revision` to `out`; `node` is the
/// node after it (`None`: deleted).
pub(super) fn encode(revision: u64, path: &str, node: Option<&Node>, out: &mut Vec<u8>) {
    put_varint(out, revision);
    put_bytes(out, path.as_bytes());
    let Some(node) = node else {
        out.push(DELETED);
        return;
    };
    out.push(if node.ephemeral_owner.is_some() {
        OWNED_NODE
    } else {
        NODE
    });
    put_varint(out, node.version);
    put_varint(out, node.create_revision);
    put_varint(out, node.mod_revision);
    put_varint(out, node.next_child_sequence);
    if let Some(owner) = node.ephemeral_owner {
        out.extend_from_slice(&owner.0.to_le_bytes());
    }
    put_bytes(out, &node.data);
}

/// Most bytes `encode` may add besides the path and the data.
pub(super) const MAX_OVERHEAD: usize = 6 * 10 + 1 + 16 + 10;

/// One encoded change, read in place.
pub(super) struct Entry<'a> {
    pub revision: u64,
    pub path: &'a [u8],
    /// The node after the change; `None`: deleted.
    pub node: Option<EncodedNode<'a>>,
}

/// A node's fields, read in place.
pub(super) struct EncodedNode<'a> {
    data: &'a [u8],
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<SessionId>,
    next_child_sequence: u64,
}

impl Entry<'_> {
    /// Bytes of data the change carries.
    pub fn data_len(&self) -> usize {
        self.node.as_ref().map_or(0, |n| n.data.len())
    }

    /// The change as the history hands it out; `path` is `self.path`.
    pub fn to_change(&self, path: &str) -> Change {
        Change {
            revision: self.revision,
            path: path.to_string(),
            node: self.node.as_ref().map(|n| Node {
                data: n.data.into(),
                version: n.version,
                create_revision: n.create_revision,
                mod_revision: n.mod_revision,
                ephemeral_owner: n.ephemeral_owner,
                next_child_sequence: n.next_child_sequence,
                // Times and counters are not recorded: a change tells a
                // watch what happened, a read gives the stat.
                meta: NodeMeta::default(),
                acl: None,
            }),
        }
    }
}

/// A reader over encoded changes, oldest first.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes` from `at`, where a change starts.
    pub fn new(bytes: &'a [u8], at: usize) -> Self {
        Reader { bytes, at }
    }

    /// Where the next change starts.
    pub fn at(&self) -> usize {
        self.at
    }

    /// The next change; `None` at the end, or on bytes that `encode` did
    /// not write.
    pub fn next_entry(&mut self) -> Option<Entry<'a>> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let revision = self.varint()?;
        let path = self.bytes_field()?;
        let tag = *self.bytes.get(self.at)?;
        self.at += 1;
        if tag == DELETED {
            return Some(Entry {
                revision,
                path,
                node: None,
            });
        }
        let version = self.varint()?;
        let create_revision = self.varint()?;
        let mod_revision = self.varint()?;
        let next_child_sequence = self.varint()?;
        let ephemeral_owner = if tag == OWNED_NODE {
            let raw = self.bytes.get(self.at..self.at.checked_add(16)?)?;
            self.at += 16;
            Some(SessionId(u128::from_le_bytes(raw.try_into().ok()?)))
        } else {
            None
        };
        let data = self.bytes_field()?;
        Some(Entry {
            revision,
            path,
            node: Some(EncodedNode {
                data,
                version,
                create_revision,
                mod_revision,
                ephemeral_owner,
                next_child_sequence,
            }),
        })
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn bytes_field(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let field = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(field)
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(change: &Change) -> usize {
        let mut bytes = vec![7]; // a change before it, partly dropped
        encode(
            change.revision,
            &change.path,
            change.node.as_ref(),
            &mut bytes,
        );
        let added = bytes.len() - 1;
        let data = change.node.as_ref().map_or(0, |n| n.data.len());
        assert!(added <= change.path.len() + data + MAX_OVERHEAD);
        let mut r = Reader::new(&bytes, 1);
        let entry = r.next_entry().expect("a change");
        assert_eq!(entry.data_len(), data);
        let path = std::str::from_utf8(entry.path).expect("utf-8");
        assert_eq!(&entry.to_change(path), change);
        assert_eq!(r.at(), bytes.len());
        assert!(r.next_entry().is_none());
        added
    }

    #[test]
    fn changes_round_trip_compactly() {
        let lock_node = Change {
            revision: 20_417,
            path: "/locks/s10000-1234/lock-0000020417".into(),
            node: Some(Node {
                data: Box::default(),
                version: 1,
                create_revision: 20_417,
                mod_revision: 20_417,
                ephemeral_owner: Some(SessionId(u128::MAX - 5)),
                next_child_sequence: 0,
                meta: NodeMeta::default(),
                acl: None,
            }),
        };
        assert!(
            round_trip(&lock_node) <= 64,
            "a lock node's change is small"
        );
        let extremes = Change {
            revision: u64::MAX,
            path: "/é".into(),
            node: Some(Node {
                data: vec![0, 255, 128].into(),
                version: u64::MAX,
                create_revision: 0,
                mod_revision: 1 << 63,
                ephemeral_owner: None,
                next_child_sequence: 127,
                meta: NodeMeta::default(),
                acl: None,
            }),
        };
        round_trip(&extremes);
        round_trip(&Change {
            revision: 3,
            path: "/a".into(),
            node: None,
        });
    }

    #[test]
    fn truncated_bytes_read_as_the_end() {
        let node = Node {
            data: vec![1, 2].into(),
            version: 300,
            create_revision: 1,
            mod_revision: 2,
            ephemeral_owner: Some(SessionId(9)),
            next_child_sequence: 0,
            meta: NodeMeta::default(),
            acl: None,
        };
        let mut bytes = Vec::new();
        encode(300, "/a/b", Some(&node), &mut bytes);
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut], 0);
            assert!(r.next_entry().is_none(), "cut at {cut}");
        }
    }
}
