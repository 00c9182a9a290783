//! `GET /v1/snapshot`: a consistent backup of the cluster's state, taken
//! after a read-index barrier, as the bytes of a backup file
//! (`raftlock_node::Backup`: header with revision, applied index and
//! checksums, then the core snapshot). `raftlock snapshot save` writes it
//! to a file; `raftlock snapshot restore` seeds a new cluster from it.
//!
//! Once tokens exist this route needs the `admin` permission: it reveals
//! every session id, which is what a session's owner uses to act on it.

use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::HeaderName;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use utoipa::OpenApi;

use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::AppState;

/// The backup operation in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(snapshot))]
pub(crate) struct Api;

/// The backup route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/snapshot", get(snapshot))
}

/// The backup's revision and applied index, so a client can log them
/// without parsing the body.
const REVISION: HeaderName = HeaderName::from_static("x-raftlock-revision");
const APPLIED_INDEX: HeaderName = HeaderName::from_static("x-raftlock-applied-index");

/// The route takes no parameters; unknown ones are `bad_request`, as on
/// every route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoQuery {}

/// A consistent backup of the cluster's state (cluster admin only).
#[utoipa::path(get, path = "/v1/snapshot", tag = "cluster",
    responses((status = 200, description = "The backup file",
        content_type = "application/octet-stream", body = Vec<u8>)))]
async fn snapshot(
    State(app): State<AppState>,
    ApiQuery(NoQuery {}): ApiQuery<NoQuery>,
) -> Result<Response, ApiError> {
    let backup = app.node.backup().await?;
    let header = *backup.header();
    tracing::info!(
        revision = header.revision,
        applied_index = header.applied_index,
        bytes = backup.as_bytes().len(),
        "backup taken"
    );
    let disposition = format!(
        "attachment; filename=\"raftlock-{}.backup\"",
        header.revision
    );
    Ok((
        [
            (CONTENT_TYPE, "application/octet-stream".to_string()),
            (CONTENT_DISPOSITION, disposition),
            (REVISION, header.revision.to_string()),
            (APPLIED_INDEX, header.applied_index.to_string()),
        ],
        backup.into_bytes(),
    )
        .into_response())
}
