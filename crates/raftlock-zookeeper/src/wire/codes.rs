//! ZooKeeper's error codes (`KeeperException.Code`), with its numbers. A
//! reply header's `err` and a multi's per-operation results carry them.

use super::jute::int_enum;

int_enum! {
    /// A ZooKeeper error code; `Ok` is success.
    ErrorCode, UnknownErrorCode {
        Ok = 0,
        SystemError = -1,
        /// Also the result of every operation after the failing one in a
        /// failed multi.
        RuntimeInconsistency = -2,
        DataInconsistency = -3,
        ConnectionLoss = -4,
        MarshallingError = -5,
        Unimplemented = -6,
        OperationTimeout = -7,
        BadArguments = -8,
        UnknownSession = -12,
        NewConfigNoQuorum = -13,
        ReconfigInProgress = -14,
        ApiError = -100,
        NoNode = -101,
        NoAuth = -102,
        BadVersion = -103,
        NoChildrenForEphemerals = -108,
        NodeExists = -110,
        NotEmpty = -111,
        SessionExpired = -112,
        InvalidCallback = -113,
        InvalidAcl = -114,
        AuthFailed = -115,
        SessionMoved = -118,
        NotReadOnly = -119,
        EphemeralOnLocalSession = -120,
        NoWatcher = -121,
        RequestTimeout = -122,
        ReconfigDisabled = -123,
        SessionClosedRequireSaslAuth = -124,
        QuotaExceeded = -125,
        ThrottledOp = -127,
    }
}

impl ErrorCode {
    pub fn is_ok(self) -> bool {
        self == ErrorCode::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::error::WireError;

    #[test]
    fn numbers_are_zookeepers() {
        // KeeperException.Code in ZooKeeper 3.8.
        let expected = [
            (ErrorCode::Ok, 0),
            (ErrorCode::SystemError, -1),
            (ErrorCode::RuntimeInconsistency, -2),
            (ErrorCode::DataInconsistency, -3),
            (ErrorCode::ConnectionLoss, -4),
            (ErrorCode::MarshallingError, -5),
            (ErrorCode::Unimplemented, -6),
            (ErrorCode::OperationTimeout, -7),
            (ErrorCode::BadArguments, -8),
            (ErrorCode::UnknownSession, -12),
            (ErrorCode::NewConfigNoQuorum, -13),
            (ErrorCode::ReconfigInProgress, -14),
            (ErrorCode::ApiError, -100),
            (ErrorCode::NoNode, -101),
            (ErrorCode::NoAuth, -102),
            (ErrorCode::BadVersion, -103),
            (ErrorCode::NoChildrenForEphemerals, -108),
            (ErrorCode::NodeExists, -110),
            (ErrorCode::NotEmpty, -111),
            (ErrorCode::SessionExpired, -112),
            (ErrorCode::InvalidCallback, -113),
            (ErrorCode::InvalidAcl, -114),
            (ErrorCode::AuthFailed, -115),
            (ErrorCode::SessionMoved, -118),
            (ErrorCode::NotReadOnly, -119),
            (ErrorCode::EphemeralOnLocalSession, -120),
            (ErrorCode::NoWatcher, -121),
            (ErrorCode::RequestTimeout, -122),
            (ErrorCode::ReconfigDisabled, -123),
            (ErrorCode::SessionClosedRequireSaslAuth, -124),
            (ErrorCode::QuotaExceeded, -125),
            (ErrorCode::ThrottledOp, -127),
        ];
        assert_eq!(expected.len(), ErrorCode::ALL.len());
        for (code, n) in expected {
            assert_eq!(code.code(), n, "{code:?}");
            assert_eq!(ErrorCode::from_i32(n), Ok(code));
        }
        for n in [-9, -10, -11, -109, -116, -117, -126, 1] {
            assert_eq!(ErrorCode::from_i32(n), Err(WireError::UnknownErrorCode(n)));
        }
    }
}
