//! The cluster: its Raft membership (`GET`, `POST /v1/cluster/members`,
//! `DELETE /v1/cluster/members/{id}`).

use serde::{Deserialize, Serialize};

/// The membership as the answering member knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The log index of the configuration.
    pub log_index: u64,
    /// True while a change is being committed (a joint configuration).
    pub joint: bool,
    /// Voters and learners.
    pub members: Vec<MembershipMember>,
}

/// One member of a [`Membership`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipMember {
    /// Its node id.
    pub id: u64,
    /// Its client API address.
    pub api_addr: String,
    /// Its Raft address.
    pub raft_addr: String,
    /// Which incarnation of its data directory the membership names
    /// (docs/design.md, "Member identity"); absent from older servers.
    #[serde(default)]
    pub incarnation: Option<String>,
    /// False for a learner.
    pub voter: bool,
    /// How it looks from the answering member: `ok`, `member_replaced`,
    /// `other_cluster`, `unreachable` or `unknown`; absent from older
    /// servers.
    #[serde(default)]
    pub state: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_membership_reads_the_documented_shape() {
        let text = r#"{"log_index":9,"joint":false,"members":[{"id":4,"api_addr":"a:1","raft_addr":"a:2","incarnation":"x","voter":false,"state":"ok"},{"id":1,"api_addr":"b:1","raft_addr":"b:2","voter":true}]}"#;
        let view: Membership = serde_json::from_str(text).expect("parses");
        assert_eq!(view.members.len(), 2);
        assert_eq!(view.members[1].incarnation, None);
        assert!(view.members[1].voter);
        assert!(serde_json::from_str::<Membership>(r#"{"members":[{"id":1}]}"#).is_err());
    }
}
