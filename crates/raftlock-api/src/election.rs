//! Elections: an election's leader (`GET /v1/elections/{name}`, and the
//! data of each `observe` event).

use serde::{Deserialize, Serialize};

/// An election's leader. `session_id` is `null` for a session of another
/// principal; `principal` is `null` without tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderView {
    /// The leading session's id.
    pub session_id: Option<String>,
    /// The token name that opened it.
    #[serde(default)]
    pub principal: Option<String>,
    /// The value it campaigned with or last proclaimed.
    #[serde(default)]
    pub value: String,
    /// Its queue node's full path.
    pub node: String,
    /// Its fencing token (increases with every new leader).
    pub fencing_token: u64,
}

/// An election and its leader, if it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionView {
    /// The election's name.
    pub election: String,
    /// Its leader.
    pub leader: Option<LeaderView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_election_reads_the_documented_shape() {
        let text = r#"{"election":"svc","leader":{"session_id":null,"principal":"ops","value":"host-a","node":"/elections/svc/lock-0000000001","fencing_token":4}}"#;
        let view: ElectionView = serde_json::from_str(text).expect("parses");
        let leader = view.leader.expect("a leader");
        assert_eq!((leader.value.as_str(), leader.fencing_token), ("host-a", 4));
        let none: ElectionView =
            serde_json::from_str(r#"{"election":"svc","leader":null}"#).expect("parses");
        assert_eq!(none.leader, None);
    }
}
