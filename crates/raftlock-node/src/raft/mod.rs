//! Raft wiring: openraft's type configuration, its state machine over the
//! core `StateMachine`, founding a fresh cluster and joining one.

pub(crate) mod founding;
pub mod join;
pub(crate) mod state_machine;
pub(crate) mod typ;
