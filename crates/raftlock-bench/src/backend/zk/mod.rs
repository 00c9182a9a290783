//! A lean ZooKeeper client written for the benchmark (test equipment, not
//! product): the binary protocol's handful of operations the workloads
//! use, pipelined on one connection per session.

pub mod client;
pub mod wire;
