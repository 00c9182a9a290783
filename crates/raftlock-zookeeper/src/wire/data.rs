//! Records and enumerations both directions share: `Stat`, `ACL`/`Id`,
//! `ClientInfo`, and the small integer enumerations inside requests and
//! events (`CreateMode`, watcher types, addWatch modes, event types,
//! keeper states). Unknown values of the enumerations are typed errors.

use super::jute::{int_enum, record};

record! {
    /// A node's metadata, all 11 fields of `org.apache.zookeeper.data.Stat`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Stat {
        /// The zxid that created the node.
        pub czxid: i64,
        /// The zxid that last modified its data.
        pub mzxid: i64,
        /// Creation time, ms since the epoch.
        pub ctime: i64,
        /// Last modification time, ms since the epoch.
        pub mtime: i64,
        /// Data version.
        pub version: i32,
        /// Children version.
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// The owning session of an ephemeral node, 0 otherwise.
        pub ephemeral_owner: i64,
        pub data_length: i32,
        pub num_children: i32,
        /// The zxid that last changed its children.
        pub pzxid: i64,
    }
}

record! {
    /// An identity: a scheme (`world`, `auth`, `digest`, `ip`, `x509`, ...)
    /// and an id within it.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Id {
        pub scheme: String,
        pub id: String,
    }
}

/// Permission bits of an ACL entry (`ZooDefs.Perms`).
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 1 << 1;
    pub const CREATE: i32 = 1 << 2;
    pub const DELETE: i32 = 1 << 3;
    pub const ADMIN: i32 = 1 << 4;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

record! {
    /// One ACL entry: permission bits (see [`perms`]) granted to an identity.
    /// The bits are kept as sent: ZooKeeper does not reject unknown ones.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Acl {
        pub perms: i32,
        pub id: Id,
    }
}

impl Acl {
    /// `perms` granted to `id` in `scheme`.
    pub fn new(perms: i32, scheme: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    /// `ZooDefs.Ids.OPEN_ACL_UNSAFE`'s one entry: everything to anyone.
    pub fn open_unsafe() -> Self {
        Self::new(perms::ALL, "world", "anyone")
    }
}

record! {
    /// One authenticated identity of a session, as whoAmI reports it.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ClientInfo {
        pub auth_scheme: String,
        pub user: String,
    }
}

int_enum! {
    /// A create's `flags` (`CreateMode`).
    CreateMode, UnknownCreateMode {
        Persistent = 0,
        Ephemeral = 1,
        PersistentSequential = 2,
        EphemeralSequential = 3,
        /// Deleted by the server once its last child is gone.
        Container = 4,
        /// Deleted by the server after `ttl` ms without changes or children.
        PersistentWithTtl = 5,
        PersistentSequentialWithTtl = 6,
    }
}

impl CreateMode {
    pub fn is_ephemeral(self) -> bool {
        matches!(self, Self::Ephemeral | Self::EphemeralSequential)
    }
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            Self::PersistentSequential
                | Self::EphemeralSequential
                | Self::PersistentSequentialWithTtl
        )
    }
    pub fn is_container(self) -> bool {
        self == Self::Container
    }
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            Self::PersistentWithTtl | Self::PersistentSequentialWithTtl
        )
    }
}

int_enum! {
    /// Which watches checkWatches and removeWatches address
    /// (`Watcher.WatcherType`).
    WatcherType, UnknownWatcherType {
        Children = 1,
        Data = 2,
        Any = 3,
    }
}

int_enum! {
    /// An addWatch's mode (`ZooDefs.AddWatchModes`).
    AddWatchMode, UnknownAddWatchMode {
        /// Fires on every change of the node, and stays.
        Persistent = 0,
        /// Fires on changes of the node and every descendant, and stays.
        PersistentRecursive = 1,
    }
}

int_enum! {
    /// A watcher event's type (`Watcher.Event.EventType`).
    EventType, UnknownEventType {
        /// A connection state change, no node involved.
        None = -1,
        NodeCreated = 1,
        NodeDeleted = 2,
        NodeDataChanged = 3,
        NodeChildrenChanged = 4,
        DataWatchRemoved = 5,
        ChildWatchRemoved = 6,
        PersistentWatchRemoved = 7,
    }
}

int_enum! {
    /// A watcher event's connection state (`Watcher.Event.KeeperState`).
    KeeperState, UnknownKeeperState {
        Unknown = -1,
        Disconnected = 0,
        NoSyncConnected = 1,
        SyncConnected = 3,
        AuthFailed = 4,
        ConnectedReadOnly = 5,
        SaslAuthenticated = 6,
        Expired = -112,
        Closed = 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::error::WireError;

    #[test]
    fn create_modes_are_zookeepers_and_unknown_flags_are_errors() {
        assert_eq!(CreateMode::ALL.len(), 7);
        for (n, mode) in CreateMode::ALL.iter().enumerate() {
            assert_eq!(mode.code(), n as i32);
            assert_eq!(CreateMode::from_i32(n as i32), Ok(*mode));
        }
        for flags in [7, 8, -1, 0x10, i32::MIN] {
            assert_eq!(
                CreateMode::from_i32(flags),
                Err(WireError::UnknownCreateMode(flags))
            );
        }
        assert!(CreateMode::EphemeralSequential.is_ephemeral());
        assert!(CreateMode::EphemeralSequential.is_sequential());
        assert!(CreateMode::PersistentSequentialWithTtl.is_ttl());
        assert!(!CreateMode::Container.is_ttl());
    }

    #[test]
    fn stat_is_68_bytes_in_schema_order() {
        let stat = Stat {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            data_length: 9,
            num_children: 10,
            pzxid: 11,
        };
        let bytes = super::super::jute::to_bytes(&stat);
        assert_eq!(bytes.len(), 68);
        assert_eq!(&bytes[32..36], &5i32.to_be_bytes());
        assert_eq!(&bytes[44..52], &8i64.to_be_bytes());
        assert_eq!(&bytes[60..68], &11i64.to_be_bytes());
    }
}
