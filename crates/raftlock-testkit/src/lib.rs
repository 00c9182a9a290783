//! Clusters for raftlock's own tests and tools (docs/adr/0021).
//!
//! - [`cluster::TestCluster`]: members in this process (real openraft, real
//!   data directories, each member's HTTP API on a port the OS picked),
//!   built on [`raftlock_node::LocalCluster`]. The server's and the
//!   client's tests use it.
//! - [`process`]: real `raftlock serve` processes (start, kill -9, pause,
//!   resume, graceful stop, CPU pinning), for `tests/`, the Jepsen harness
//!   and the bench.
//! - [`http`]: JSON replies and raw requests for API tests.
//! - [`python`]: virtualenvs for the tests that drive Python clients.

#![warn(missing_docs)]

#[cfg(feature = "in-process")]
pub mod cluster;
#[cfg(feature = "in-process")]
pub mod http;
pub mod process;
pub mod python;

use std::future::Future;
use std::time::Duration;

#[cfg(feature = "in-process")]
pub use cluster::{Options, TestCluster};

/// Upper bound for anything that should happen "soon": a failure bound,
/// never a synchronisation device.
pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `condition` (a state check, not a timing guess) until it holds;
/// panics naming `what` after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Awaits `future`, failing the test (instead of hanging) past `timeout`.
pub async fn within<T>(what: &str, timeout: Duration, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(timeout, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out: {what}"),
    }
}
