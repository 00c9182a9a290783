//! The Lock service (etcd's v3lock), as etcd's server runs it: the
//! clientv3 mutex recipe over the key space. Lock queues
//! `name/<lease hex>` with the lease and waits for its turn (`turn`: lease
//! 0 and an expired lease refused, a lease that expires while it waits
//! never granted); Unlock deletes the key. Both need `lock` on the name
//! when tokens are on, and the lease must be the caller's.

use raftlock_api::auth::Permission;
use raftlock_core::kv::{KvOp, RangeRequest};
use raftlock_node::Consistency;
use tonic::{Request, Response, Status};

use crate::convert::lease;
use crate::errors;
use crate::pb::etcdserverpb as etcdpb;
use crate::pb::v3lockpb as pb;
use crate::turn::Existing;
use crate::Etcd;

#[tonic::async_trait]
impl pb::lock_server::Lock for Etcd {
    async fn lock(
        &self,
        request: Request<pb::LockRequest>,
    ) -> Result<Response<pb::LockResponse>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        caller.check_key(Permission::Lock, &r.name)?;
        if let Some(session) = lease(r.lease) {
            self.check_lease(&caller, session).await?;
        }
        let mut prefix = r.name;
        prefix.push(b'/');
        let turn = self
            .wait_turn(&prefix, r.lease, Vec::new(), Existing::Keep)
            .await?;
        Ok(Response::new(pb::LockResponse {
            header: Some(self.header(turn.revision)),
            key: turn.key,
        }))
    }

    async fn unlock(
        &self,
        request: Request<pb::UnlockRequest>,
    ) -> Result<Response<pb::UnlockResponse>, Status> {
        let caller = self.caller(&request)?;
        let key = request.into_inner().key;
        // Every key of a lock lies under its name, so `lock` on the key
        // is `lock` on the name. A key held with a lease is its owner's
        // to delete.
        caller.check_key(Permission::Lock, &key)?;
        if caller.principal().is_some() {
            let found = self
                .node
                .kv_range(
                    RangeRequest {
                        key: key.clone(),
                        ..RangeRequest::default()
                    },
                    Consistency::Stale,
                )
                .await
                .map_err(errors::status)?;
            if let Some(session) = found.kvs.first().and_then(|kv| kv.lease) {
                self.check_lease(&caller, session).await?;
            }
        }
        let del = crate::convert::delete_request(&etcdpb::DeleteRangeRequest {
            key,
            ..Default::default()
        })?;
        let done = self
            .node
            .kv_write(KvOp::DeleteRange(del))
            .await
            .map_err(errors::status)?;
        Ok(Response::new(pb::UnlockResponse {
            header: Some(self.header(done.revision)),
        }))
    }
}
