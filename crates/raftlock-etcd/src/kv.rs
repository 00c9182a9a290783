//! The KV service: Range, Put, DeleteRange, Txn and Compact, each a
//! translation onto the node's typed key-space operations.

use raftlock_api::auth::Permission;
use raftlock_core::kv::{KvOp, KvResponseOp};
use raftlock_node::Consistency;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::errors;
use crate::pb::etcdserverpb as pb;
use crate::Etcd;

fn unexpected() -> Status {
    Status::internal("etcdserver: unexpected answer")
}

#[tonic::async_trait]
impl pb::kv_server::Kv for Etcd {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        let req = convert::range_request(&r)?;
        caller.check_range(Permission::Read, &req.key, &req.range_end)?;
        let consistency = if r.serializable {
            Consistency::Stale
        } else {
            Consistency::Linearizable
        };
        let result = self
            .node
            .kv_range(req, consistency)
            .await
            .map_err(errors::status)?;
        let header = self.header(result.revision);
        Ok(Response::new(convert::range_response(result, header)))
    }

    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        let caller = self.caller(&request)?;
        let put = convert::put_request(&request.into_inner())?;
        caller.check_key(Permission::Write, &put.key)?;
        if let Some(lease) = put.lease {
            self.check_lease(&caller, lease).await?;
        }
        let done = self
            .node
            .kv_write(KvOp::Put(put))
            .await
            .map_err(errors::status)?;
        let KvResponseOp::Put { prev_kv } = done.value else {
            return Err(unexpected());
        };
        Ok(Response::new(pb::PutResponse {
            header: Some(self.header(done.revision)),
            prev_kv: prev_kv.map(convert::kv),
        }))
    }

    async fn delete_range(
        &self,
        request: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        let caller = self.caller(&request)?;
        let del = convert::delete_request(&request.into_inner())?;
        caller.check_range(Permission::Write, &del.key, &del.range_end)?;
        let done = self
            .node
            .kv_write(KvOp::DeleteRange(del))
            .await
            .map_err(errors::status)?;
        let KvResponseOp::DeleteRange { deleted, prev_kvs } = done.value else {
            return Err(unexpected());
        };
        Ok(Response::new(pb::DeleteRangeResponse {
            header: Some(self.header(done.revision)),
            deleted: i64::try_from(deleted).unwrap_or(i64::MAX),
            prev_kvs: prev_kvs.into_iter().map(convert::kv).collect(),
        }))
    }

    async fn txn(
        &self,
        request: Request<pb::TxnRequest>,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        let caller = self.caller(&request)?;
        let txn = convert::txn_request(&request.into_inner())?;
        for lease in caller.check_txn(&txn)? {
            self.check_lease(&caller, lease).await?;
        }
        let done = self.write_txn(txn).await?;
        let KvResponseOp::Txn {
            succeeded,
            responses,
        } = done.value
        else {
            return Err(unexpected());
        };
        let header = self.header(done.revision);
        Ok(Response::new(convert::txn_response(
            succeeded, responses, &header,
        )))
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        // Compaction drops every key's history: etcd's admin's alone.
        self.caller(&request)?.check_cluster_admin()?;
        let revision = u64::try_from(request.into_inner().revision).unwrap_or(0);
        let done = self
            .node
            .kv_write(KvOp::Compact { revision })
            .await
            .map_err(errors::status)?;
        Ok(Response::new(pb::CompactionResponse {
            header: Some(self.header(done.revision)),
        }))
    }
}
