//! What a client sends: the connect handshake, then framed requests, each
//! a `RequestHeader` (xid, type) followed by the record its type names.

use bytes::BytesMut;
use thiserror::Error;

use super::data::{Acl, AddWatchMode, CreateMode, WatcherType};
use super::error::WireError;
use super::jute::{record, Reader, Record};
use super::opcode::OpCode;

/// The node a client reads (getData) to learn the ensemble's config.
pub const CONFIG_NODE: &str = "/zookeeper/config";

record! {
    /// The first frame of a connection (no request header).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ConnectRequest {
        pub protocol_version: i32,
        /// The last zxid the client saw; a server behind it must refuse.
        pub last_zxid_seen: i64,
        /// Requested session timeout, ms.
        pub time_out: i32,
        /// 0 for a new session, else the session to resume.
        pub session_id: i64,
        /// The session's password (16 bytes from the server; empty when new).
        pub passwd: Vec<u8>,
        /// The trailing `readOnly` byte clients since 3.4 send; `None` when
        /// it was absent, so the answer must not carry it either.
        pub read_only: Option<bool>,
    }
}

record! {
    /// Every request's first 8 bytes. `op_type` is kept raw: an unknown
    /// opcode is reported with the xid, so a server can answer it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RequestHeader {
        pub xid: i32,
        pub op_type: i32,
    }
}

record! {
    /// Precedes every operation and result inside a multi; one with `done`
    /// set (type -1, err -1) ends the list.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MultiHeader {
        pub op_type: i32,
        pub done: bool,
        pub err: i32,
    }
}

impl MultiHeader {
    /// The list's terminator.
    pub const END: MultiHeader = MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    };
}

record! {
    /// create (1), create2 (15), createContainer (19): `CreateRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CreateRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub acl: Vec<Acl>,
        /// The `flags` field; flags outside `CreateMode` fail to decode.
        pub mode: CreateMode,
    }
}

record! {
    /// createTTL (21): `CreateTTLRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CreateTtlRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub acl: Vec<Acl>,
        pub mode: CreateMode,
        /// ms.
        pub ttl: i64,
    }
}

record! {
    /// delete (2): `DeleteRequest`. Version -1 matches any.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeleteRequest {
        pub path: String,
        pub version: i32,
    }
}

record! {
    /// exists (3), getData (4), getChildren (8), getChildren2 (12): the
    /// schema's `ExistsRequest`, `GetDataRequest`, `GetChildrenRequest` and
    /// `GetChildren2Request`, which are the same two fields.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PathWatchRequest {
        pub path: String,
        /// Leave a one-shot watch.
        pub watch: bool,
    }
}

record! {
    /// sync (9), getACL (6), getAllChildrenNumber (104), getEphemerals (103):
    /// `SyncRequest`, `GetACLRequest`, `GetAllChildrenNumberRequest`,
    /// `GetEphemeralsRequest` (whose field is a prefix), one path each.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PathRequest {
        pub path: String,
    }
}

record! {
    /// setData (5): `SetDataRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetDataRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub version: i32,
    }
}

record! {
    /// setACL (7): `SetACLRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetAclRequest {
        pub path: String,
        pub acl: Vec<Acl>,
        pub version: i32,
    }
}

record! {
    /// check (13), alone or inside a multi: `CheckVersionRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CheckVersionRequest {
        pub path: String,
        pub version: i32,
    }
}

record! {
    /// auth (100, xid -4): `AuthPacket`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthPacket {
        /// Always 0 in the clients that exist.
        pub auth_type: i32,
        pub scheme: String,
        pub auth: Vec<u8>,
    }
}

record! {
    /// setWatches (101, xid -8): the watches a reconnecting client still
    /// holds, to be fired at once for changes after `relative_zxid`.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SetWatches {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

record! {
    /// setWatches2 (105, xid -8): setWatches plus persistent watches.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SetWatches2 {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// checkWatches (17), removeWatches (18): `CheckWatchesRequest`,
    /// `RemoveWatchesRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WatchesRequest {
        pub path: String,
        pub watcher_type: WatcherType,
    }
}

