//! `tokio_util::codec` codecs for a connection task: [`ServerCodec`] for
//! the server side (decodes what clients send, encodes answers) and
//! [`ClientCodec`] for the client side. Both track the one piece of
//! connection state the wire needs: whether the handshake is done, since
//! the first frame each way has no header.

use std::collections::HashMap;
use std::io;

use bytes::BytesMut;
use thiserror::Error;
use tokio_util::codec::{Decoder, Encoder};

use super::error::WireError;
use super::frame::{split_frame, write_frame, DEFAULT_MAX_FRAME};
use super::jute::{from_bytes, Record};
use super::opcode::{xid, OpCode};
use super::request::{ConnectRequest, Request, RequestError};
use super::response::{ConnectResponse, Reply};

/// A failure that ends the connection: the socket's, or a frame that
/// cannot be delimited or a handshake that cannot be read.
#[derive(Debug, Error)]
pub enum CodecError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// What a server reads from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Connect(ConnectRequest),
    Request(Request),
    /// A whole frame whose request did not decode. The connection can go
    /// on: the frame was delimited, and the error carries the xid.
    Undecodable(RequestError),
}

/// What a client writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientPacket {
    Connect(ConnectRequest),
    Request(Request),
}

/// What a server writes, and a client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerPacket {
    Connect(ConnectResponse),
    Reply(Reply),
}

/// The framing state both sides share: the frame limit, and whether the
/// handshake (the one frame without a header) has been read.
#[derive(Debug)]
struct Framing {
    max_frame: usize,
    connected: bool,
}

/// One whole frame read: the handshake, or any frame after it.
enum Frame<C> {
    Connect(C),
    After(BytesMut),
}

impl Framing {
    fn new(max_frame: usize) -> Self {
        Self {
            max_frame,
            connected: false,
        }
    }

    /// The next whole frame in `src`, if one has arrived; the first is
    /// decoded as the handshake record `C`.
    fn next<C: Record>(&mut self, src: &mut BytesMut) -> Result<Option<Frame<C>>, CodecError> {
        let Some(frame) = split_frame(src, self.max_frame)? else {
            return Ok(None);
        };
        if self.connected {
            return Ok(Some(Frame::After(frame)));
        }
        let connect = from_bytes::<C>(&frame)?;
        self.connected = true;
        Ok(Some(Frame::Connect(connect)))
    }
}

/// The server side of a connection.
#[derive(Debug)]
pub struct ServerCodec {
    framing: Framing,
}

impl Default for ServerCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl ServerCodec {
    /// `max_frame` bounds every frame both ways.
    pub fn new(max_frame: usize) -> Self {
        Self {
            framing: Framing::new(max_frame),
        }
    }
}

impl Decoder for ServerCodec {
    type Item = Incoming;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Incoming>, CodecError> {
        Ok(self.framing.next(src)?.map(|frame| match frame {
            Frame::Connect(connect) => Incoming::Connect(connect),
            Frame::After(frame) => match Request::decode(&frame) {
                Ok(request) => Incoming::Request(request),
                Err(error) => Incoming::Undecodable(error),
            },
        }))
    }
}

impl Encoder<ServerPacket> for ServerCodec {
    type Error = CodecError;

    fn encode(&mut self, item: ServerPacket, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(write_frame(dst, self.framing.max_frame, |w| match &item {
            ServerPacket::Connect(c) => c.write(w),
            ServerPacket::Reply(r) => r.encode(w),
        })?)
    }
}

/// The client side of a connection. It remembers the opcode of every
/// request it sent, since a reply's shape depends on it.
#[derive(Debug)]
pub struct ClientCodec {
    framing: Framing,
    pending: HashMap<i32, OpCode>,
}

impl Default for ClientCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl ClientCodec {
    pub fn new(max_frame: usize) -> Self {
        Self {
            framing: Framing::new(max_frame),
            pending: HashMap::new(),
        }
    }

    /// Requests sent and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }
}

impl Encoder<ClientPacket> for ClientCodec {
    type Error = CodecError;

    fn encode(&mut self, item: ClientPacket, dst: &mut BytesMut) -> Result<(), CodecError> {
        write_frame(dst, self.framing.max_frame, |w| match &item {
            ClientPacket::Connect(c) => c.write(w),
            ClientPacket::Request(r) => r.encode(w),
        })?;
        if let ClientPacket::Request(r) = &item {
            if !matches!(r.xid, xid::PING | xid::AUTH | xid::SET_WATCHES) {
                self.pending.insert(r.xid, r.op.opcode());
            }
        }
        Ok(())
    }
}

impl Decoder for ClientCodec {
    type Item = ServerPacket;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<ServerPacket>, CodecError> {
        Ok(match self.framing.next(src)? {
            None => None,
            Some(Frame::Connect(connect)) => Some(ServerPacket::Connect(connect)),
            Some(Frame::After(frame)) => {
                let pending = &mut self.pending;
                let reply = Reply::decode(&frame, |x| pending.remove(&x))?;
                Some(ServerPacket::Reply(reply))
            }
        })
    }
}
