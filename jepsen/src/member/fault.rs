//! The member's disk-fault routes, for the `disk-full` and `slow-fsync`
//! nemeses: the harness cannot reach into a `raftlock serve` process, so
//! disk faults run against `raftlock-jepsen member` processes, which call
//! the node's own fault hooks at the durability barrier (the hooks the
//! node crate's `durability.rs` tests use; see docs/design.md on fsync
//! failure and a full disk).
//!
//! - `POST /fault/disk-full` `{}` or `{"full": true}` → `204`: the next
//!   log sync fails with `ENOSPC` and the disk counts as full. Like a real
//!   full disk: the member leaves the Raft group and answers
//!   `503 disk_full`. `{"full": false}` → `204`: the disk has room again;
//!   the member reopens its log and rejoins by itself, in the same process
//!   (`crates/raftlock-node/src/disk/storage_watch.rs`).
//! - `POST /fault/slow-fsync` `{"delay_ms": N}` → `204`: every log sync
//!   takes `N` ms longer (0: back to normal).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use raftlock_node::Node;
use serde::Deserialize;

/// The fault routes over `node`.
pub fn router(node: Node) -> Router {
    Router::new()
        .route("/fault/disk-full", post(disk_full))
        .route("/fault/slow-fsync", post(slow_fsync))
        .with_state(node)
}

#[derive(Deserialize)]
struct FullBody {
    /// `false`: the fault ends (room again).
    #[serde(default = "full_by_default")]
    full: bool,
}

fn full_by_default() -> bool {
    true
}

#[derive(Deserialize)]
struct SlowBody {
    delay_ms: u64,
}

async fn disk_full(State(node): State<Node>, Json(body): Json<FullBody>) -> StatusCode {
    if body.full {
        tracing::warn!("fault injected: the next log sync fails with ENOSPC (disk full)");
        node.fail_log_sync_out_of_space();
    } else {
        tracing::warn!("fault ended: the disk has room again");
        node.restore_disk_space();
    }
    StatusCode::NO_CONTENT
}

async fn slow_fsync(State(node): State<Node>, Json(body): Json<SlowBody>) -> StatusCode {
    tracing::warn!(delay_ms = body.delay_ms, "fault injected: slow log syncs");
    node.slow_log_sync(Duration::from_millis(body.delay_ms));
    StatusCode::NO_CONTENT
}
