//! What can be wrong with bytes off the wire. Every decoder returns one of
//! these instead of panicking, and none allocates what a length prefix
//! claims before checking it against the bytes actually there.

use thiserror::Error;

/// A frame or record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The length prefix announces more than the configured maximum
    /// (ZooKeeper's `jute.maxbuffer` plus header slack).
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    FrameTooLarge { len: usize, max: usize },
    /// A length prefix (frame, buffer, string or vector) is negative, and
    /// not the -1 that jute uses for null.
    #[error("negative length {0}")]
    NegativeLength(i32),
    /// The record needs more bytes than the frame holds.
    #[error("record truncated: needs {needed} more bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    /// The record ended before the frame did.
    #[error("{0} bytes left over after the record")]
    TrailingBytes(usize),
    /// A string field is not UTF-8.
    #[error("string field is not valid UTF-8")]
    InvalidUtf8,
    /// A null (-1 length) string where the schema needs a value (a path).
    #[error("null string where a value is required")]
    NullString,
    /// A request header's type is not an opcode a client may send.
    #[error("unknown opcode {0}")]
    UnknownOpcode(i32),
    /// A create's flags are not one of `CreateMode`'s seven values.
    #[error("unknown create mode flags {0}")]
    UnknownCreateMode(i32),
    /// An error code no ZooKeeper version defines.
    #[error("unknown error code {0}")]
    UnknownErrorCode(i32),
    /// A watcher event type outside `Watcher.Event.EventType`.
    #[error("unknown watcher event type {0}")]
    UnknownEventType(i32),
    /// A keeper state outside `Watcher.Event.KeeperState`.
    #[error("unknown keeper state {0}")]
    UnknownKeeperState(i32),
    /// A watcher type (checkWatches, removeWatches) outside 1..=3.
    #[error("unknown watcher type {0}")]
    UnknownWatcherType(i32),
    /// An addWatch mode other than persistent (0) or recursive (1).
    #[error("unknown addWatch mode {0}")]
    UnknownAddWatchMode(i32),
    /// A multi or multiRead carries an operation type it cannot hold.
    #[error("operation type {0} cannot appear inside a multi")]
    BadMultiOp(i32),
    /// A reply arrived for an xid with no request outstanding, so its
    /// body's shape is unknown.
    #[error("reply for xid {0}, which has no request outstanding")]
    UnexpectedXid(i32),
}
