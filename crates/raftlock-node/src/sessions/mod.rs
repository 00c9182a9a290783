//! The leader's session machinery: the in-memory session tracker and its
//! clock, lock-delay timing, the quorum clock keepalives rest on, and the
//! leader-only background work that expires sessions and lock-delays.

pub(crate) mod hold_offs;
pub(crate) mod leader;
pub(crate) mod quorum;
pub(crate) mod tracker;
