//! etcd's messages to and from the key space's types (core `kv/`).

use raftlock_core::kv::{
    DeleteRangeRequest, KeyValue, KvCompare, KvCompareResult, KvCompareTarget, KvEvent,
    KvEventKind, KvRequest, KvResponseOp, PutRequest, RangeRequest, RangeResult, SortOrder,
    SortTarget, TxnRequest,
};
use raftlock_core::SessionId;
use tonic::Status;

use crate::errors;
use crate::pb::etcdserverpb as pb;
use crate::pb::mvccpb;

/// etcd's limit on a transaction's operations (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

/// A lease id from the wire: 0 is none, a negative one is never granted.
pub fn lease(id: i64) -> Option<SessionId> {
    u128::try_from(id).ok().filter(|v| *v != 0).map(SessionId)
}

/// A session id as an etcd lease id (0 if it does not fit, which no
/// lease this door grants does).
pub fn lease_id(id: SessionId) -> i64 {
    i64::try_from(id.0).unwrap_or(0)
}

fn rev(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn wire_rev(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A key-value as etcd sends it.
pub fn kv(kv: KeyValue) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: kv.key,
        create_revision: wire_rev(kv.create_revision),
        mod_revision: wire_rev(kv.mod_revision),
        version: wire_rev(kv.version),
        value: kv.value,
        lease: kv.lease.map_or(0, lease_id),
    }
}

/// An event as etcd sends it; `prev_kv` only when the watch asked.
pub fn event(e: KvEvent, prev_kv: bool) -> mvccpb::Event {
    mvccpb::Event {
        r#type: match e.kind {
            KvEventKind::Put => mvccpb::event::EventType::Put as i32,
            KvEventKind::Delete => mvccpb::event::EventType::Delete as i32,
        },
        kv: Some(kv(e.kv)),
        prev_kv: if prev_kv { e.prev.map(kv) } else { None },
    }
}

/// A range request, checked as etcd's server checks it.
pub fn range_request(r: &pb::RangeRequest) -> Result<RangeRequest, Status> {
    if r.key.is_empty() {
        return Err(errors::empty_key());
    }
    let sort_order = match pb::range_request::SortOrder::try_from(r.sort_order) {
        Ok(pb::range_request::SortOrder::None) => SortOrder::None,
        Ok(pb::range_request::SortOrder::Ascend) => SortOrder::Ascend,
        Ok(pb::range_request::SortOrder::Descend) => SortOrder::Descend,
        Err(_) => return Err(Status::invalid_argument("etcdserver: invalid sort option")),
    };
    let sort_target = match pb::range_request::SortTarget::try_from(r.sort_target) {
        Ok(pb::range_request::SortTarget::Key) => SortTarget::Key,
        Ok(pb::range_request::SortTarget::Version) => SortTarget::Version,
        Ok(pb::range_request::SortTarget::Create) => SortTarget::Create,
        Ok(pb::range_request::SortTarget::Mod) => SortTarget::Mod,
        Ok(pb::range_request::SortTarget::Value) => SortTarget::Value,
        Err(_) => return Err(Status::invalid_argument("etcdserver: invalid sort option")),
    };
    Ok(RangeRequest {
        key: r.key.clone(),
        range_end: r.range_end.clone(),
        limit: rev(r.limit),
        revision: rev(r.revision),
        sort_order,
        sort_target,
        keys_only: r.keys_only,
        count_only: r.count_only,
        min_mod_revision: rev(r.min_mod_revision),
        max_mod_revision: rev(r.max_mod_revision),
        min_create_revision: rev(r.min_create_revision),
        max_create_revision: rev(r.max_create_revision),
    })
}

/// A range's answer (the header is the caller's).
pub fn range_response(r: RangeResult, header: pb::ResponseHeader) -> pb::RangeResponse {
    pb::RangeResponse {
        header: Some(header),
        kvs: r.kvs.into_iter().map(kv).collect(),
        more: r.more,
        count: wire_rev(r.count),
    }
}

/// A put request, checked as etcd's server checks it.
pub fn put_request(r: &pb::PutRequest) -> Result<PutRequest, Status> {
    if r.key.is_empty() {
        return Err(errors::empty_key());
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(Status::invalid_argument("etcdserver: value is provided"));
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(Status::invalid_argument("etcdserver: lease is provided"));
    }
    if r.lease < 0 {
        return Err(errors::lease_not_found());
    }
    Ok(PutRequest {
        key: r.key.clone(),
        value: r.value.clone(),
        lease: lease(r.lease),
        prev_kv: r.prev_kv,
        ignore_value: r.ignore_value,
        ignore_lease: r.ignore_lease,
    })
}

/// A delete request, checked.
pub fn delete_request(r: &pb::DeleteRangeRequest) -> Result<DeleteRangeRequest, Status> {
    if r.key.is_empty() {
        return Err(errors::empty_key());
    }
    Ok(DeleteRangeRequest {
        key: r.key.clone(),
        range_end: r.range_end.clone(),
        prev_kv: r.prev_kv,
    })
}

