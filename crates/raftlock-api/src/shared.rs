//! Read-write locks and semaphores: one's holders and waiters
//! (`GET /v1/rwlocks/{name}`, `GET /v1/semaphores/{name}`), and the
//! node's view of one or of a listing, which each kind's HTTP body names
//! its own way (`rwlock`, `semaphore`).

use serde::{Deserialize, Serialize};

/// One holder of a read-write lock or semaphore. `session_id` is `null`
/// for a session of another principal (docs/security.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedHolder {
    /// The holding session's id.
    pub session_id: Option<String>,
    /// That session's owner label.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: String,
    /// The token name that opened the session.
    #[serde(default)]
    pub principal: Option<String>,
    /// Its queue node's full path.
    pub node: String,
    /// `read`/`write` for a read-write lock; absent for a semaphore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Its fencing token.
    pub fencing_token: u64,
    /// The revision at which it was granted.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub since_revision: u64,
}

/// One entry waiting behind the holders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedWaiter {
    /// The waiting session's id; `null` for another principal's.
    pub session_id: Option<String>,
    /// That session's owner label.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: String,
    /// The token name that opened the session.
    #[serde(default)]
    pub principal: Option<String>,
    /// Its queue node's full path.
    pub node: String,
    /// The mode it asks for (read-write locks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// A read-write lock's holders and waiters, in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = RwLock))]
pub struct RwLockView {
    /// Its name.
    pub rwlock: String,
    /// Every holder (several readers, or one writer).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub holders: Vec<SharedHolder>,
    /// Who waits, first in line first.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub waiters: Vec<SharedWaiter>,
}

/// A semaphore's permits, holders and waiters, in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Semaphore))]
pub struct SemaphoreView {
    /// Its name.
    pub semaphore: String,
    /// The permits in force; `null` while nobody is queued.
    #[serde(default)]
    pub permits: Option<u64>,
    /// Every holder.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub holders: Vec<SharedHolder>,
    /// Who waits, first in line first.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub waiters: Vec<SharedWaiter>,
}

/// One read-write lock or semaphore as of one read, as the node gives it:
/// its holders and waiters in queue order, and a semaphore's permits
/// (`None` while nobody is queued, and for a read-write lock).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SharedQueue {
    /// The entries that hold it.
    pub holders: Vec<SharedHolder>,
    /// The entries behind them.
    pub waiters: Vec<SharedWaiter>,
    /// A semaphore's permits in force.
    pub limit: Option<u64>,
}

/// One read-write lock or semaphore of a listing, as the node gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedLine {
    /// Its name.
    pub name: String,
    /// The entries that hold it.
    pub holders: Vec<SharedHolder>,
    /// How many entries wait behind them.
    pub waiters: usize,
    /// A semaphore's permits in force.
    pub limit: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_views_read_the_documented_shapes() {
        let text = r#"{"rwlock":"r","holders":[{"mode":"read","session_id":"s","owner":"w","principal":null,"node":"/rwlocks/r/lock-0000000001","fencing_token":3,"since_revision":3}],"waiters":[{"mode":"write","session_id":null,"owner":"v","principal":null,"node":"n"}]}"#;
        let view: RwLockView = serde_json::from_str(text).expect("parses");
        assert_eq!(view.holders[0].mode.as_deref(), Some("read"));
        assert_eq!(view.waiters[0].session_id, None);
        let text = r#"{"semaphore":"s","permits":2,"holders":[{"session_id":"s","owner":"w","node":"n","fencing_token":9,"since_revision":9}],"waiters":[]}"#;
        let view: SemaphoreView = serde_json::from_str(text).expect("parses");
        assert_eq!(view.permits, Some(2));
        assert_eq!(view.holders[0].mode, None);
    }

    #[test]
    fn a_semaphore_entry_is_written_without_a_mode() {
        let holder = SharedHolder {
            session_id: None,
            owner: "w".into(),
            principal: None,
            node: "/semaphores/s/lock-0000000001".into(),
            mode: None,
            fencing_token: 1,
            since_revision: 1,
        };
        assert_eq!(
            serde_json::to_string(&holder).expect("serializes"),
            r#"{"session_id":null,"owner":"w","principal":null,"node":"/semaphores/s/lock-0000000001","fencing_token":1,"since_revision":1}"#
        );
    }
}
