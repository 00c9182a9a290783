//! The identity check on Raft traffic. Every request a member sends to a
//! peer's internal routes carries the sender's cluster id and incarnation
//! and the incarnation the sender's membership names for the receiver.
//! The receiver refuses (409) a request from another cluster, and one that
//! expects another incarnation of it: its data directory was wiped (or
//! swapped) since the membership was written, so it has forgotten its
//! vote and its log and must not vote or accept entries as that member.
//! It stays refused until it is removed and added again, which records
//! its new incarnation in the membership (docs/design.md, "Member
//! identity").

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

use crate::disk::identity::{hex, Identity, IdentityError, IdentityFile};
use crate::raft::typ::NodeId;

pub(crate) const CLUSTER: &str = "x-raftlock-cluster";
pub(crate) const FROM: &str = "x-raftlock-from";
pub(crate) const FROM_INCARNATION: &str = "x-raftlock-from-incarnation";
pub(crate) const TO_INCARNATION: &str = "x-raftlock-to-incarnation";

/// Why this member is refusing the cluster's traffic (kept until the
/// cluster names this incarnation again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replaced {
    /// The incarnation the membership names for this member.
    pub expected: u64,
    /// The member that said so.
    pub from: NodeId,
}

/// How a peer last answered this member's Raft requests (a leader sends
/// them to every member; a follower mostly to none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// It answered.
    Ok,
    /// It refused: it is another incarnation than the membership names
    /// (its data was wiped).
    Replaced,
    /// It refused: it belongs to another cluster.
    OtherCluster,
    /// No answer (down, partitioned, or too slow).
    Unreachable,
}

impl PeerState {
    /// The name the API and the CLI show.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Ok => "ok",
            PeerState::Replaced => "member_replaced",
            PeerState::OtherCluster => "other_cluster",
            PeerState::Unreachable => "unreachable",
        }
    }

    /// Classifies a refusal's or failure's message (`network::CallError`).
    pub(crate) fn of_failure(message: &str) -> Self {
        if message.contains("member_replaced:") {
            PeerState::Replaced
        } else if message.contains("other_cluster:") {
            PeerState::OtherCluster
        } else {
            PeerState::Unreachable
        }
    }
}

/// This member's identity and what the guard last concluded.
pub(crate) struct PeerGuard {
    pub identity: IdentityFile,
    replaced: Mutex<Option<Replaced>>,
    /// How each peer last answered this member's Raft requests.
    peers: Mutex<BTreeMap<NodeId, PeerState>>,
}

/// What a request between members says about its sender and its
/// receiver: the headers above on the HTTP routes, a field of each frame
/// on a peer pipe (`pipe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    /// The sending member's id (0: not said).
    pub from: NodeId,
    /// The sender's incarnation.
    pub from_incarnation: u64,
    /// The sender's cluster, once it has one.
    pub cluster: Option<u64>,
    /// The receiver's incarnation as the sender's membership names it.
    pub to_incarnation: Option<u64>,
}

/// A refusal: status and a message naming the cause and the fix.
pub(crate) type Refusal = (StatusCode, String);

impl PeerGuard {
    pub(crate) fn new(identity: IdentityFile) -> Self {
        PeerGuard {
            identity,
            replaced: Mutex::new(None),
            peers: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records how `peer` answered a Raft request.
    pub(crate) fn observe(&self, peer: NodeId, state: PeerState) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.insert(peer, state) != Some(state) && state == PeerState::Replaced {
            tracing::warn!(
                peer,
                "member {peer} refuses this cluster's requests: its data was wiped; run `raftlock member remove {peer}`, then add it again"
            );
        }
    }

    /// How `peer` last answered, if this member has sent it anything.
    pub(crate) fn peer_state(&self, peer: NodeId) -> Option<PeerState> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.get(&peer).copied()
    }

    /// What a request to a peer whose membership entry names
    /// `to_incarnation` (0: not known, nothing to check) claims about its
    /// sender and its receiver.
    pub(crate) fn claims(&self, to_incarnation: u64) -> Claims {
        let me = self.identity.get();
        Claims {
            from: me.member_id,
            from_incarnation: me.incarnation,
            cluster: me.cluster_id,
            to_incarnation: (to_incarnation != 0).then_some(to_incarnation),
        }
    }

