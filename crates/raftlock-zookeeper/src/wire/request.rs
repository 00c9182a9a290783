//! What a client sends: the connect handshake, then framed requests, each
//! a `RequestHeader` (xid, type) followed by the record its type names.

use bytes::BytesMut;
use thiserror::Error;

use super::data::{Acl, AddWatchMode, CreateMode, WatcherType};
use super::error::WireError;
use super::jute::{Reader, Record, Writer};
use super::opcode::OpCode;

/// The node a client reads (getData) to learn the ensemble's config.
pub const CONFIG_NODE: &str = "/zookeeper/config";

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

impl Record for ConnectRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            protocol_version: r.int()?,
            last_zxid_seen: r.long()?,
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
        w.long(self.last_zxid_seen);
        w.int(self.time_out);
        w.long(self.session_id);
        w.buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            w.bool(ro);
        }
    }
}

/// Every request's first 8 bytes. `op_type` is kept raw: an unknown
/// opcode is reported with the xid, so a server can answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub xid: i32,
    pub op_type: i32,
}

impl Record for RequestHeader {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            xid: r.int()?,
            op_type: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.xid);
        w.int(self.op_type);
    }
}

/// Precedes every operation and result inside a multi; one with `done`
/// set (type -1, err -1) ends the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiHeader {
    pub op_type: i32,
    pub done: bool,
    pub err: i32,
}

impl MultiHeader {
    /// The list's terminator.
    pub const END: MultiHeader = MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    };
}

impl Record for MultiHeader {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            op_type: r.int()?,
            done: r.bool()?,
            err: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.op_type);
        w.bool(self.done);
        w.int(self.err);
    }
}

/// create (1), create2 (15), createContainer (19): `CreateRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    pub path: String,
    pub data: Option<Vec<u8>>,
    pub acl: Vec<Acl>,
    /// The `flags` field; flags outside `CreateMode` fail to decode.
    pub mode: CreateMode,
}

impl Record for CreateRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            data: r.opt_bytes()?,
            acl: r.vector(Reader::record)?,
            mode: CreateMode::from_i32(r.int()?)?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.buffer(self.data.as_deref());
        w.records(&self.acl);
        w.int(self.mode.code());
    }
}

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

impl Record for CreateTtlRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            data: r.opt_bytes()?,
            acl: r.vector(Reader::record)?,
            mode: CreateMode::from_i32(r.int()?)?,
            ttl: r.long()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.buffer(self.data.as_deref());
        w.records(&self.acl);
        w.int(self.mode.code());
        w.long(self.ttl);
    }
}

/// delete (2): `DeleteRequest`. Version -1 matches any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    pub path: String,
    pub version: i32,
}

impl Record for DeleteRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            version: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.int(self.version);
    }
}

/// exists (3), getData (4), getChildren (8), getChildren2 (12): the
/// schema's `ExistsRequest`, `GetDataRequest`, `GetChildrenRequest` and
/// `GetChildren2Request`, which are the same two fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathWatchRequest {
    pub path: String,
    /// Leave a one-shot watch.
    pub watch: bool,
}

impl Record for PathWatchRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            watch: r.bool()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.bool(self.watch);
    }
}

/// sync (9), getACL (6), getAllChildrenNumber (104), getEphemerals (103):
/// `SyncRequest`, `GetACLRequest`, `GetAllChildrenNumberRequest`,
/// `GetEphemeralsRequest` (whose field is a prefix), one path each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRequest {
    pub path: String,
}

impl Record for PathRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self { path: r.string()? })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
    }
}

/// setData (5): `SetDataRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDataRequest {
    pub path: String,
    pub data: Option<Vec<u8>>,
    pub version: i32,
}

impl Record for SetDataRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            data: r.opt_bytes()?,
            version: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.buffer(self.data.as_deref());
        w.int(self.version);
    }
}

/// setACL (7): `SetACLRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAclRequest {
    pub path: String,
    pub acl: Vec<Acl>,
    pub version: i32,
}

impl Record for SetAclRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            acl: r.vector(Reader::record)?,
            version: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.records(&self.acl);
        w.int(self.version);
    }
}

/// check (13), alone or inside a multi: `CheckVersionRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckVersionRequest {
    pub path: String,
    pub version: i32,
}

impl Record for CheckVersionRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            version: r.int()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.int(self.version);
    }
}

/// auth (100, xid -4): `AuthPacket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPacket {
    /// Always 0 in the clients that exist.
    pub auth_type: i32,
    pub scheme: String,
    pub auth: Vec<u8>,
}

impl Record for AuthPacket {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            auth_type: r.int()?,
            scheme: r.string()?,
            auth: r.bytes()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.int(self.auth_type);
        w.string(&self.scheme);
        w.buffer(Some(&self.auth));
    }
}

/// setWatches (101, xid -8): the watches a reconnecting client still
/// holds, to be fired at once for changes after `relative_zxid`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
}

impl Record for SetWatches {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            relative_zxid: r.long()?,
            data_watches: r.strings()?,
            exist_watches: r.strings()?,
            child_watches: r.strings()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.long(self.relative_zxid);
        w.strings(&self.data_watches);
        w.strings(&self.exist_watches);
        w.strings(&self.child_watches);
    }
}

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

