//! Request types (`ZooDefs.OpCode`) and the reserved xids (`ClientCnxn`).

use super::jute::int_enum;

/// Xids that do not number an ordinary request.
pub mod xid {
    /// A watch notification from the server.
    pub const NOTIFICATION: i32 = -1;
    /// A ping and its answer.
    pub const PING: i32 = -2;
    /// An auth packet and its answer.
    pub const AUTH: i32 = -4;
    /// The setWatches a client sends after reconnecting, and its answer.
    pub const SET_WATCHES: i32 = -8;
}

int_enum! {
    /// A request header's `type`.
    OpCode, UnknownOpcode {
        /// Never sent by a client; the server's notifications use xid -1.
        Notification = 0,
        Create = 1,
        Delete = 2,
        Exists = 3,
        /// Also how a client reads the config (`/zookeeper/config`).
        GetData = 4,
        SetData = 5,
        GetAcl = 6,
        SetAcl = 7,
        GetChildren = 8,
        Sync = 9,
        Ping = 11,
        GetChildren2 = 12,
        Check = 13,
        Multi = 14,
        Create2 = 15,
        Reconfig = 16,
        CheckWatches = 17,
        RemoveWatches = 18,
        CreateContainer = 19,
        /// The server's own container cleanup; never sent by a client.
        DeleteContainer = 20,
        CreateTtl = 21,
        MultiRead = 22,
        Auth = 100,
        SetWatches = 101,
        Sasl = 102,
        GetEphemerals = 103,
        GetAllChildrenNumber = 104,
        SetWatches2 = 105,
        AddWatch = 106,
        WhoAmI = 107,
        /// A connect handshake inside the server; not in a client's header.
        CreateSession = -10,
        CloseSession = -11,
        /// A failed operation's result inside a multi.
        Error = -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::error::WireError;

    #[test]
    fn numbers_round_trip() {
        for op in OpCode::ALL {
            assert_eq!(OpCode::from_i32(op.code()), Ok(*op));
        }
        assert_eq!(OpCode::Create.code(), 1);
        assert_eq!(OpCode::WhoAmI.code(), 107);
        assert_eq!(OpCode::CloseSession.code(), -11);
        assert_eq!(OpCode::from_i32(10), Err(WireError::UnknownOpcode(10)));
    }
}
