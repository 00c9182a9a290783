//! ZooKeeper's client wire protocol, as ZooKeeper 3.5–3.8's jute schema
//! (`zookeeper.jute`) and its `ZooDefs`, `KeeperException`, `CreateMode`
//! and `Watcher` define it, one concern per module:
//!
//! - [`frame`]: the 4-byte length prefix and the frame limit;
//! - [`jute`]: the primitives (int, long, boolean, buffer, ustring, vector);
//! - [`data`]: `Stat`, `ACL`/`Id`, and the enumerations inside records;
//! - [`request`]: the connect handshake and every request record;
//! - [`response`]: the connect answer, reply header, every reply record,
//!   multi results and watch notifications;
//! - [`codes`]: error codes; [`opcode`]: request types and reserved xids;
//! - [`codec`]: `tokio_util` codecs over the above for a connection task.
//!
//! Decoders are strict where ZooKeeper's schema is (a record must fill
//! its frame exactly; unknown opcodes, create flags, watcher types and
//! error codes are typed errors) and lenient where ZooKeeper's own reader
//! is (any non-zero byte is a true boolean; a null vector reads as empty).

pub mod codec;
pub mod codes;
pub mod data;
pub mod error;
pub mod frame;
pub mod jute;
pub mod opcode;
pub mod request;
pub mod response;

pub use codec::{ClientCodec, ClientPacket, CodecError, Incoming, ServerCodec, ServerPacket};
pub use codes::ErrorCode;
pub use data::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, Stat, WatcherType,
};
pub use error::WireError;
pub use frame::{split_frame, write_frame, DEFAULT_MAX_FRAME, JUTE_MAX_BUFFER};
pub use jute::{from_bytes, to_bytes, Reader, Record, Writer};
pub use opcode::{xid, OpCode};
pub use request::*;
pub use response::*;