impl Record for SetWatches2 {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            relative_zxid: r.long()?,
            data_watches: r.strings()?,
            exist_watches: r.strings()?,
            child_watches: r.strings()?,
            persistent_watches: r.strings()?,
            persistent_recursive_watches: r.strings()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.long(self.relative_zxid);
        w.strings(&self.data_watches);
        w.strings(&self.exist_watches);
        w.strings(&self.child_watches);
        w.strings(&self.persistent_watches);
        w.strings(&self.persistent_recursive_watches);
    }
}

/// checkWatches (17), removeWatches (18): `CheckWatchesRequest`,
/// `RemoveWatchesRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchesRequest {
    pub path: String,
    pub watcher_type: WatcherType,
}

impl Record for WatchesRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            watcher_type: WatcherType::from_i32(r.int()?)?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.int(self.watcher_type.code());
    }
}

/// addWatch (106): `AddWatchRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddWatchRequest {
    pub path: String,
    pub mode: AddWatchMode,
}

impl Record for AddWatchRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            path: r.string()?,
            mode: AddWatchMode::from_i32(r.int()?)?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.string(&self.path);
        w.int(self.mode.code());
    }
}

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

impl Record for ReconfigRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            joining_servers: r.opt_string()?,
            leaving_servers: r.opt_string()?,
            new_members: r.opt_string()?,
            cur_config_id: r.long()?,
        })
    }
    fn write(&self, w: &mut BytesMut) {
        w.opt_string(self.joining_servers.as_deref());
        w.opt_string(self.leaving_servers.as_deref());
        w.opt_string(self.new_members.as_deref());
        w.long(self.cur_config_id);
    }
}

/// sasl (102): `GetSASLRequest`, one token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaslRequest {
    pub token: Vec<u8>,
}

impl Record for SaslRequest {
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self { token: r.bytes()? })
    }
    fn write(&self, w: &mut BytesMut) {
        w.buffer(Some(&self.token));
    }
}

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

impl MultiOp {
    pub fn opcode(&self) -> OpCode {
        match self {
            Self::Create(_) => OpCode::Create,
            Self::Create2(_) => OpCode::Create2,
            Self::CreateContainer(_) => OpCode::CreateContainer,
            Self::CreateTtl(_) => OpCode::CreateTtl,
            Self::Delete(_) => OpCode::Delete,
            Self::SetData(_) => OpCode::SetData,
            Self::Check(_) => OpCode::Check,
            Self::GetChildren(_) => OpCode::GetChildren,
            Self::GetData(_) => OpCode::GetData,
        }
    }

    /// A read (multiRead's kind) rather than a write (multi's kind).
    pub fn is_read(&self) -> bool {
        matches!(self, Self::GetChildren(_) | Self::GetData(_))
    }

    fn read_body(op_type: i32, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match OpCode::from_i32(op_type) {
            Ok(OpCode::Create) => Self::Create(r.record()?),
            Ok(OpCode::Create2) => Self::Create2(r.record()?),
            Ok(OpCode::CreateContainer) => Self::CreateContainer(r.record()?),
            Ok(OpCode::CreateTtl) => Self::CreateTtl(r.record()?),
            Ok(OpCode::Delete) => Self::Delete(r.record()?),
            Ok(OpCode::SetData) => Self::SetData(r.record()?),
            Ok(OpCode::Check) => Self::Check(r.record()?),
            Ok(OpCode::GetChildren) => Self::GetChildren(r.record()?),
            Ok(OpCode::GetData) => Self::GetData(r.record()?),
            _ => return Err(WireError::BadMultiOp(op_type)),
        })
    }

    fn write_body(&self, w: &mut BytesMut) {
        match self {
            Self::Create(x) | Self::Create2(x) | Self::CreateContainer(x) => x.write(w),
            Self::CreateTtl(x) => x.write(w),
            Self::Delete(x) => x.write(w),
            Self::SetData(x) => x.write(w),
            Self::Check(x) => x.write(w),
            Self::GetChildren(x) | Self::GetData(x) => x.write(w),
        }
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
        let mut ops = Vec::new();
        loop {
            let h: MultiHeader = r.record()?;
            if h.done {
                return Ok(Self { ops });
            }
            // Each iteration consumes at least the 9-byte header, so the
            // frame's size bounds the loop.
            ops.push(MultiOp::read_body(h.op_type, r)?);
        }
    }
    fn write(&self, w: &mut BytesMut) {
        for op in &self.ops {
            MultiHeader {
                op_type: op.opcode().code(),
                done: false,
                err: -1,
            }
            .write(w);
            op.write_body(w);
        }
        MultiHeader::END.write(w);
    }
}

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
    /// xid -2, no body.
    Ping,
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
    /// No body.
    WhoAmI,
    /// No body.
    CloseSession,
}

