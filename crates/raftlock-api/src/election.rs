//! Elections: an election's leader (`GET /v1/elections/{name}`, and the
//! data of each `observe` event) and the listing (`GET /v1/elections`).

use serde::{Deserialize, Serialize};

/// An election's leader. `session_id` is `null` for a session of another
/// principal; `principal` is `null` without tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Leader))]
pub struct LeaderView {
    /// The leading session's id.
    pub session_id: Option<String>,
    /// The token name that opened it.
    #[serde(default)]
    pub principal: Option<String>,
    /// The value it campaigned with or last proclaimed.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub value: String,
    /// Its queue node's full path.
    pub node: String,
    /// Its fencing token (increases with every new leader).
    pub fencing_token: u64,
}

/// An election and its leader, if it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Election))]
pub struct ElectionView {
    /// The election's name.
    pub election: String,
    /// Its leader.
    pub leader: Option<LeaderView>,
}

/// One election of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ElectionLine {
    /// The election's name.
    pub election: String,
    /// Its leader.
    pub leader: Option<LeaderView>,
    /// Candidates waiting behind the leader.
    pub candidates: usize,
}

/// The elections with a leader or candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ElectionList {
    /// In name order.
    pub elections: Vec<ElectionLine>,
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
