//! raftlock's errors as etcd's gRPC errors: the codes and messages of
//! etcd's `rpctypes`, which clientv3 matches by message to give its own
//! typed errors (`ErrLeaseNotFound`, `ErrCompacted`, …).

use raftlock_core::CoreError;
use raftlock_node::NodeError;
use tonic::Status;

/// etcd's "etcdserver: key is not provided".
pub fn empty_key() -> Status {
    Status::invalid_argument("etcdserver: key is not provided")
}

/// etcd's "etcdserver: requested lease not found".
pub fn lease_not_found() -> Status {
    Status::not_found("etcdserver: requested lease not found")
}

/// etcd's compacted error (a range below the compact revision).
pub fn compacted() -> Status {
    Status::out_of_range("etcdserver: mvcc: required revision has been compacted")
}

/// A node operation's error as etcd would answer it.
pub fn status(error: NodeError) -> Status {
    match error {
        NodeError::Core(core) => core_status(core),
        NodeError::NoLeader => Status::unavailable("etcdserver: no leader"),
        NodeError::OutcomeUnknown(_) | NodeError::Timeout => {
            Status::unavailable("etcdserver: request timed out")
        }
        NodeError::ShuttingDown => Status::unavailable("etcdserver: server stopped"),
        NodeError::StorageFailed(m) | NodeError::DiskFull(m) => {
            Status::unavailable(format!("etcdserver: {m}"))
        }
        other => Status::internal(other.to_string()),
    }
}

fn core_status(error: CoreError) -> Status {
    match error {
        CoreError::SessionNotFound(_) => lease_not_found(),
        CoreError::SessionConflict(_) => {
            Status::failed_precondition("etcdserver: lease already exists")
        }
        CoreError::Compacted { .. } => compacted(),
        CoreError::FutureRevision { .. } => {
            Status::out_of_range("etcdserver: mvcc: required revision is a future revision")
        }
        CoreError::KeyNotFound => Status::invalid_argument("etcdserver: key not found"),
        CoreError::Invalid(m) if m.starts_with("too large lease TTL") => {
            Status::out_of_range("etcdserver: too large lease TTL")
        }
        CoreError::Invalid(m) => Status::invalid_argument(format!("etcdserver: {m}")),
        CoreError::TxnOpFailed { error, .. } => core_status(*error),
        other => Status::failed_precondition(format!("etcdserver: {other}")),
    }
}
