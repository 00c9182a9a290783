//! What a server sends: the connect answer, then framed replies, each a
//! `ReplyHeader` (xid, zxid, err) followed by the record the request's
//! type calls for. A reply with a non-zero `err` carries no record
//! (ZooKeeper sends the header alone), and watch notifications are
//! replies with xid -1 carrying a `WatcherEvent`.

use bytes::BytesMut;

use super::codes::ErrorCode;
use super::data::{Acl, ClientInfo, EventType, KeeperState, Stat};
use super::error::WireError;
use super::jute::{record, Field, Reader, Record};
use super::opcode::{xid, OpCode};
use super::request::{read_multi, write_multi};

record! {
    /// The answer to a `ConnectRequest` (no reply header).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ConnectResponse {
        pub protocol_version: i32,
        /// The negotiated session timeout, ms; 0 when the session expired.
        pub time_out: i32,
        pub session_id: i64,
        pub passwd: Vec<u8>,
        /// Whether the server is read-only. Sent only when the request carried
        /// its own `readOnly` byte (the server treats a client without it as
        /// too old to read it).
        pub read_only: Option<bool>,
    }
}

record! {
    /// Every reply's first 16 bytes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReplyHeader {
        /// The request's xid, or a reserved one ([`xid`]).
        pub xid: i32,
        /// The last zxid the server applied.
        pub zxid: i64,
        pub err: ErrorCode,
    }
}

record! {
    /// A watch firing (xid -1), or a connection state change.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WatcherEvent {
        pub event_type: EventType,
        pub state: KeeperState,
        pub path: String,
    }
}

/// One result inside a `MultiResponse`, each behind a `MultiHeader` whose
/// type is the result's and whose err is 0, or the error's code for
/// [`OpResult::Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// Type 1 (`CreateResponse`).
    Create { path: String },
    /// Type 15 (`Create2Response`): what create2, createTTL and
    /// createContainer report.
    Create2 { path: String, stat: Stat },
    /// Type 2, no body.
    Delete,
    /// Type 5 (`SetDataResponse`).
    SetData { stat: Stat },
    /// Type 13, no body.
    Check,
    /// Type 8 (`GetChildrenResponse`), multiRead only.
    GetChildren { children: Vec<String> },
    /// Type 4 (`GetDataResponse`), multiRead only.
    GetData { data: Option<Vec<u8>>, stat: Stat },
    /// Type -1 (`ErrorResponse`). In a failed multi, the failing operation
    /// has its code, those before it `Ok`, those after it
    /// `RuntimeInconsistency`.
    Error { err: ErrorCode },
}

impl OpResult {
    pub fn opcode(&self) -> OpCode {
        match self {
            Self::Create { .. } => OpCode::Create,
            Self::Create2 { .. } => OpCode::Create2,
            Self::Delete => OpCode::Delete,
            Self::SetData { .. } => OpCode::SetData,
            Self::Check => OpCode::Check,
            Self::GetChildren { .. } => OpCode::GetChildren,
            Self::GetData { .. } => OpCode::GetData,
            Self::Error { .. } => OpCode::Error,
        }
    }
}

/// A multi's or multiRead's results.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiResponse {
    pub results: Vec<OpResult>,
}

impl Record for MultiResponse {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let results = read_multi(r, |h, r| {
            Ok(match OpCode::from_i32(h.op_type) {
                Ok(OpCode::Create) => OpResult::Create { path: r.field()? },
                Ok(OpCode::Create2) => OpResult::Create2 {
                    path: r.field()?,
                    stat: r.field()?,
                },
                Ok(OpCode::Delete) => OpResult::Delete,
                Ok(OpCode::SetData) => OpResult::SetData { stat: r.field()? },
                Ok(OpCode::Check) => OpResult::Check,
                Ok(OpCode::GetChildren) => OpResult::GetChildren {
                    children: r.field()?,
                },
                Ok(OpCode::GetData) => OpResult::GetData {
                    data: r.field()?,
                    stat: r.field()?,
                },
                // The `ErrorResponse` body repeats the header's code; the
                // body is what ZooKeeper's own reader uses.
                Ok(OpCode::Error) => OpResult::Error { err: r.field()? },
                _ => return Err(WireError::BadMultiOp(h.op_type)),
            })
        })?;
        Ok(Self { results })
    }
    fn write(&self, w: &mut BytesMut) {
        let header = |result: &OpResult| {
            let err = match result {
                OpResult::Error { err } => err.code(),
                _ => 0,
            };
            (result.opcode(), err)
        };
        write_multi(w, &self.results, header, |result, w| match result {
            OpResult::Create { path } => path.write_field(w),
            OpResult::Create2 { path, stat } => {
                path.write_field(w);
                stat.write_field(w);
            }
            OpResult::Delete | OpResult::Check => {}
            OpResult::SetData { stat } => stat.write_field(w),
            OpResult::GetChildren { children } => children.write_field(w),
            OpResult::GetData { data, stat } => {
                data.write_field(w);
                stat.write_field(w);
            }
            OpResult::Error { err } => err.write_field(w),
        });
    }
}

