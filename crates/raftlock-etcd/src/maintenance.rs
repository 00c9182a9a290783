//! Maintenance Status and Cluster MemberList: what `etcdctl endpoint
//! status` and `etcdctl member list` ask, from the member's Raft status.
//! Member changes stay with raftlock's own tools (`raftlock member`):
//! MemberAdd, MemberRemove, MemberUpdate and MemberPromote answer
//! UNIMPLEMENTED, as do the other Maintenance methods.

use raftlock_node::Consistency;
use tonic::{Request, Response, Status};

use crate::errors;
use crate::pb::etcdserverpb as pb;
use crate::Etcd;

/// The etcd API version the door speaks (what `endpoint status` shows).
pub const VERSION: &str = "3.4.0";

#[tonic::async_trait]
impl pb::maintenance_server::Maintenance for Etcd {
    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let stats = self
            .node
            .kv_stats(Consistency::Stale)
            .await
            .map_err(errors::status)?;
        let status = self.node.status();
        let is_learner = status.members.iter().any(|m| m.id == status.id && !m.voter);
        let db = i64::try_from(stats.approximate_bytes).unwrap_or(i64::MAX);
        Ok(Response::new(pb::StatusResponse {
            header: Some(self.header(stats.revision)),
            version: VERSION.into(),
            db_size: db,
            leader: status.leader_id.unwrap_or(0),
            raft_index: status.last_log_index.unwrap_or(0),
            raft_term: status.term,
            raft_applied_index: status.applied_index,
            errors: Vec::new(),
            db_size_in_use: db,
            is_learner,
        }))
    }
}

#[tonic::async_trait]
impl pb::cluster_server::Cluster for Etcd {
    async fn member_list(
        &self,
        request: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        // Any valid token may list members, as `GET /v1/cluster/members`
        // (Status needs none: it shows what `/metrics` shows).
        self.caller(&request)?;
        let status = self.node.status();
        let members = status
            .members
            .iter()
            .map(|m| pb::Member {
                id: m.id,
                name: format!("raftlock-{}", m.id),
                peer_ur_ls: vec![format!("http://{}", m.raft_addr)],
                client_ur_ls: self
                    .client_addrs
                    .iter()
                    .filter(|(id, _)| *id == m.id)
                    .map(|(_, addr)| format!("{}://{addr}", self.scheme))
                    .collect(),
                is_learner: !m.voter,
            })
            .collect();
        let revision = self.revision().await;
        Ok(Response::new(pb::MemberListResponse {
            header: Some(self.header(revision)),
            members,
        }))
    }
}
