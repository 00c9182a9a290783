//! The shared in-process test cluster (`raftlock_testkit::TestCluster`):
//! three members in this test process with real sled directories, real
//! sockets on ports the OS picked, real openraft, and (optionally) the
//! real HTTP API in front of each.

#![allow(dead_code, unused_imports)]

pub mod scenarios;

use std::time::Duration;

use raftlock_testkit::Options;

pub use raftlock_testkit::http::dead_endpoint;
pub use raftlock_testkit::TestCluster as Cluster;

/// Upper bound on anything a test waits for: a failure bound, never a
/// synchronization device.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Three members, with an HTTP API in front of each when `http`.
pub async fn start(http: bool) -> Cluster {
    let options = Options::default();
    let api = if http { options.api } else { None };
    Cluster::start(Options { api, ..options }).await
}

/// Awaits `future`, failing the test (instead of hanging) past PATIENCE.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    raftlock_testkit::within(what, PATIENCE, future).await
}
