//! What a server sends: the connect answer, then framed replies, each a
//! `ReplyHeader` (xid, zxid, err) followed by the record the request's
//! type calls for. A reply with a non-zero `err` carries no record
//! (ZooKeeper sends the header alone), and watch notifications are
//! replies with xid -1 carrying a `WatcherEvent`.

use bytes::BytesMut;

use super::codes::ErrorCode;
use super::data::{Acl, ClientInfo, EventType, KeeperState, Stat};
use super::error::WireError;
use super::jute::{Reader, Record, Writer};
use super::opcode::{xid, OpCode};
use super::request::MultiHeader;

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

impl Record for ConnectResponse {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            protocol_version: r.int()?,
            time_out: r.int()?,
            session_id: r.long()?,
            passwd: r.bytes()?,
            read_only: if r.remaining() > 0 {
                Some(r.bool()?)
            } else {
                None
            },
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.protocol_version);
        w.int(self.time_out);
        w.long(self.session_id);
        w.buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            w.bool(ro);
        }
    }
}

/// Every reply's first 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request's xid, or a reserved one ([`xid`]).
    pub xid: i32,
    /// The last zxid the server applied.
    pub zxid: i64,
    pub err: ErrorCode,
}

impl Record for ReplyHeader {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            xid: r.int()?,
            zxid: r.long()?,
            err: ErrorCode::from_i32(r.int()?)?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.xid);
        w.long(self.zxid);
        w.int(self.err.code());
    }
}

/// A watch firing (xid -1), or a connection state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    pub event_type: EventType,
    pub state: KeeperState,
    pub path: String,
}

impl Record for WatcherEvent {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            event_type: EventType::from_i32(r.int()?)?,
            state: KeeperState::from_i32(r.int()?)?,
            path: r.string()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.event_type.code());
        w.int(self.state.code());
        w.string(&self.path);
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
        let mut results = Vec::new();
        loop {
            let h: MultiHeader = r.record()?;
            if h.done {
                return Ok(Self { results });
            }
            results.push(match OpCode::from_i32(h.op_type) {
                Ok(OpCode::Create) => OpResult::Create { path: r.string()? },
                Ok(OpCode::Create2) => OpResult::Create2 {
                    path: r.string()?,
                    stat: r.record()?,
                },
                Ok(OpCode::Delete) => OpResult::Delete,
                Ok(OpCode::SetData) => OpResult::SetData { stat: r.record()? },
                Ok(OpCode::Check) => OpResult::Check,
                Ok(OpCode::GetChildren) => OpResult::GetChildren {
                    children: r.strings()?,
                },
                Ok(OpCode::GetData) => OpResult::GetData {
                    data: r.opt_bytes()?,
                    stat: r.record()?,
                },
                // The `ErrorResponse` body repeats the header's code; the
                // body is what ZooKeeper's own reader uses.
                Ok(OpCode::Error) => OpResult::Error {
                    err: ErrorCode::from_i32(r.int()?)?,
                },
                _ => return Err(WireError::BadMultiOp(h.op_type)),
            });
        }
    }
    fn write(&self, w: &mut BytesMut) {
        for result in &self.results {
            let err = match result {
                OpResult::Error { err } => err.code(),
                _ => 0,
            };
            MultiHeader {
                op_type: result.opcode().code(),
                done: false,
                err,
            }
            .write(w);
            match result {
                OpResult::Create { path } => w.string(path),
                OpResult::Create2 { path, stat } => {
                    w.string(path);
                    stat.write(w);
                }
                OpResult::Delete | OpResult::Check => {}
                OpResult::SetData { stat } => stat.write(w),
                OpResult::GetChildren { children } => w.strings(children),
                OpResult::GetData { data, stat } => {
                    w.buffer(data.as_deref());
                    stat.write(w);
                }
                OpResult::Error { err } => w.int(err.code()),
            }
        }
        MultiHeader::END.write(w);
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
            OpCode::Create => Self::Create { path: r.string()? },
            OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer => Self::Create2 {
                path: r.string()?,
                stat: r.record()?,
            },
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl | OpCode::Check => {
                Self::Stat(r.record()?)
            }
            OpCode::GetData | OpCode::Reconfig => Self::GetData {
                data: r.opt_bytes()?,
                stat: r.record()?,
            },
            OpCode::GetAcl => Self::GetAcl {
                acl: r.vector(Reader::record)?,
                stat: r.record()?,
            },
            OpCode::GetChildren => Self::GetChildren {
                children: r.strings()?,
            },
            OpCode::GetChildren2 => Self::GetChildren2 {
                children: r.strings()?,
                stat: r.record()?,
            },
            OpCode::Sync => Self::Sync { path: r.string()? },
            OpCode::Multi | OpCode::MultiRead => Self::Multi(r.record()?),
            OpCode::GetAllChildrenNumber => Self::AllChildrenNumber {
                total_number: r.int()?,
            },
            OpCode::GetEphemerals => Self::Ephemerals {
                ephemerals: r.strings()?,
            },
            OpCode::WhoAmI => Self::WhoAmI {
                client_info: r.vector(Reader::record)?,
            },
            OpCode::AddWatch => Self::AddWatch {
                err: ErrorCode::from_i32(r.int()?)?,
            },
            OpCode::Sasl => Self::Sasl { token: r.bytes()? },
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
            Self::Create { path } | Self::Sync { path } => w.string(path),
            Self::Create2 { path, stat } => {
                w.string(path);
                stat.write(w);
            }
            Self::Stat(stat) => stat.write(w),
            Self::GetData { data, stat } => {
                w.buffer(data.as_deref());
                stat.write(w);
            }
            Self::GetAcl { acl, stat } => {
                w.records(acl);
                stat.write(w);
            }
            Self::GetChildren { children } => w.strings(children),
            Self::GetChildren2 { children, stat } => {
                w.strings(children);
                stat.write(w);
            }
            Self::Multi(m) => m.write(w),
            Self::AllChildrenNumber { total_number } => w.int(*total_number),
            Self::Ephemerals { ephemerals } => w.strings(ephemerals),
            Self::WhoAmI { client_info } => w.records(client_info),
            Self::AddWatch { err } => w.int(err.code()),
            Self::Sasl { token } => w.buffer(Some(token)),
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
