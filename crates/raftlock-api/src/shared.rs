//! Read-write locks and semaphores: one's holders and waiters
//! (`GET /v1/rwlocks/{name}`, `GET /v1/semaphores/{name}`).

use serde::{Deserialize, Serialize};

/// One holder of a read-write lock or semaphore. `mode` (`read` or
/// `write`) is absent on a semaphore's entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedHolder {
    /// How it holds a read-write lock.
    #[serde(default)]
    pub mode: Option<String>,
    /// The holding session's id; `null` for another principal's.
    pub session_id: Option<String>,
    /// That session's owner label.
    #[serde(default)]
    pub owner: String,
    /// The token name that opened the session.
    #[serde(default)]
    pub principal: Option<String>,
    /// Its queue node's full path.
    pub node: String,
    /// Its fencing token.
    pub fencing_token: u64,
    /// The revision at which it was granted.
    #[serde(default)]
    pub since_revision: u64,
}

/// One entry waiting behind the holders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedWaiter {
    /// The mode it asks for (read-write locks only).
    #[serde(default)]
    pub mode: Option<String>,
    /// The waiting session's id; `null` for another principal's.
    pub session_id: Option<String>,
    /// That session's owner label.
    #[serde(default)]
    pub owner: String,
    /// The token name that opened the session.
    #[serde(default)]
    pub principal: Option<String>,
    /// Its queue node's full path.
    pub node: String,
}

/// A read-write lock's holders and waiters, in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RwLockView {
    /// Its name.
    pub rwlock: String,
    /// Every holder (several readers, or one writer).
    #[serde(default)]
    pub holders: Vec<SharedHolder>,
    /// Who waits, first in line first.
    #[serde(default)]
    pub waiters: Vec<SharedWaiter>,
}

/// A semaphore's permits, holders and waiters, in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SemaphoreView {
    /// Its name.
    pub semaphore: String,
    /// The permits in force; `null` while nobody is queued.
    #[serde(default)]
    pub permits: Option<u64>,
    /// Every holder.
    #[serde(default)]
    pub holders: Vec<SharedHolder>,
    /// Who waits, first in line first.
    #[serde(default)]
    pub waiters: Vec<SharedWaiter>,
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
}
