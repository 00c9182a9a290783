//! The leader's session-expiry pieces, for the deterministic simulator
//! (`crates/raftlock-sim`): the session tracker with its [`Clock`] seam
//! and the quorum rule keepalives rest on. The simulator drives them on
//! its own simulated time and links; the node itself uses them as before
//! ([`TokioClock`], its transport feeding the [`QuorumClock`]). Not an
//! API: hidden from the docs.

pub use crate::sessions::quorum::{Leadership, QuorumClock};
pub use crate::sessions::tracker::{Clock, KeepaliveRefused, SessionTracker, TokioClock};
