//! What `/v1/rwlocks` and `/v1/semaphores` share: the inspection of one
//! and the listing by prefix, with the same holder and waiter entries
//! (their acquire and release are `queue_routes.rs`'s). The node builds
//! the views (`Node::shared`, `Node::shared_list`); this module redacts
//! them for the caller.

use raftlock_api::shared::{SharedHolder, SharedLine, SharedQueue, SharedWaiter};
use raftlock_api::QueueKind;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Caller, Permission};
use crate::error::ApiError;
use crate::extract::ReadConsistency;
use crate::state::AppState;

/// Hides, for `caller`, the session ids of another principal's entries.
fn redact_holder(mut h: SharedHolder, caller: &Caller) -> SharedHolder {
    h.session_id = caller
        .visibility(h.principal.as_deref())
        .redact(h.session_id);
    h
}

fn redact_waiter(mut w: SharedWaiter, caller: &Caller) -> SharedWaiter {
    w.session_id = caller
        .visibility(w.principal.as_deref())
        .redact(w.session_id);
    w
}

/// Reads one read-write lock or semaphore, as `caller` may see it.
pub(crate) async fn inspect(
    app: &AppState,
    caller: &Caller,
    kind: QueueKind,
    name: &str,
    consistency: ReadConsistency,
) -> Result<SharedQueue, ApiError> {
    let mut view = app.node.shared(kind, name, consistency.into()).await?;
    view.holders = view
        .holders
        .into_iter()
        .map(|h| redact_holder(h, caller))
        .collect();
    view.waiters = view
        .waiters
        .into_iter()
        .map(|w| redact_waiter(w, caller))
        .collect();
    Ok(view)
}

/// `GET /v1/rwlocks` and `GET /v1/semaphores`: which names to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only names that start with this.
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub consistency: ReadConsistency,
}

/// The read-write locks or semaphores with holders or waiters whose name
/// starts with the query's prefix and that the caller may read (a listing
/// shows what the caller's grants cover, and is not refused for the rest).
pub(crate) async fn list(
    app: &AppState,
    caller: &Caller,
    kind: QueueKind,
    query: &ListQuery,
) -> Result<Vec<SharedLine>, ApiError> {
    let mut lines = app
        .node
        .shared_list(kind, &query.prefix, query.consistency.into(), |name| {
            caller.may(Permission::Read, name)
        })
        .await?;
    for line in &mut lines {
        line.holders = std::mem::take(&mut line.holders)
            .into_iter()
            .map(|h| redact_holder(h, caller))
            .collect();
    }
    Ok(lines)
}