    /// The headers of a request to a peer whose membership entry names
    /// `to_incarnation` (0: not known, nothing to check).
    pub(crate) fn outgoing(&self, to_incarnation: u64) -> HeaderMap {
        let claims = self.claims(to_incarnation);
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        };
        put(FROM, claims.from.to_string());
        put(FROM_INCARNATION, hex(claims.from_incarnation));
        if let Some(cluster) = claims.cluster {
            put(CLUSTER, hex(cluster));
        }
        if let Some(to) = claims.to_incarnation {
            put(TO_INCARNATION, hex(to));
        }
        headers
    }

    /// Whether this member must answer a request with `headers` (see
    /// [`Self::admit_claims`]).
    pub(crate) fn admit(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let claims = Claims {
            from: headers
                .get(FROM)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<NodeId>().ok())
                .unwrap_or(0),
            // Informational only: never a reason to refuse.
            from_incarnation: hex_header(headers, FROM_INCARNATION)
                .ok()
                .flatten()
                .unwrap_or(0),
            cluster: hex_header(headers, CLUSTER)?,
            to_incarnation: hex_header(headers, TO_INCARNATION)?,
        };
        self.admit_claims(&claims)
    }

    /// Whether this member must answer a request making `claims`. A
    /// request that names this incarnation also teaches a new member its
    /// cluster id, and ends an earlier refusal (the member was added
    /// again).
    pub(crate) fn admit_claims(&self, claims: &Claims) -> Result<(), Refusal> {
        let me = self.identity.get();
        let cluster = claims.cluster;
        let expected = claims.to_incarnation;
        let from = claims.from;
        if let (Some(theirs), Some(mine)) = (cluster, me.cluster_id) {
            if theirs != mine {
                let message = format!(
                    "other_cluster: member {from} belongs to cluster {}, member {} to cluster {}; a member of one cluster never takes part in another",
                    hex(theirs),
                    me.member_id,
                    hex(mine)
                );
                tracing::warn!("refused a request: {message}");
                return Err((StatusCode::CONFLICT, message));
            }
        }
        let Some(expected) = expected else {
            return Ok(());
        };
        if expected != me.incarnation {
            let message = self.replaced(me, expected, from);
            return Err((StatusCode::CONFLICT, message));
        }
        if let (Some(theirs), None) = (cluster, me.cluster_id) {
            self.identity
                .join_cluster(theirs)
                .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        }
        let ended = self
            .replaced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if ended.is_some() {
            tracing::info!(
                incarnation = %hex(me.incarnation),
                "the cluster names this incarnation again: this member was added back"
            );
        }
        Ok(())
    }

    /// Records (and logs once) that the membership names another
    /// incarnation of this member; returns the refusal's message.
    fn replaced(&self, me: Identity, expected: u64, from: NodeId) -> String {
        let message = replaced_message(me, expected);
        let mut replaced = self.replaced.lock().unwrap_or_else(|e| e.into_inner());
        if replaced.as_ref().map(|r| r.expected) != Some(expected) {
            tracing::error!("{message}");
        }
        *replaced = Some(Replaced { expected, from });
        format!("member_replaced: {message}")
    }

    /// Set while the cluster names another incarnation of this member:
    /// what its API answers instead of serving (`member_replaced`).
    pub(crate) fn replaced_message(&self) -> Option<String> {
        let replaced = self.replaced.lock().unwrap_or_else(|e| e.into_inner());
        replaced
            .as_ref()
            .map(|r| replaced_message(self.identity.get(), r.expected))
    }

    /// Records the cluster id this member founds.
    pub(crate) fn found(&self, cluster_id: u64) -> Result<(), IdentityError> {
        self.identity.join_cluster(cluster_id)
    }
}

fn replaced_message(me: Identity, expected: u64) -> String {
    let id = me.member_id;
    format!(
        "this member's data was wiped or replaced: the cluster's membership names incarnation {} for member {id}, this data directory is incarnation {}. It will not vote or accept entries as member {id}. Run `raftlock member remove {id}`, then `raftlock member add {id} --api-addr ... --raft-addr ...` to add it back as a new member",
        hex(expected),
        hex(me.incarnation)
    )
}

fn hex_header(headers: &HeaderMap, name: &str) -> Result<Option<u64>, Refusal> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .map(Some)
        .ok_or_else(|| {
            (
                StatusCode::BAD_REQUEST,
                format!("header {name} is not a hex id"),
            )
        })
}