fn compare(c: &pb::Compare) -> Result<KvCompare, Status> {
    use pb::compare::{CompareResult, CompareTarget, TargetUnion};
    let result = match CompareResult::try_from(c.result) {
        Ok(CompareResult::Equal) => KvCompareResult::Equal,
        Ok(CompareResult::Greater) => KvCompareResult::Greater,
        Ok(CompareResult::Less) => KvCompareResult::Less,
        Ok(CompareResult::NotEqual) => KvCompareResult::NotEqual,
        Err(_) => {
            return Err(Status::invalid_argument(
                "etcdserver: invalid compare result",
            ))
        }
    };
    let union = c.target_union.clone();
    let target = match (CompareTarget::try_from(c.target), union) {
        (Ok(CompareTarget::Version), Some(TargetUnion::Version(v))) => {
            KvCompareTarget::Version(rev(v))
        }
        (Ok(CompareTarget::Version), None) => KvCompareTarget::Version(0),
        (Ok(CompareTarget::Create), Some(TargetUnion::CreateRevision(v))) => {
            KvCompareTarget::Create(rev(v))
        }
        (Ok(CompareTarget::Create), None) => KvCompareTarget::Create(0),
        (Ok(CompareTarget::Mod), Some(TargetUnion::ModRevision(v))) => KvCompareTarget::Mod(rev(v)),
        (Ok(CompareTarget::Mod), None) => KvCompareTarget::Mod(0),
        (Ok(CompareTarget::Value), Some(TargetUnion::Value(v))) => KvCompareTarget::Value(v),
        (Ok(CompareTarget::Value), None) => KvCompareTarget::Value(Vec::new()),
        (Ok(CompareTarget::Lease), Some(TargetUnion::Lease(v))) => KvCompareTarget::Lease(lease(v)),
        (Ok(CompareTarget::Lease), None) => KvCompareTarget::Lease(None),
        _ => {
            return Err(Status::invalid_argument(
                "etcdserver: invalid compare target",
            ))
        }
    };
    Ok(KvCompare {
        result,
        target,
        key: c.key.clone(),
        range_end: c.range_end.clone(),
    })
}

/// A transaction, checked (operation count, each request) recursively.
pub fn txn_request(t: &pb::TxnRequest) -> Result<TxnRequest, Status> {
    if t.compare.len() > MAX_TXN_OPS
        || t.success.len() > MAX_TXN_OPS
        || t.failure.len() > MAX_TXN_OPS
    {
        return Err(Status::invalid_argument(
            "etcdserver: too many operations in txn request",
        ));
    }
    let ops = |ops: &[pb::RequestOp]| -> Result<Vec<KvRequest>, Status> {
        ops.iter()
            .map(|op| {
                use pb::request_op::Request;
                match &op.request {
                    Some(Request::RequestRange(r)) => range_request(r).map(KvRequest::Range),
                    Some(Request::RequestPut(r)) => put_request(r).map(KvRequest::Put),
                    Some(Request::RequestDeleteRange(r)) => {
                        delete_request(r).map(KvRequest::DeleteRange)
                    }
                    Some(Request::RequestTxn(t)) => txn_request(t).map(KvRequest::Txn),
                    None => Err(Status::invalid_argument("etcdserver: empty request")),
                }
            })
            .collect()
    };
    Ok(TxnRequest {
        compare: t.compare.iter().map(compare).collect::<Result<_, _>>()?,
        success: ops(&t.success)?,
        failure: ops(&t.failure)?,
    })
}

/// A transaction's answer; every nested header is `header`.
pub fn txn_response(
    succeeded: bool,
    responses: Vec<KvResponseOp>,
    header: &pb::ResponseHeader,
) -> pb::TxnResponse {
    use pb::response_op::Response;
    let responses = responses
        .into_iter()
        .filter_map(|r| {
            let response = match r {
                KvResponseOp::Range(r) => Response::ResponseRange(range_response(r, *header)),
                KvResponseOp::Put { prev_kv } => Response::ResponsePut(pb::PutResponse {
                    header: Some(*header),
                    prev_kv: prev_kv.map(kv),
                }),
                KvResponseOp::DeleteRange { deleted, prev_kvs } => {
                    Response::ResponseDeleteRange(pb::DeleteRangeResponse {
                        header: Some(*header),
                        deleted: wire_rev(deleted),
                        prev_kvs: prev_kvs.into_iter().map(kv).collect(),
                    })
                }
                KvResponseOp::Txn {
                    succeeded,
                    responses,
                } => Response::ResponseTxn(txn_response(succeeded, responses, header)),
                KvResponseOp::Compact => return None,
            };
            Some(pb::ResponseOp {
                response: Some(response),
            })
        })
        .collect();
    pb::TxnResponse {
        header: Some(*header),
        succeeded,
        responses,
    }
}
