//! The peer transport: Raft RPCs to peers over pooled pipes, the
//! internal listener that serves them and forwarded operations, the
//! identity check on Raft traffic, and mutual TLS between members.

pub(crate) mod member_tls;
pub(crate) mod network;
pub(crate) mod peer_guard;
pub(crate) mod pipe;
pub(crate) mod routes;