record! {
    /// addWatch (106): `AddWatchRequest`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AddWatchRequest {
        pub path: String,
        pub mode: AddWatchMode,
    }
}

record! {
    /// reconfig (16): `ReconfigRequest`. Clients send null for the lists
    /// they leave out.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ReconfigRequest {
        pub joining_servers: Option<String>,
        pub leaving_servers: Option<String>,
        pub new_members: Option<String>,
        /// -1: whatever the current config is.
        pub cur_config_id: i64,
    }
}

record! {
    /// sasl (102): `GetSASLRequest`, one token.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SaslRequest {
        pub token: Vec<u8>,
    }
}

/// An enumeration of operations whose variants are named as their
/// opcodes: those with a body hold its record, those after `without body`
/// have none. Generates the enum, `opcode`, `write_body`, and
/// `read_known`: the body of an opcode the enum has, `None` for another.
macro_rules! operations {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$doc:meta])* $op:ident($body:ty),)*
        }
        $(without body {
            $($(#[$edoc:meta])* $empty:ident,)*
        })?
    ) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$doc])* $op($body),)*
            $($($(#[$edoc])* $empty,)*)?
        }

        impl $name {
            pub fn opcode(&self) -> OpCode {
                match self {
                    $(Self::$op(_) => OpCode::$op,)*
                    $($(Self::$empty => OpCode::$empty,)*)?
                }
            }

            fn read_known(op: OpCode, r: &mut Reader<'_>) -> Result<Option<Self>, WireError> {
                Ok(Some(match op {
                    $(OpCode::$op => Self::$op(r.record()?),)*
                    $($(OpCode::$empty => Self::$empty,)*)?
                    _ => return Ok(None),
                }))
            }

            pub fn write_body(&self, w: &mut BytesMut) {
                match self {
                    $(Self::$op(x) => x.write(w),)*
                    $($(Self::$empty => {})*)?
                }
            }
        }
    };
}

/// Reads the entries of a multi's list, each behind a `MultiHeader`, up
/// to the terminator. Each entry consumes at least its 9-byte header, so
/// the frame's size bounds the loop.
pub(crate) fn read_multi<T>(
    r: &mut Reader<'_>,
    mut entry: impl FnMut(MultiHeader, &mut Reader<'_>) -> Result<T, WireError>,
) -> Result<Vec<T>, WireError> {
    let mut entries = Vec::new();
    loop {
        let h: MultiHeader = r.record()?;
        if h.done {
            return Ok(entries);
        }
        entries.push(entry(h, r)?);
    }
}

/// Writes a multi's list: each entry behind a `MultiHeader` of its type
/// and err (not done), then the terminator.
pub(crate) fn write_multi<T>(
    w: &mut BytesMut,
    entries: &[T],
    header: impl Fn(&T) -> (OpCode, i32),
    mut body: impl FnMut(&T, &mut BytesMut),
) {
    for entry in entries {
        let (op, err) = header(entry);
        MultiHeader {
            op_type: op.code(),
            done: false,
            err,
        }
        .write(w);
        body(entry, w);
    }
    MultiHeader::END.write(w);
}

operations! {
    /// One operation inside a multi (14) or multiRead (22).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum MultiOp {
        Create(CreateRequest),
        Create2(CreateRequest),
        CreateContainer(CreateRequest),
        CreateTtl(CreateTtlRequest),
        Delete(DeleteRequest),
        SetData(SetDataRequest),
        Check(CheckVersionRequest),
        /// multiRead only (its watch flag is ignored by the server).
        GetChildren(PathWatchRequest),
        /// multiRead only (its watch flag is ignored by the server).
        GetData(PathWatchRequest),
    }
}

impl MultiOp {
    /// A read (multiRead's kind) rather than a write (multi's kind).
    pub fn is_read(&self) -> bool {
        matches!(self, Self::GetChildren(_) | Self::GetData(_))
    }

    fn read_body(op_type: i32, r: &mut Reader<'_>) -> Result<Self, WireError> {
        let known = match OpCode::from_i32(op_type) {
            Ok(op) => Self::read_known(op, r)?,
            Err(_) => None,
        };
        known.ok_or(WireError::BadMultiOp(op_type))
    }
}

