//! Bearer-token authentication and per-prefix authorization of the client
//! API (docs/security.md).
//!
//! - the `[[auth.tokens]]` config and finding a presented token by its
//!   SHA-256 are the contract's (`raftlock_api::auth`), shared with the
//!   ZooKeeper door.
//! - `policy.rs`: the middleware that answers `401 unauthorized` without a
//!   valid token and `403 forbidden` when a route's name is outside the
//!   token's grants, and leaves the [`Caller`] in the request.
//! - `caller.rs`: the [`Caller`] extractor with the checks that need the
//!   request's body or the state (session ownership, listings).
//!
//! With no tokens configured everything is allowed, as before tokens
//! existed: the caller is [`Caller::Open`].

mod caller;
mod policy;

pub(crate) use caller::Caller;
pub(crate) use policy::{authenticate, Tokens};
pub use raftlock_api::auth::{hash_token, AuthConfig, AuthConfigError, Grant, Permission, Token};
