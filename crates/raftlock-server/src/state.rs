//! What every handler gets: the node handle and the API's settings. The
//! server holds no state of its own beyond metrics (docs/design.md).

use std::sync::Arc;
use std::time::Duration;

use raftlock_core::SessionId;
use raftlock_node::{Consistency, Node};
use tokio::sync::watch;

use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::overload::shedding::Shedding;

/// Handler state; cheap to clone.
#[derive(Clone)]
pub(crate) struct AppState {
    pub node: Node,
    pub config: Arc<ApiConfig>,
    pub metrics: Arc<Metrics>,
    /// Flips to true when graceful shutdown begins, so long-polls and
    /// event streams end instead of holding the shutdown up for minutes.
    /// The sender lives here, so a router without `serve` never stops.
    pub shutdown: Arc<watch::Sender<bool>>,
    /// The listener's connection limit while it falls behind (off for a
    /// router served without `serve`).
    pub shedding: Arc<Shedding>,
}

impl AppState {
    /// Completes once graceful shutdown has begun.
    pub async fn stopping(&self) {
        let mut rx = self.shutdown.subscribe();
        // The sender lives in `self`, so this only returns on `true`.
        let _ = rx.wait_for(|stopping| *stopping).await;
    }

    /// The wait of an acquire or campaign: the default when absent, a
    /// `bad_request` above the maximum.
    pub fn wait(&self, wait_ms: Option<u64>) -> Result<Duration, ApiError> {
        let max = self.config.max_wait_ms;
        let ms = wait_ms.unwrap_or(self.config.default_wait_ms.min(max));
        if ms > max {
            return Err(ApiError::bad_request(format!(
                "wait_ms must be at most {max} (got {ms})"
            )));
        }
        Ok(Duration::from_millis(ms))
    }

    /// Checks node data or an election value against the size limit.
    pub fn check_data(&self, len: usize) -> Result<(), ApiError> {
        let max = self.config.max_data_bytes;
        if len > max {
            return Err(ApiError::too_large(format!(
                "data is {len} bytes; the limit is {max}"
            )));
        }
        Ok(())
    }

    /// docs/api.md: where two errors apply, an unknown session wins. Handlers
    /// validate their input at the edge (so bad input never costs a Raft
    /// entry); when that fails, this turns the failure into
    /// `session_not_found` if the request's session does not exist.
    pub async fn session_wins<T>(
        &self,
        session: SessionId,
        checked: Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let Err(error) = checked else {
            return checked;
        };
        let exists = self
            .node
            .session_exists(session, Consistency::Linearizable)
            .await;
        match exists {
            Ok(false) => Err(ApiError::session_not_found(session)),
            // The session exists, or we cannot tell: the original error.
            _ => Err(error),
        }
    }
}
