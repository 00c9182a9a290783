//! The Lock service (etcd's v3lock), as etcd's server runs it: the
//! clientv3 mutex recipe over the key space. Lock puts `name/<lease hex>`
//! with the lease unless the lease already has it, then waits until no
//! key under `name/` has an older create revision. Unlike etcd it refuses
//! lease 0 and an expired lease (no orphaned key), and it answers only
//! while the caller's key still exists, read linearizably at the end: a
//! lease that expired while its caller waited is refused, never granted
//! (etcd#11456).

use raftlock_core::kv::{
    prefix_end, KvCompare, KvCompareResult, KvCompareTarget, KvOp, KvRequest, KvResponseOp,
    PutRequest, RangeRequest, TxnRequest,
};
use raftlock_node::Consistency;
use tonic::{Request, Response, Status};

use crate::convert::lease;
use crate::errors;
use crate::pb::etcdserverpb as etcdpb;
use crate::pb::v3lockpb as pb;
use crate::Etcd;

#[tonic::async_trait]
impl pb::lock_server::Lock for Etcd {
    async fn lock(
        &self,
        request: Request<pb::LockRequest>,
    ) -> Result<Response<pb::LockResponse>, Status> {
        let r = request.into_inner();
        let session = lease(r.lease).ok_or_else(errors::lease_not_found)?;
        let mut prefix = r.name.clone();
        prefix.push(b'/');
        let mut key = prefix.clone();
        key.extend_from_slice(format!("{:x}", r.lease).as_bytes());
        let txn = TxnRequest {
            compare: vec![KvCompare {
                result: KvCompareResult::Equal,
                target: KvCompareTarget::Create(0),
                key: key.clone(),
                range_end: Vec::new(),
            }],
            success: vec![KvRequest::Put(PutRequest {
                key: key.clone(),
                lease: Some(session),
                ..PutRequest::default()
            })],
            failure: vec![KvRequest::Range(RangeRequest {
                key: key.clone(),
                ..RangeRequest::default()
            })],
        };
        let done = self
            .node
            .kv_write(KvOp::Txn(txn))
            .await
            .map_err(errors::status)?;
        // This member's state must include the put before it decides
        // anything from its own (stale) reads: a follower may lag.
        let written = done.revision;
        let mine = match done.value {
            KvResponseOp::Txn {
                succeeded: true, ..
            } => done.revision,
            KvResponseOp::Txn { responses, .. } => match responses.first() {
                Some(KvResponseOp::Range(r)) => r
                    .kvs
                    .first()
                    .map(|kv| kv.create_revision)
                    .ok_or_else(errors::lease_not_found)?,
                _ => return Err(Status::internal("etcdserver: unexpected answer")),
            },
            _ => return Err(Status::internal("etcdserver: unexpected answer")),
        };
        let mut applied = self.node.subscribe_kv();
        let older = RangeRequest {
            key: prefix.clone(),
            range_end: prefix_end(&prefix),
            max_create_revision: mine.saturating_sub(1),
            count_only: true,
            ..RangeRequest::default()
        };
        let exists = RangeRequest {
            key: key.clone(),
            count_only: true,
            ..RangeRequest::default()
        };
        loop {
            applied.borrow_and_update();
            let local = self
                .node
                .revision(Consistency::Stale)
                .await
                .map_err(errors::status)?;
            if local < written {
                if applied.changed().await.is_err() {
                    return Err(Status::unavailable("etcdserver: server stopped"));
                }
                continue;
            }
            let found = self
                .node
                .kv_range(older.clone(), Consistency::Stale)
                .await
                .map_err(errors::status)?;
            // Count is before filters (etcd's); the filtered keys are
            // what counts here, so ask again without count_only when
            // any key lies under the prefix at all.
            let waiting_on = if found.count == 0 {
                0
            } else {
                let listed = self
                    .node
                    .kv_range(
                        RangeRequest {
                            count_only: false,
                            keys_only: true,
                            ..older.clone()
                        },
                        Consistency::Stale,
                    )
                    .await
                    .map_err(errors::status)?;
                listed.kvs.len()
            };
            let still = self
                .node
                .kv_range(exists.clone(), Consistency::Stale)
                .await
                .map_err(errors::status)?;
            if still.count == 0 {
                return Err(errors::lease_not_found());
            }
            if waiting_on == 0 {
                break;
            }
            if applied.changed().await.is_err() {
                return Err(Status::unavailable("etcdserver: server stopped"));
            }
        }
        // Granted only while the key (and so the lease) still exists.
        let held = self
            .node
            .kv_range(exists, Consistency::Linearizable)
            .await
            .map_err(errors::status)?;
        if held.count == 0 {
            return Err(errors::lease_not_found());
        }
        Ok(Response::new(pb::LockResponse {
            header: Some(self.header(held.revision)),
            key,
        }))
    }

    async fn unlock(
        &self,
        request: Request<pb::UnlockRequest>,
    ) -> Result<Response<pb::UnlockResponse>, Status> {
        let key = request.into_inner().key;
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
