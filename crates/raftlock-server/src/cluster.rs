//! `/v1/cluster`, `/v1/cluster/members` and `/v1/health`: the Raft
//! cluster as this node sees it, and membership changes (which the node
//! sends to the leader, as it does writes).

use axum::extract::State;
use axum::routing::{delete, get};
use axum::{Json, Router};
use raftlock_node::{MembershipView, NodeId};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::error::ApiError;
use crate::extract::{ApiPath, JsonBody};
use crate::state::AppState;

/// The cluster operations in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(cluster, members, add_member, remove_member, health))]
pub(crate) struct Api;

/// The cluster routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/cluster", get(cluster))
        .route("/v1/cluster/members", get(members).post(add_member))
        .route("/v1/cluster/members/{id}", delete(remove_member))
        .route("/v1/health", get(health))
}

/// `POST /v1/cluster/members`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AddMember {
    id: NodeId,
    api_addr: String,
    raft_addr: String,
}

/// The membership as the API shows it: incarnations as hex strings (a
/// u64 does not survive JSON numbers in every client).
#[derive(Debug, Serialize, ToSchema)]
struct Membership {
    log_index: u64,
    joint: bool,
    members: Vec<MembershipMember>,
}

#[derive(Debug, Serialize, ToSchema)]
struct MembershipMember {
    id: NodeId,
    api_addr: String,
    raft_addr: String,
    /// Which incarnation of the member's data directory the membership
    /// names (docs/design.md, "Member identity").
    incarnation: String,
    voter: bool,
    /// How the member looks from the answering one (`Node::member_state`):
    /// `ok`, `member_replaced`, `other_cluster`, `unreachable`, or
    /// `unknown` (no request sent to it yet: ask the leader).
    state: &'static str,
}

impl Membership {
    fn of(view: MembershipView, node: &raftlock_node::Node) -> Self {
        Membership {
            log_index: view.log_index,
            joint: view.joint,
            members: view
                .members
                .into_iter()
                .map(|m| MembershipMember {
                    state: node.member_state(m.id).map_or("unknown", |s| s.as_str()),
                    id: m.id,
                    api_addr: m.api_addr,
                    raft_addr: m.raft_addr,
                    incarnation: format!("{:016x}", m.incarnation),
                    voter: m.voter,
                })
                .collect(),
        }
    }
}

/// `503 member_replaced` while the cluster names another incarnation of
/// this member (its data was wiped): what it knows is not the cluster's.
fn refuse_if_replaced(app: &AppState) -> Result<(), ApiError> {
    match app.node.replaced() {
        Some(message) => Err(raftlock_node::NodeError::Membership(
            raftlock_node::MembershipError::Replaced {
                id: app.node.id(),
                message,
            },
        )
        .into()),
        None => Ok(()),
    }
}

/// The membership as the answering member knows it (after a change: as
/// the leader committed it).
#[utoipa::path(get, path = "/v1/cluster/members", tag = "cluster",
    responses((status = 200, description = "The membership", body = Membership)))]
async fn members(State(app): State<AppState>) -> Result<Json<Membership>, ApiError> {
    refuse_if_replaced(&app)?;
    Ok(Json(Membership::of(app.node.membership(), &app.node)))
}

/// Adds a member: a learner until caught up, then a voter. Blocks until
/// both steps committed (or a bounded wait fails; see docs/api.md).
#[utoipa::path(post, path = "/v1/cluster/members", tag = "cluster",
    request_body = AddMember,
    responses((status = 200, description = "The new membership", body = Membership)))]
async fn add_member(
    State(app): State<AppState>,
    JsonBody(req): JsonBody<AddMember>,
) -> Result<Json<Membership>, ApiError> {
    for (key, addr) in [("api_addr", &req.api_addr), ("raft_addr", &req.raft_addr)] {
        raftlock_node::check_address(addr)
            .map_err(|m| ApiError::bad_request(format!("{key}: {m}")))?;
    }
    let member = raftlock_node::Member {
        api_addr: req.api_addr,
        raft_addr: req.raft_addr,
        incarnation: 0,
    };
    let view = app.node.add_member(req.id, member).await?;
    Ok(Json(Membership::of(view, &app.node)))
}

/// Removes a voter or learner.
#[utoipa::path(delete, path = "/v1/cluster/members/{id}", tag = "cluster",
    params(("id" = u64, Path, description = "Member id")),
    responses((status = 200, description = "The new membership", body = Membership)))]
async fn remove_member(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<NodeId>,
) -> Result<Json<Membership>, ApiError> {
    let view = app.node.remove_member(id).await?;
    Ok(Json(Membership::of(view, &app.node)))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ClusterMember)]
struct Member {
    id: u64,
    api_addr: String,
    raft_addr: String,
    role: String,
    /// False for a learner (a member being added, not yet voting).
    voter: bool,
    applied_index: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Cluster {
    /// The node that answered.
    node_id: u64,
    leader_id: Option<u64>,
    term: u64,
    members: Vec<Member>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Health {
    healthy: bool,
    node_id: u64,
    leader_id: Option<u64>,
    applied_index: u64,
}

/// The Raft cluster as the answering member sees it.
#[utoipa::path(get, path = "/v1/cluster", tag = "cluster",
    responses((status = 200, description = "The cluster", body = Cluster)))]
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
                voter: m.voter,
                applied_index: m.applied_index,
            })
            .collect(),
    })
}

/// 200 with a leader and a caught-up replica; otherwise 503 `no_leader`
/// or `not_caught_up`, for load balancers.
#[utoipa::path(get, path = "/v1/health", tag = "cluster",
    responses((status = 200, description = "Healthy", body = Health)))]
async fn health(State(app): State<AppState>) -> Result<Json<Health>, ApiError> {
    refuse_if_replaced(&app)?;
    // Raft stopped on this member when its disk failed: its last view of
    // the leader would look healthy.
    app.node.check_storage()?;
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
