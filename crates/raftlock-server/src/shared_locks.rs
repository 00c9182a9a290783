//! What `/v1/rwlocks` and `/v1/semaphores` share: the inspection of one
//! and the listing by prefix, with the same holder and waiter entries
//! (their acquire and release are `queue_routes.rs`'s). The node builds
//! the views (`Node::shared`, `Node::shared_list`); this module redacts
//! them for the caller.

use raftlock_api::shared::{SharedLine, SharedQueue};
use raftlock_api::QueueKind;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ReadConsistency;
use crate::redact::Redact;
use crate::state::AppState;

/// Reads one read-write lock or semaphore, as `caller` may see it.
pub(crate) async fn inspect(
    app: &AppState,
    caller: &Caller,
    kind: QueueKind,
    name: &str,
    consistency: ReadConsistency,
) -> Result<SharedQueue, ApiError> {
    let view = app.node.shared(kind, name, consistency.into()).await?;
    Ok(view.redact(caller))
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
    let lines = app
        .node
        .shared_list(
            kind,
            &query.prefix,
            query.consistency.into(),
            caller.reads(),
        )
        .await?;
    Ok(lines.redact(caller))
}
