//! raftlock's errors as ZooKeeper answers. Errors that say "this member
//! cannot serve now" (no leader, shutting down, storage failed, outcome
//! unknown) are not answered with a code: the connection is closed, which
//! is how a ZooKeeper server cut off from its quorum behaves, and the
//! client moves to another member and resumes its session there
//! (docs/design.md, "Front doors over one contract").

use raftlock_core::CoreError;
use raftlock_node::NodeError;

use crate::wire::ErrorCode;

/// What to do with a failed operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Answer with this code.
    Code(ErrorCode),
    /// Close the connection (logged with this reason).
    Close(String),
}

/// Which operation failed: a create's version mismatch is "node exists".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Create,
    Other,
}

pub(crate) fn core_code(error: &CoreError, kind: OpKind) -> ErrorCode {
    match error {
        CoreError::NotFound(_) => ErrorCode::NoNode,
        CoreError::VersionMismatch { .. } if kind == OpKind::Create => ErrorCode::NodeExists,
        CoreError::VersionMismatch { .. } => ErrorCode::BadVersion,
        CoreError::NotEmpty(_) => ErrorCode::NotEmpty,
        CoreError::EphemeralParent(_) => ErrorCode::NoChildrenForEphemerals,
        CoreError::SessionNotFound(_) => ErrorCode::SessionExpired,
        CoreError::BadName { .. } | CoreError::Invalid(_) => ErrorCode::BadArguments,
        CoreError::TxnOpFailed { error, .. } => core_code(error, kind),
        _ => ErrorCode::SystemError,
    }
}

pub(crate) fn failure(error: &NodeError, kind: OpKind) -> Failure {
    match error {
        NodeError::Core(core) => Failure::Code(core_code(core, kind)),
        NodeError::Internal(_) => Failure::Code(ErrorCode::SystemError),
        other => Failure::Close(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_zookeeper() {
        let mismatch = CoreError::VersionMismatch {
            path: "/a".into(),
            expected: 0,
            actual: 1,
        };
        assert_eq!(core_code(&mismatch, OpKind::Create), ErrorCode::NodeExists);
        assert_eq!(core_code(&mismatch, OpKind::Other), ErrorCode::BadVersion);
        let nested = CoreError::TxnOpFailed {
            index: 2,
            error: Box::new(CoreError::NotEmpty("/a".into())),
        };
        assert_eq!(core_code(&nested, OpKind::Other), ErrorCode::NotEmpty);
        assert!(matches!(
            failure(&NodeError::NoLeader, OpKind::Other),
            Failure::Close(_)
        ));
        assert_eq!(
            failure(
                &NodeError::Core(CoreError::NotFound("/x".into())),
                OpKind::Other
            ),
            Failure::Code(ErrorCode::NoNode)
        );
    }
}
