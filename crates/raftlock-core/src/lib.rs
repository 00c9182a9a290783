//! # raftlock-core
//!
//! The deterministic state machine every raftlock replica applies: a tree
//! of nodes, client sessions owning ephemeral nodes, lock and election
//! queues (ephemeral sequential nodes, lowest sequence holds), one global
//! revision, and versioned snapshots.
//!
//! Pure by design: no IO, no clock, no tasks. Time enters only as
//! commands the leader proposes (`ExpireSession`), and randomness only as
//! values the proposer drew (`OpenSession`'s id), so the same log yields
//! the same state, byte for byte, on every node.
//!
//! ```
//! use raftlock_core::{Command, QueueKind, Response, SessionId, StateMachine};
//!
//! let mut sm = StateMachine::new();
//! let (a, b) = (SessionId(1), SessionId(2));
//! for id in [a, b] {
//!     sm.apply(&Command::OpenSession { id, owner: "doc".into(), ttl_ms: 5_000 });
//! }
//! let acquire = |session| Command::Acquire {
//!     kind: QueueKind::Lock, name: "orders/42".into(), session, data: vec![], wait: true,
//! };
//! let Ok(Response::Acquired(first)) = sm.apply(&acquire(a)).result else { panic!() };
//! let Ok(Response::Acquired(second)) = sm.apply(&acquire(b)).result else { panic!() };
//! assert!(first.held && !second.held);
//!
//! // Closing A's session deletes its node and grants the lock to B.
//! let applied = sm.apply(&Command::CloseSession { id: a });
//! assert_eq!(applied.effects.granted, vec![second.node.clone()]);
//! assert!(second.fencing_token > first.fencing_token);
//! ```

// Embedders read these docs: every public item says what it is for
// (a warning, made an error by `cargo clippy -- -D warnings` in CI).
#![warn(missing_docs)]

mod command;
mod error;
mod invariants;
pub mod kv;
mod lock_delay;
mod locks;
mod multilock;
mod node_set;
pub mod path;
mod query;
mod queue;
mod sessions;
mod shared;
mod snapshot;
mod state;
mod tree;
mod tree_ops;
mod txn;
mod types;

pub use command::{
    Acquisition, Applied, Command, DeletedNode, Effects, HeldOff, MultiAcquisition, Response,
};
pub use error::CoreError;
pub use lock_delay::{validate_lock_delay, MAX_LOCK_DELAY_MS};
pub use multilock::{validate_lock_set, MultiStatus, MAX_MULTI_LOCKS};
pub use query::{
    Counts, Position, QueueEntryView, QueueSummary, QueueView, SessionLease, SessionView,
};
pub use shared::{RwMode, SharedKind, SharedSummary, SharedView};
pub use snapshot::{SnapshotError, SNAPSHOT_FORMAT};
pub use state::StateMachine;
pub use tree_ops::{NodeStat, TreeOp, TreeOpResult};
pub use txn::{Compare, HolderGuard, TxnOp};
pub use types::{
    AclEntry, Node, NodeAcl, NodeMeta, ParseSessionIdError, QueueKind, Session, SessionId,
};
