//! # raftlock-sim
//!
//! A deterministic simulation of a raftlock cluster: real openraft and the
//! real `raftlock_core::StateMachine`, over simulated disks and links, with
//! register clients, lock clients and a nemesis, all on one thread and
//! simulated time, every random choice drawn from one seed. The node's
//! session tracker and keepalive quorum rule run on that simulated time.
//! A run's histories go through the Jepsen harness's checkers; invariants
//! (one leader per leader id, no committed entry lost, no session expired
//! before its last acknowledged keepalive + TTL) are checked while it runs. The same seed replays
//! the same run, bit for bit. See docs/adr/0019-deterministic-simulator.md
//! for what is real and what is not yet.

pub mod cluster;
pub mod disk;
pub mod faults;
pub mod locks;
pub mod net;
pub mod rng;
pub mod run;
pub mod sessions;
pub mod store;
pub mod workload;
pub mod world;

pub use faults::Fault;
pub use run::{run, RunConfig, RunReport};
