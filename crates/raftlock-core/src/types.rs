//! Values stored in the state machine.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::node_set::NodeSet;

/// A session's identity: 128 random bits chosen by the proposer, so the
/// state machine stays deterministic and ids stay unguessable. Printed as
/// 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SessionId(pub u128);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The text was not 32 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a session id is 32 hexadecimal digits")]
pub struct ParseSessionIdError;

impl FromStr for SessionId {
    type Err = ParseSessionIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseSessionIdError);
        }
        u128::from_str_radix(s, 16)
            .map(SessionId)
            .map_err(|_| ParseSessionIdError)
    }
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Opaque payload (an election's value, a recipe's data). Boxed, not a
    /// `Vec`: it is replaced, never grown, and the spare capacity word is
    /// what rounds a node up from 80 to 96 bytes (a session id aligns it
    /// to 16).
    pub data: Box<[u8]>,
    /// 1 on create, +1 per data change; 0 means "absent" in a CAS.
    pub version: u64,
    /// Revision of the command that created the node; a lock node's
    /// fencing token.
    pub create_revision: u64,
    /// Revision of the command that last changed the node.
    pub mod_revision: u64,
    /// The session whose end deletes this node, if ephemeral.
    pub ephemeral_owner: Option<SessionId>,
    /// Next suffix for a sequential child created under this node.
    pub next_child_sequence: u64,
    /// Clock times and child/ACL change counters (ZooKeeper's `Stat`).
    /// Snapshot formats 1 to 3 lack it (`snapshot.rs`).
    pub meta: NodeMeta,
    /// The ACL a ZooKeeper client gave it, `None` for the open ACL
    /// (`world:anyone`, every permission): one pointer for the common
    /// case. Stored and returned, never enforced (docs/zookeeper.md).
    /// Last field: snapshot formats 1 to 5 lack it.
    pub acl: Option<Box<NodeAcl>>,
}

/// One entry of a node's ACL, as ZooKeeper writes it: permission bits
/// (read 1, write 2, create 4, delete 8, admin 16) for an identity named
/// by a scheme and an id (`world:anyone`, `digest:user:hash`, `ip:10.0.0.0/8`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclEntry {
    /// Permission bits, as given.
    pub perms: u32,
    /// `world`, `digest`, `ip`.
    pub scheme: String,
    /// The identity within the scheme.
    pub id: String,
}

impl AclEntry {
    /// Every permission ZooKeeper defines (`ZooDefs.Perms.ALL`).
    pub const ALL_PERMS: u32 = 31;

    /// `world:anyone` with every permission: ZooKeeper's
    /// `OPEN_ACL_UNSAFE`, what a node without a stored ACL reports.
    pub fn open() -> AclEntry {
        AclEntry {
            perms: Self::ALL_PERMS,
            scheme: "world".into(),
            id: "anyone".into(),
        }
    }
}

/// A node's stored ACL: a non-empty list other than the open ACL alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAcl(pub Vec<AclEntry>);

impl NodeAcl {
    /// How `entries` is stored: `None` for the open ACL (exactly
    /// `world:anyone` with every permission), boxed otherwise.
    pub fn stored(entries: &[AclEntry]) -> Option<Box<NodeAcl>> {
        match entries {
            [only] if *only == AclEntry::open() => None,
            _ => Some(Box::new(NodeAcl(entries.to_vec()))),
        }
    }

    /// The entries a node reports: the stored ones or the open ACL.
    pub fn entries_of(acl: Option<&NodeAcl>) -> Vec<AclEntry> {
        acl.map_or_else(|| vec![AclEntry::open()], |a| a.0.clone())
    }
}

/// The rest of a node's ZooKeeper-style stat: when it was created and
/// last written, and how often its children and ACL changed. Times come
/// from the proposer of the command (`Command::Stamped`), never from a
/// replica's clock during apply, so every replica holds the same values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// Milliseconds since the Unix epoch when the node was created.
    pub created_ms: u64,
    /// Milliseconds since the Unix epoch when its data last changed.
    pub modified_ms: u64,
    /// Revision of the last child created or deleted under it (its
    /// creation revision until then): ZooKeeper's `pzxid`.
    pub child_revision: u64,
    /// Children created or deleted under it: ZooKeeper's `cversion`,
    /// which also numbers the strict sequential creates.
    pub child_version: u32,
    /// ACL changes (`TreeOp::SetAcl`, `TreeOp::ReplaceAcl`): ZooKeeper's
    /// `aversion`. The ACL itself is `Node::acl`.
    pub acl_version: u32,
}

/// A client session. Its deadline is not here: the leader tracks
/// deadlines in memory and ends sessions through an explicit command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Free label shown in listings (e.g. "worker-7"). Never changes, so
    /// a `Box<str>`: one word less per session in the sessions map.
    pub owner: Box<str>,
    /// Time to live without a keepalive, in milliseconds.
    pub ttl_ms: u64,
    /// Every ephemeral node the session owns, lock nodes included, so
    /// ending it deletes exactly these.
    pub(crate) nodes: NodeSet,
    /// Remaining TTL recorded by a leader's checkpoint and not renewed
    /// since; counted from when each replica applied that checkpoint.
    pub checkpoint_remaining_ms: Option<u64>,
    /// The authenticated principal (bearer token name) that opened the
    /// session, `None` when the API ran without tokens or for the
    /// embedded in-process API. Only this principal (or a cluster admin)
    /// may use the session. Last field: snapshot format 1 lacks it
    /// (`snapshot.rs` reads both).
    pub principal: Option<Box<str>>,
}

/// Which recipe a queue belongs to; decides the tree prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum QueueKind {
    /// A mutex under `/locks/`.
    Lock,
    /// A leader election under `/elections/`, the value in node data.
    Election,
}

impl QueueKind {
    /// The tree prefix of this kind's queues.
    pub fn prefix(self) -> &'static str {
        match self {
            QueueKind::Lock => crate::path::LOCKS_PREFIX,
            QueueKind::Election => crate::path::ELECTIONS_PREFIX,
        }
    }

    /// Tree path of the queue named `name` (`orders/42` → `/locks/orders/42`).
    pub fn queue_path(self, name: &str) -> String {
        format!("{}/{name}", self.prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_acl_is_stored_as_nothing() {
        assert_eq!(NodeAcl::stored(&[AclEntry::open()]), None);
        let read_only = AclEntry {
            perms: 1,
            ..AclEntry::open()
        };
        let stored = NodeAcl::stored(std::slice::from_ref(&read_only));
        assert_eq!(
            NodeAcl::entries_of(stored.as_deref()),
            vec![read_only.clone()]
        );
        // Two entries, even if one is the open one, are kept as given.
        let two = [AclEntry::open(), read_only];
        assert_eq!(NodeAcl::entries_of(NodeAcl::stored(&two).as_deref()), two);
        assert_eq!(NodeAcl::entries_of(None), vec![AclEntry::open()]);
        assert_eq!(std::mem::size_of::<Option<Box<NodeAcl>>>(), 8);
    }

    #[test]
    fn session_id_round_trip() {
        let id = SessionId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let text = id.to_string();
        assert_eq!(text, "0123456789abcdef0011223344556677");
        assert_eq!(text.parse::<SessionId>(), Ok(id));
        assert!("xyz".parse::<SessionId>().is_err());
        assert!("0123456789abcdef001122334455667"
            .parse::<SessionId>()
            .is_err());
        assert!("+123456789abcdef0011223344556677"
            .parse::<SessionId>()
            .is_err());
    }
}
