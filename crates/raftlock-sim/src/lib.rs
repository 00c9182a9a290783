//! # raftlock-sim
//!
//! A deterministic simulation of a raftlock cluster: real openraft and the
//! real `raftlock_core::StateMachine`, over simulated disks and links, with
//! register clients and a nemesis, all on one thread and simulated time,
//! every random choice drawn from one seed. A run's history goes through
//! the Jepsen harness's checkers; invariants (one leader per leader id, no
//! committed entry lost) are checked while it runs. The same seed replays
//! the same run, bit for bit. See docs/adr/0019-deterministic-simulator.md
//! for what is real and what is not yet.

pub mod cluster;
pub mod disk;
pub mod faults;
pub mod net;
pub mod rng;
pub mod run;
pub mod store;
pub mod workload;
pub mod world;

pub use faults::Fault;
pub use run::{run, RunConfig, RunReport};
