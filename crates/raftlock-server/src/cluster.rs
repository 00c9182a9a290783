//! `/v1/cluster` and `/v1/health`: the Raft cluster as this node sees it.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::error::ApiError;
use crate::state::AppState;

/// The cluster routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/cluster", get(cluster))
        .route("/v1/health", get(health))
}

#[derive(Debug, Serialize)]
struct Member {
    id: u64,
    api_addr: String,
    raft_addr: String,
    role: String,
    applied_index: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Cluster {
    /// The node that answered.
    node_id: u64,
    leader_id: Option<u64>,
    term: u64,
    members: Vec<Member>,
}

#[derive(Debug, Serialize)]
struct Health {
    healthy: bool,
    node_id: u64,
    leader_id: Option<u64>,
    applied_index: u64,
}

async fn cluster(State(app): State<AppState>) -> Json<Cluster> {
    let status = app.node.status();
    Json(Cluster {
        node_id: status.id,
        leader_id: status.leader_id,
        term: status.term,
        members: status
            .members
            .into_iter()
            .map(|m| Member {
                id: m.id,
                api_addr: m.api_addr,
                raft_addr: m.raft_addr,
                role: m.role,
                applied_index: m.applied_index,
            })
            .collect(),
    })
}

/// 200 with a leader and a caught-up replica; otherwise 503 `no_leader`
/// or `not_caught_up`, for load balancers.
async fn health(State(app): State<AppState>) -> Result<Json<Health>, ApiError> {
    let status = app.node.status();
    if status.leader_id.is_none() {
        return Err(raftlock_node::NodeError::NoLeader.into());
    }
    if !app.node.is_healthy() {
        return Err(ApiError::not_caught_up(format!(
            "applied index {} is behind the log",
            status.applied_index
        )));
    }
    Ok(Json(Health {
        healthy: true,
        node_id: status.id,
        leader_id: status.leader_id,
        applied_index: status.applied_index,
    }))
}
