//! Peer pipes: the hot calls between members (appends, votes, and what a
//! follower forwards to the leader) as length-framed bincode over a
//! long-lived connection, instead of one HTTP request each.
//!
//! Why: per write, a member's tokio workers spent much of their time in
//! HTTP machinery (docs/adr/0008-peer-pipes.md: building and parsing headers,
//! routing, the client's connection task). A frame is a length, a kind,
//! the sender's identity claims and the bincode body the HTTP route
//! would have carried; the answer is a length, a status and the body.
//!
//! How: a member dials a peer's internal listener as for HTTP (the same
//! address, so `peer_overrides` and the harness's proxies see it; the
//! same mutual TLS), asks for an HTTP upgrade to [`PROTOCOL`] on
//! `/internal/pipe`, and then owns the connection. One call at a time per
//! connection: the caller's task writes its frame and reads the answer
//! itself (no connection task to hop through); idle connections wait in
//! a small pool per peer. A call that fails or times out drops its
//! connection, so a stalled or broken link is never used again and the
//! next call dials anew. A peer that does not know the upgrade (an older
//! member) is called over HTTP.
//!
//! What is not sent is told apart from what may have been processed
//! exactly as for HTTP (`network::CallError`): failing to dial, to
//! upgrade, or finding a pooled connection closed is "not sent"; once a
//! frame is written, any failure is "no answer".

pub(crate) mod client;
pub(crate) mod frame;
pub(crate) mod server;

/// The protocol name in the upgrade request's `Upgrade` header.
pub(crate) const PROTOCOL: &str = "raftlock-pipe/1";

/// Largest frame either side accepts: the HTTP routes' body limit.
pub(crate) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// What a request frame asks for: one internal HTTP route each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Kind {
    /// `/raft/append`.
    Append,
    /// `/raft/vote`.
    Vote,
    /// `/internal/leader`.
    Leader,
}

impl Kind {
    /// The kind that replaces `route`, if it travels on pipes. Snapshots
    /// (large, rare) and the unguarded routes stay on HTTP.
    pub(crate) fn of_route(route: &str) -> Option<Kind> {
        use crate::transport::network::route;
        match route {
            route::APPEND => Some(Kind::Append),
            route::VOTE => Some(Kind::Vote),
            route::LEADER => Some(Kind::Leader),
            _ => None,
        }
    }
}