/// A multi's operations (`MultiOperationRecord`): each behind a
/// `MultiHeader` (its type, done = false, err = -1), then the terminator.
/// Whether the kinds are mixed (reads in a multi, writes in a multiRead)
/// is left to the server to judge; the encoding is the same.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiRequest {
    pub ops: Vec<MultiOp>,
}

impl Record for MultiRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let ops = read_multi(r, |h, r| MultiOp::read_body(h.op_type, r))?;
        Ok(Self { ops })
    }
    fn write(&self, w: &mut BytesMut) {
        write_multi(w, &self.ops, |op| (op.opcode(), -1), MultiOp::write_body);
    }
}

operations! {
    /// A request's body, chosen by the header's opcode.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum OpRequest {
        Create(CreateRequest),
        Create2(CreateRequest),
        CreateContainer(CreateRequest),
        CreateTtl(CreateTtlRequest),
        Delete(DeleteRequest),
        Exists(PathWatchRequest),
        /// Also the config read: a getData of [`CONFIG_NODE`].
        GetData(PathWatchRequest),
        SetData(SetDataRequest),
        GetAcl(PathRequest),
        SetAcl(SetAclRequest),
        GetChildren(PathWatchRequest),
        Sync(PathRequest),
        GetChildren2(PathWatchRequest),
        Check(CheckVersionRequest),
        Multi(MultiRequest),
        MultiRead(MultiRequest),
        Reconfig(ReconfigRequest),
        CheckWatches(WatchesRequest),
        RemoveWatches(WatchesRequest),
        /// xid -4.
        Auth(AuthPacket),
        /// xid -8.
        SetWatches(SetWatches),
        Sasl(SaslRequest),
        GetEphemerals(PathRequest),
        GetAllChildrenNumber(PathRequest),
        /// xid -8.
        SetWatches2(SetWatches2),
        AddWatch(AddWatchRequest),
    }
    without body {
        /// xid -2.
        Ping,
        WhoAmI,
        CloseSession,
    }
}

impl OpRequest {
    /// Reads the body the opcode names. The server-internal types a
    /// client never sends are unknown opcodes here.
    pub fn read_body(op_type: i32, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Self::read_known(OpCode::from_i32(op_type)?, r)?.ok_or(WireError::UnknownOpcode(op_type))
    }
}

/// One request: its xid and its operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub xid: i32,
    pub op: OpRequest,
}

/// A request frame that did not decode, with as much of its header as
/// was there, so a server can answer the xid (ZooKeeper answers an
/// unknown opcode, or a create with bad flags, with an error code rather
/// than by closing the connection).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("request (xid {xid:?}, type {op_type:?}): {error}")]
pub struct RequestError {
    pub xid: Option<i32>,
    pub op_type: Option<i32>,
    pub error: WireError,
}

impl Request {
    /// Decodes one request frame (the bytes after the length prefix).
    pub fn decode(frame: &[u8]) -> Result<Self, RequestError> {
        let mut r = Reader::new(frame);
        let header: RequestHeader = r.record().map_err(|error| RequestError {
            xid: None,
            op_type: None,
            error,
        })?;
        let with_header = |error| RequestError {
            xid: Some(header.xid),
            op_type: Some(header.op_type),
            error,
        };
        let op = OpRequest::read_body(header.op_type, &mut r).map_err(with_header)?;
        r.finish().map_err(with_header)?;
        Ok(Self {
            xid: header.xid,
            op,
        })
    }

    /// Appends the header and body (no frame length).
    pub fn encode(&self, w: &mut BytesMut) {
        RequestHeader {
            xid: self.xid,
            op_type: self.op.opcode().code(),
        }
        .write(w);
        self.op.write_body(w);
    }

    /// Whether this is the config read (getData of `/zookeeper/config`).
    pub fn is_get_config(&self) -> bool {
        matches!(&self.op, OpRequest::GetData(r) if r.path == CONFIG_NODE)
    }
}
