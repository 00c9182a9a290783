//! Sessions: one session's view (`GET /v1/sessions/{id}`) and the listing
//! (`GET /v1/sessions`).

use serde::{Deserialize, Serialize};

/// A live session. `principal` is `null` without tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Session))]
pub struct SessionView {
    /// The session's id (32 hex digits).
    pub session_id: String,
    /// Its owner label.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: String,
    /// The token name that opened it.
    #[serde(default)]
    pub principal: Option<String>,
    /// Its time to live without a keepalive, in milliseconds.
    pub ttl_ms: u64,
    /// Its ephemeral nodes, lock and election queue nodes included.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub nodes: Vec<String>,
}

/// The live sessions the caller may see, in session id order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionList {
    /// At most the `limit` asked for.
    pub sessions: Vec<SessionView>,
    /// More sessions matched than the `limit`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_reads_the_documented_shape() {
        let text = r#"{"sessions":[{"session_id":"0123456789abcdef0123456789abcdef","owner":"w","principal":null,"ttl_ms":5000,"nodes":["/locks/a/lock-0000000001"]}],"truncated":true}"#;
        let list: SessionList = serde_json::from_str(text).expect("parses");
        assert_eq!(list.sessions[0].ttl_ms, 5000);
        assert_eq!(list.sessions[0].nodes.len(), 1);
        assert!(list.truncated);
        assert!(serde_json::from_str::<SessionView>(r#"{"owner":"w"}"#).is_err());
    }
}
