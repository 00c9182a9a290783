//! Locks: a lock's view (`GET /v1/locks/{name}`), the listing
//! (`GET /v1/locks`) and the fencing check (`POST /v1/fencing/check`).
//!
//! Servers write these, clients read them; fields a client reads with a
//! default are the ones older servers did not send.

use serde::{Deserialize, Serialize};

/// `session_id` is `null` for a session of another principal
/// (docs/security.md); `principal` is `null` without tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Holder {
    /// The holding session's id (32 hex digits).
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
    /// Its fencing token (the node's create revision).
    pub fencing_token: u64,
    /// The revision at which it was granted.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub since_revision: u64,
}

/// A session queued behind the holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Waiter {
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
}

/// A lock's holder and its waiters in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Lock))]
pub struct LockBody {
    /// The lock's name.
    pub lock: String,
    /// Who holds it, if anyone.
    pub holder: Option<Holder>,
    /// Who waits, first in line first.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub waiters: Vec<Waiter>,
    /// The lock's lock-delay (fixed by the acquire that created its
    /// queue); `null` for none.
    #[serde(default)]
    pub lock_delay_ms: Option<u64>,
    /// True while the lock is held off: its holder's session ended and
    /// nobody is granted it until the delay has passed (`holder` is then
    /// `null`). The end is timed by the leader, not kept in the state.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub held_off: bool,
}

/// One lock of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LockLine {
    /// The lock's name.
    pub lock: String,
    /// Who holds it, if anyone.
    pub holder: Option<Holder>,
    /// How many sessions wait behind the holder.
    pub waiters: usize,
    /// As in `GET /v1/locks/{name}`: the lock's lock-delay, `null` for none.
    #[serde(default)]
    pub lock_delay_ms: Option<u64>,
    /// As in `GET /v1/locks/{name}`: a lost holder's delay runs.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub held_off: bool,
}

/// The locks with a holder or waiters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LockList {
    /// In name order.
    pub locks: Vec<LockLine>,
}

/// A fencing check: is this token still the lock's current one?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FencingBody {
    /// The lock's name.
    pub lock: String,
    /// The token to check.
    pub fencing_token: u64,
}

/// A fencing check's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FencingAnswer {
    /// True when the token is the current holder's.
    pub valid: bool,
    /// The current holder's token, if the lock is held.
    pub current_token: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_reads_the_documented_shape_and_tolerates_additions() {
        let id = "0123456789abcdef0123456789abcdef";
        let text = format!(
            r#"{{"lock":"a/b","holder":{{"session_id":"{id}","owner":"w","node":"/locks/a/b/lock-0000000001","fencing_token":7,"since_revision":7}},"waiters":[{{"session_id":null,"owner":"w","node":"n"}}],"extra":1}}"#
        );
        let lock: LockBody = serde_json::from_str(&text).expect("parses");
        assert_eq!(lock.holder.as_ref().map(|h| h.fencing_token), Some(7));
        assert_eq!(lock.waiters.len(), 1);
        assert!(!lock.held_off);
        assert!(serde_json::from_str::<LockBody>("{}").is_err());
    }

    #[test]
    fn a_lock_writes_every_field() {
        let lock = LockBody {
            lock: "x".into(),
            holder: None,
            waiters: Vec::new(),
            lock_delay_ms: None,
            held_off: false,
        };
        assert_eq!(
            serde_json::to_string(&lock).expect("serializes"),
            r#"{"lock":"x","holder":null,"waiters":[],"lock_delay_ms":null,"held_off":false}"#
        );
    }
}
