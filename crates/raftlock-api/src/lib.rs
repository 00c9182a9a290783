//! # raftlock-api
//!
//! The operations contract of raftlock: the types every front door speaks.
//! The HTTP API (`raftlock-server`) answers with them, the Rust client
//! (`raftlock-client`, over HTTP or an embedded node) reads them, the CLI
//! and the Jepsen harness classify errors with them. Serde only: no IO, no
//! runtime, no Raft; with the `openapi` feature the types also carry their
//! OpenAPI schemas.
//!
//! Modules:
//! - [`auth`]: bearer tokens, their grants and [`Permission`]s, shared by
//!   every front door that authenticates;
//! - [`error`]: [`ErrorCode`], each code's HTTP status and `Retry-After`,
//!   and the retry classification every caller uses
//!   ([`ErrorCode::not_applied`], [`ErrorCode::outcome_unknown`],
//!   [`ErrorCode::retry_elsewhere`], [`ErrorCode::retry_later`]);
//! - [`lock`]: a lock's view, the lock listing and the fencing check;
//! - [`shared`]: a read-write lock's and a semaphore's view;
//! - [`session`]: a session's view and the session listing;
//! - [`election`]: an election's leader;
//! - [`node`]: a node of the tree and its children;
//! - [`cluster`]: the Raft membership;
//! - [`tables`]: [`ErrorCode`]'s table rendered for the Python and Go
//!   clients (written by the `raftlock-codes` binary).
//! - [`queue`]: the one model of a queue's kind ([`QueueKind`]: lock,
//!   election, read-write lock, semaphore) and of how an entry holds it
//!   ([`Mode`]).
//!
//! The shape this crate grows into, and what is still elsewhere, is in
//! its README.md.

#![warn(missing_docs)]

pub mod auth;
pub mod cluster;
pub mod election;
pub mod error;
pub mod lock;
pub mod node;
pub mod queue;
pub mod session;
pub mod shared;
pub mod tables;

pub use auth::{hash_token, AuthConfig, AuthConfigError, Grant, Permission, Token};
pub use error::{ErrorBody, ErrorCode, ErrorReply, UnknownCode};
pub use queue::{Mode, QueueKind};