/// A reply's body: which record follows the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyBody {
    /// Header only: every error, and delete, ping, auth, setWatches,
    /// setWatches2, checkWatches, removeWatches, closeSession.
    Empty,
    /// xid -1.
    Notification(WatcherEvent),
    /// create (`CreateResponse`).
    Create { path: String },
    /// create2, createTTL, createContainer (`Create2Response`).
    Create2 { path: String, stat: Stat },
    /// exists, setData, setACL and a lone check (`ExistsResponse`,
    /// `SetDataResponse`, `SetACLResponse`: one `Stat`).
    Stat(Stat),
    /// getData and reconfig (`GetDataResponse`).
    GetData { data: Option<Vec<u8>>, stat: Stat },
    /// getACL (`GetACLResponse`).
    GetAcl { acl: Vec<Acl>, stat: Stat },
    /// getChildren (`GetChildrenResponse`).
    GetChildren { children: Vec<String> },
    /// getChildren2 (`GetChildren2Response`).
    GetChildren2 { children: Vec<String>, stat: Stat },
    /// sync (`SyncResponse`).
    Sync { path: String },
    /// multi, multiRead.
    Multi(MultiResponse),
    /// getAllChildrenNumber (`GetAllChildrenNumberResponse`).
    AllChildrenNumber { total_number: i32 },
    /// getEphemerals (`GetEphemeralsResponse`).
    Ephemerals { ephemerals: Vec<String> },
    /// whoAmI (`WhoAmIResponse`).
    WhoAmI { client_info: Vec<ClientInfo> },
    /// addWatch: ZooKeeper answers with an `ErrorResponse` of 0.
    AddWatch { err: ErrorCode },
    /// sasl (`SetSASLResponse`).
    Sasl { token: Vec<u8> },
}

impl ReplyBody {
    /// Reads the body a successful answer to `op` carries.
    pub fn read_for(op: OpCode, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match op {
            OpCode::Create => Self::Create { path: r.field()? },
            OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer => Self::Create2 {
                path: r.field()?,
                stat: r.field()?,
            },
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl | OpCode::Check => {
                Self::Stat(r.record()?)
            }
            OpCode::GetData | OpCode::Reconfig => Self::GetData {
                data: r.field()?,
                stat: r.field()?,
            },
            OpCode::GetAcl => Self::GetAcl {
                acl: r.field()?,
                stat: r.field()?,
            },
            OpCode::GetChildren => Self::GetChildren {
                children: r.field()?,
            },
            OpCode::GetChildren2 => Self::GetChildren2 {
                children: r.field()?,
                stat: r.field()?,
            },
            OpCode::Sync => Self::Sync { path: r.field()? },
            OpCode::Multi | OpCode::MultiRead => Self::Multi(r.record()?),
            OpCode::GetAllChildrenNumber => Self::AllChildrenNumber {
                total_number: r.field()?,
            },
            OpCode::GetEphemerals => Self::Ephemerals {
                ephemerals: r.field()?,
            },
            OpCode::WhoAmI => Self::WhoAmI {
                client_info: r.field()?,
            },
            OpCode::AddWatch => Self::AddWatch { err: r.field()? },
            OpCode::Sasl => Self::Sasl { token: r.field()? },
            OpCode::Delete
            | OpCode::DeleteContainer
            | OpCode::Ping
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::CheckWatches
            | OpCode::RemoveWatches
            | OpCode::CloseSession
            | OpCode::CreateSession
            | OpCode::Notification
            | OpCode::Error => Self::Empty,
        })
    }

    pub fn write(&self, w: &mut BytesMut) {
        match self {
            Self::Empty => {}
            Self::Notification(e) => e.write(w),
            Self::Create { path } | Self::Sync { path } => path.write_field(w),
            Self::Create2 { path, stat } => {
                path.write_field(w);
                stat.write_field(w);
            }
            Self::Stat(stat) => stat.write(w),
            Self::GetData { data, stat } => {
                data.write_field(w);
                stat.write_field(w);
            }
            Self::GetAcl { acl, stat } => {
                acl.write_field(w);
                stat.write_field(w);
            }
            Self::GetChildren { children }
            | Self::Ephemerals {
                ephemerals: children,
            } => children.write_field(w),
            Self::GetChildren2 { children, stat } => {
                children.write_field(w);
                stat.write_field(w);
            }
            Self::Multi(m) => m.write(w),
            Self::AllChildrenNumber { total_number } => total_number.write_field(w),
            Self::WhoAmI { client_info } => client_info.write_field(w),
            Self::AddWatch { err } => err.write_field(w),
            Self::Sasl { token } => token.write_field(w),
        }
    }
}

/// One reply frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub header: ReplyHeader,
    pub body: ReplyBody,
}

impl Reply {
    /// Decodes one reply frame (the bytes after the length prefix).
    /// `op_for_xid` names the type of the request an ordinary xid answers;
    /// the reserved xids need none.
    pub fn decode(
        frame: &[u8],
        op_for_xid: impl FnOnce(i32) -> Option<OpCode>,
    ) -> Result<Self, WireError> {
        let mut r = Reader::new(frame);
        let header: ReplyHeader = r.record()?;
        let body = match header.xid {
            xid::NOTIFICATION => ReplyBody::Notification(r.record()?),
            xid::PING | xid::AUTH | xid::SET_WATCHES => ReplyBody::Empty,
            other => {
                let op = op_for_xid(other);
                if !header.err.is_ok() && r.remaining() == 0 {
                    // A failed request's answer is its header alone.
                    ReplyBody::Empty
                } else {
                    ReplyBody::read_for(op.ok_or(WireError::UnexpectedXid(other))?, &mut r)?
                }
            }
        };
        r.finish()?;
        Ok(Self { header, body })
    }

    /// Appends the header and body (no frame length).
    pub fn encode(&self, w: &mut BytesMut) {
        self.header.write(w);
        self.body.write(w);
    }
}
