//! The Lease service: a lease is a raftlock session. Grant opens one,
//! Revoke closes it (its keys go), KeepAlive renews it through the
//! session keepalive path (quorum-confirmed by the leader), TimeToLive
//! and Leases read the replicated sessions.

use std::time::Duration;

use futures::StreamExt;
use raftlock_api::auth::Permission;
use raftlock_core::{CoreError, SessionId};
use raftlock_node::{Consistency, NodeError};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{lease, lease_id};
use crate::errors;
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::lease_server::Lease;
use crate::Etcd;

/// Milliseconds as etcd's whole seconds, rounded up.
fn secs(ms: u64) -> i64 {
    i64::try_from(ms.div_ceil(1000)).unwrap_or(i64::MAX)
}

type KeepAliveStream = tonic::codegen::BoxStream<pb::LeaseKeepAliveResponse>;

#[tonic::async_trait]
impl Lease for Etcd {
    async fn lease_grant(
        &self,
        request: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        // A lease is a session: opening one needs `lock` on some prefix,
        // as `POST /v1/sessions` does.
        let caller = self.caller(&request)?;
        caller.check_somewhere(Permission::Lock)?;
        let r = request.into_inner();
        if r.id < 0 {
            return Err(Status::invalid_argument(
                "etcdserver: lease id out of range",
            ));
        }
        let ttl = Duration::from_secs(u64::try_from(r.ttl).unwrap_or(0));
        let opened = self
            .node
            .open_lease(lease(r.id), ttl, caller.principal())
            .await
            .map_err(errors::status)?;
        // The member's revision, at least the grant's own (a follower's
        // applied state may not have reached it yet).
        let revision = self.revision().await.max(opened.revision);
        Ok(Response::new(pb::LeaseGrantResponse {
            header: Some(self.header(revision)),
            id: lease_id(opened.id),
            ttl: secs(opened.ttl_ms),
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        request: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        let caller = self.caller(&request)?;
        let id = lease(request.into_inner().id).ok_or_else(errors::lease_not_found)?;
        self.check_lease(&caller, id).await?;
        let closed = self
            .node
            .close_session_at(id)
            .await
            .map_err(errors::status)?;
        let revision = self.revision().await.max(closed);
        Ok(Response::new(pb::LeaseRevokeResponse {
            header: Some(self.header(revision)),
        }))
    }

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Result<Response<KeepAliveStream>, Status> {
        let caller = self.caller(&request)?;
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let this = self.clone();
        tokio::spawn(async move {
            while let Some(Ok(req)) = incoming.next().await {
                let answer = match lease(req.id) {
                    None => Ok(0),
                    Some(id) => match this.check_lease(&caller, id).await {
                        // Another principal's lease ends the stream.
                        Err(refused) => Err(refused),
                        Ok(()) => match this.node.keepalive(id).await {
                            Ok(ttl) => Ok(secs(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))),
                            // etcd answers an unknown lease with TTL 0.
                            Err(NodeError::Core(CoreError::SessionNotFound(_))) => Ok(0),
                            Err(e) => Err(errors::status(e)),
                        },
                    },
                };
                let revision = this.revision().await;
                let response = answer.map(|ttl| pb::LeaseKeepAliveResponse {
                    header: Some(this.header(revision)),
                    id: req.id,
                    ttl,
                });
                let failed = response.is_err();
                if tx.send(response).await.is_err() || failed {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<pb::LeaseTimeToLiveResponse>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        if let Some(id) = lease(r.id) {
            self.check_lease(&caller, id).await?;
        }
        let found = match lease(r.id) {
            Some(id) => self
                .node
                .lease(id, Consistency::Linearizable)
                .await
                .map_err(errors::status)?,
            None => None,
        };
        let revision = self.revision().await;
        let header = Some(self.header(revision));
        let response = match found {
            // etcd answers an unknown lease with TTL -1.
            None => pb::LeaseTimeToLiveResponse {
                header,
                id: r.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            },
            Some(view) => pb::LeaseTimeToLiveResponse {
                header,
                id: r.id,
                // The time left is known only to the leader's tracker; the
                // granted TTL is its upper bound (docs/etcd.md).
                ttl: secs(view.ttl_ms),
                granted_ttl: secs(view.ttl_ms),
                keys: if r.keys { view.keys } else { Vec::new() },
            },
        };
        Ok(Response::new(response))
    }

    async fn lease_leases(
        &self,
        request: Request<pb::LeaseLeasesRequest>,
    ) -> Result<Response<pb::LeaseLeasesResponse>, Status> {
        // Another principal's leases are not shown (their ids are what
        // renews and revokes them).
        let caller = self.caller(&request)?;
        let ids: Vec<SessionId> = self
            .node
            .leases_visible(Consistency::Linearizable, |owner| {
                Etcd::sees_lease(&caller, owner)
            })
            .await
            .map_err(errors::status)?;
        let revision = self.revision().await;
        Ok(Response::new(pb::LeaseLeasesResponse {
            header: Some(self.header(revision)),
            leases: ids
                .into_iter()
                .map(|id| pb::LeaseStatus { id: lease_id(id) })
                .collect(),
        }))
    }
}