impl OpRequest {
    pub fn opcode(&self) -> OpCode {
        match self {
            Self::Create(_) => OpCode::Create,
            Self::Create2(_) => OpCode::Create2,
            Self::CreateContainer(_) => OpCode::CreateContainer,
            Self::CreateTtl(_) => OpCode::CreateTtl,
            Self::Delete(_) => OpCode::Delete,
            Self::Exists(_) => OpCode::Exists,
            Self::GetData(_) => OpCode::GetData,
            Self::SetData(_) => OpCode::SetData,
            Self::GetAcl(_) => OpCode::GetAcl,
            Self::SetAcl(_) => OpCode::SetAcl,
            Self::GetChildren(_) => OpCode::GetChildren,
            Self::Sync(_) => OpCode::Sync,
            Self::Ping => OpCode::Ping,
            Self::GetChildren2(_) => OpCode::GetChildren2,
            Self::Check(_) => OpCode::Check,
            Self::Multi(_) => OpCode::Multi,
            Self::MultiRead(_) => OpCode::MultiRead,
            Self::Reconfig(_) => OpCode::Reconfig,
            Self::CheckWatches(_) => OpCode::CheckWatches,
            Self::RemoveWatches(_) => OpCode::RemoveWatches,
            Self::Auth(_) => OpCode::Auth,
            Self::SetWatches(_) => OpCode::SetWatches,
            Self::Sasl(_) => OpCode::Sasl,
            Self::GetEphemerals(_) => OpCode::GetEphemerals,
            Self::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Self::SetWatches2(_) => OpCode::SetWatches2,
            Self::AddWatch(_) => OpCode::AddWatch,
            Self::WhoAmI => OpCode::WhoAmI,
            Self::CloseSession => OpCode::CloseSession,
        }
    }

    /// Reads the body the opcode names.
    pub fn read_body(op_type: i32, r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match OpCode::from_i32(op_type)? {
            OpCode::Create => Self::Create(r.record()?),
            OpCode::Create2 => Self::Create2(r.record()?),
            OpCode::CreateContainer => Self::CreateContainer(r.record()?),
            OpCode::CreateTtl => Self::CreateTtl(r.record()?),
            OpCode::Delete => Self::Delete(r.record()?),
            OpCode::Exists => Self::Exists(r.record()?),
            OpCode::GetData => Self::GetData(r.record()?),
            OpCode::SetData => Self::SetData(r.record()?),
            OpCode::GetAcl => Self::GetAcl(r.record()?),
            OpCode::SetAcl => Self::SetAcl(r.record()?),
            OpCode::GetChildren => Self::GetChildren(r.record()?),
            OpCode::Sync => Self::Sync(r.record()?),
            OpCode::Ping => Self::Ping,
            OpCode::GetChildren2 => Self::GetChildren2(r.record()?),
            OpCode::Check => Self::Check(r.record()?),
            OpCode::Multi => Self::Multi(r.record()?),
            OpCode::MultiRead => Self::MultiRead(r.record()?),
            OpCode::Reconfig => Self::Reconfig(r.record()?),
            OpCode::CheckWatches => Self::CheckWatches(r.record()?),
            OpCode::RemoveWatches => Self::RemoveWatches(r.record()?),
            OpCode::Auth => Self::Auth(r.record()?),
            OpCode::SetWatches => Self::SetWatches(r.record()?),
            OpCode::Sasl => Self::Sasl(r.record()?),
            OpCode::GetEphemerals => Self::GetEphemerals(r.record()?),
            OpCode::GetAllChildrenNumber => Self::GetAllChildrenNumber(r.record()?),
            OpCode::SetWatches2 => Self::SetWatches2(r.record()?),
            OpCode::AddWatch => Self::AddWatch(r.record()?),
            OpCode::WhoAmI => Self::WhoAmI,
            OpCode::CloseSession => Self::CloseSession,
            // Server-internal types a client never sends.
            OpCode::Notification
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error => return Err(WireError::UnknownOpcode(op_type)),
        })
    }

    pub fn write_body(&self, w: &mut BytesMut) {
        match self {
            Self::Create(x) | Self::Create2(x) | Self::CreateContainer(x) => x.write(w),
            Self::CreateTtl(x) => x.write(w),
            Self::Delete(x) => x.write(w),
            Self::Exists(x) | Self::GetData(x) | Self::GetChildren(x) | Self::GetChildren2(x) => {
                x.write(w)
            }
            Self::SetData(x) => x.write(w),
            Self::GetAcl(x)
            | Self::Sync(x)
            | Self::GetEphemerals(x)
            | Self::GetAllChildrenNumber(x) => x.write(w),
            Self::SetAcl(x) => x.write(w),
            Self::Check(x) => x.write(w),
            Self::Multi(x) | Self::MultiRead(x) => x.write(w),
            Self::Reconfig(x) => x.write(w),
            Self::CheckWatches(x) | Self::RemoveWatches(x) => x.write(w),
            Self::Auth(x) => x.write(w),
            Self::SetWatches(x) => x.write(w),
            Self::Sasl(x) => x.write(w),
            Self::SetWatches2(x) => x.write(w),
            Self::AddWatch(x) => x.write(w),
            Self::Ping | Self::WhoAmI | Self::CloseSession => {}
        }
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
