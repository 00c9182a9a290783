//! The API against a real three-node cluster in this process. One binary
//! (one link) for all of it; the clusters run one at a time (see
//! `raftlock_testkit::TestCluster`).

mod admission;
mod auth;
mod bad_input;
mod common;
mod conformance;
mod dashboard;
mod disk_faults;
mod full_disk;
mod guarded;
mod limits;
mod long_poll;
mod metrics;
mod observe;
mod openapi;
mod primitives;
mod shedding;
mod tmpfs;
mod watch;
