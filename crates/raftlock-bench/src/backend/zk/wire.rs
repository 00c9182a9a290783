//! ZooKeeper's wire format (jute): big-endian integers, length-prefixed
//! strings and buffers (-1 = null), length-prefixed vectors, and every
//! packet framed by a 4-byte length. Only the records the lock recipe,
//! the put workload and the restart set-up use. Field order follows
//! ZooKeeper 3.8's `zookeeper.jute`.

/// Operation codes (`ZooDefs.OpCode`).
pub mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const SET_DATA: i32 = 5;
    pub const GET_CHILDREN: i32 = 8;
    pub const PING: i32 = 11;
    pub const MULTI: i32 = 14;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// Reserved xids (`ClientCnxn`): watch events and ping replies.
pub const XID_WATCH_EVENT: i32 = -1;
pub const XID_PING: i32 = -2;

/// Error codes (`KeeperException.Code`) the client acts on.
pub mod code {
    pub const CONNECTION_LOSS: i32 = -4;
    pub const OPERATION_TIMEOUT: i32 = -7;
    pub const NO_NODE: i32 = -101;
    pub const NODE_EXISTS: i32 = -110;
}

/// Create flags (`CreateMode`).
pub const PERSISTENT: i32 = 0;
pub const EPHEMERAL_SEQUENTIAL: i32 = 3;

/// Largest packet accepted (jute.maxbuffer is 1 MiB by default; a
/// 1,000-waiter getChildren is ~40 KiB).
pub const MAX_PACKET: usize = 16 << 20;

#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::error::Error for Malformed {}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed ZooKeeper packet: {}", self.0)
    }
}

/// Builds one framed packet; `finish` fills in the length.
pub struct Enc(Vec<u8>);

impl Default for Enc {
    fn default() -> Self {
        Self::new()
    }
}

impl Enc {
    pub fn new() -> Self {
        Enc(vec![0; 4])
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    pub fn buf(&mut self, v: &[u8]) -> &mut Self {
        self.i32(v.len() as i32);
        self.0.extend_from_slice(v);
        self
    }
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.buf(v.as_bytes())
    }
    /// The open ACL (`world:anyone`, all permissions) as a one-element vector.
    pub fn open_acl(&mut self) -> &mut Self {
        self.i32(1).i32(0x1f).str("world").str("anyone")
    }
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.0.len() - 4) as i32;
        self.0[..4].copy_from_slice(&len.to_be_bytes());
        self.0
    }
}

/// Reads one packet's payload (after the length prefix).
pub struct Dec<'a> {
    b: &'a [u8],
}

impl<'a> Dec<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Dec { b }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.b.len() < n {
            return Err(Malformed("truncated"));
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }
    pub fn i32(&mut self) -> Result<i32, Malformed> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(i32::from_be_bytes(a))
    }
    pub fn i64(&mut self) -> Result<i64, Malformed> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
    pub fn bool(&mut self) -> Result<bool, Malformed> {
        Ok(self.take(1)?[0] != 0)
    }
    /// A buffer; null (-1) reads as empty.
    pub fn buf(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(&[]);
        }
        self.take(n as usize)
    }
    pub fn string(&mut self) -> Result<String, Malformed> {
        let b = self.buf()?;
        String::from_utf8(b.to_vec()).map_err(|_| Malformed("string is not UTF-8"))
    }
    pub fn strings(&mut self) -> Result<Vec<String>, Malformed> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(Vec::new());
        }
        // Each element takes at least its 4-byte length.
        if n as usize > self.b.len() / 4 {
            return Err(Malformed("vector longer than the packet"));
        }
        (0..n).map(|_| self.string()).collect()
    }
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
}

/// `ConnectRequest` (a new session when `session_id` is 0) plus the
/// trailing read-only flag 3.x servers read.
pub fn connect_request(last_zxid: i64, timeout_ms: i32, session_id: i64, passwd: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    e.i32(0)
        .i64(last_zxid)
        .i32(timeout_ms)
        .i64(session_id)
        .buf(passwd)
        .bool(false);
    e.finish()
}

/// `ConnectResponse`: a timeout of 0 or less means the session expired.
#[derive(Debug, PartialEq, Eq)]
pub struct ConnectResponse {
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
}

pub fn connect_response(payload: &[u8]) -> Result<ConnectResponse, Malformed> {
    let mut d = Dec::new(payload);
    let _protocol = d.i32()?;
    let timeout_ms = d.i32()?;
    let session_id = d.i64()?;
    let passwd = d.buf()?.to_vec();
    Ok(ConnectResponse {
        timeout_ms,
        session_id,
        passwd,
    })
}

/// `RequestHeader` + body, framed.
pub fn request(xid: i32, op: i32, body: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    e.i32(xid).i32(op);
    e.0.extend_from_slice(body);
    e.finish()
}

/// Bodies (unframed): built with `Enc` and the first 4 bytes dropped.
fn body(e: Enc) -> Vec<u8> {
    let mut v = e.0;
    v.drain(..4);
    v
}

pub fn create(path: &str, data: &[u8], flags: i32) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(path).buf(data).open_acl().i32(flags);
    body(e)
}

pub fn delete(path: &str) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(path).i32(-1);
    body(e)
}

/// `ExistsRequest` / `GetChildrenRequest`: a path and a watch flag.
pub fn path_watch(path: &str, watch: bool) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(path).bool(watch);
    body(e)
}

pub fn set_data(path: &str, data: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(path).buf(data).i32(-1);
    body(e)
}

/// A `multi` of creates: each op is `MultiHeader{type, done=false, err=-1}`
/// + its request; a header with type -1, done=true ends it.
pub fn multi_create(ops: &[(String, i32)]) -> Vec<u8> {
    let mut e = Enc::new();
    for (path, flags) in ops {
        e.i32(op::CREATE).bool(false).i32(-1);
        e.str(path).buf(&[]).open_acl().i32(*flags);
    }
    e.i32(-1).bool(true).i32(-1);
    body(e)
}

/// The first error in a `multi` response, if any (0 when all succeeded).
pub fn multi_error(payload: &[u8]) -> Result<i32, Malformed> {
    let mut d = Dec::new(payload);
    loop {
        let ty = d.i32()?;
        let done = d.bool()?;
        let err = d.i32()?;
        if done {
            return Ok(0);
        }
        match ty {
            op::ERROR => {
                let e = d.i32()?;
                if e != 0 {
                    return Ok(e);
                }
            }
            op::CREATE => {
                d.string()?;
            }
            _ => return Err(Malformed("unexpected op in a multi response")),
        }
        let _ = err;
    }
}

/// `ReplyHeader`: xid, zxid, err; the body follows.
pub struct ReplyHeader {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
}

pub fn reply_header(d: &mut Dec<'_>) -> Result<ReplyHeader, Malformed> {
    Ok(ReplyHeader {
        xid: d.i32()?,
        zxid: d.i64()?,
        err: d.i32()?,
    })
}

/// `WatcherEvent`: type, state, path.
pub fn watcher_event_path(d: &mut Dec<'_>) -> Result<String, Malformed> {
    let _ty = d.i32()?;
    let _state = d.i32()?;
    d.string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_length() {
        let f = request(7, op::DELETE, &delete("/a"));
        // len, xid, op, "/a" (4 + 2), version.
        assert_eq!(f.len(), 4 + 4 + 4 + 6 + 4);
        assert_eq!(&f[..4], &((f.len() - 4) as i32).to_be_bytes());
        let mut d = Dec::new(&f[4..]);
        assert_eq!(d.i32(), Ok(7));
        assert_eq!(d.i32(), Ok(op::DELETE));
        assert_eq!(d.string(), Ok("/a".to_string()));
        assert_eq!(d.i32(), Ok(-1));
        assert!(d.is_empty());
    }

    #[test]
    fn connect_round_trip() {
        // A server's answer has the same shape as our request's head.
        let mut e = Enc::new();
        e.i32(0).i32(4000).i64(0x1234).buf(&[9; 16]).bool(false);
        let f = e.finish();
        let r = connect_response(&f[4..]);
        assert_eq!(
            r,
            Ok(ConnectResponse {
                timeout_ms: 4000,
                session_id: 0x1234,
                passwd: vec![9; 16]
            })
        );
        assert_eq!(
            connect_request(5, 4000, 0, &[0; 16]).len(),
            4 + 4 + 8 + 4 + 8 + 20 + 1
        );
    }

    #[test]
    fn strings_and_bad_lengths() {
        let mut e = Enc::new();
        e.i32(2).str("a").str("bc");
        let f = e.finish();
        assert_eq!(
            Dec::new(&f[4..]).strings(),
            Ok(vec!["a".to_string(), "bc".to_string()])
        );
        // A count the packet cannot hold is refused, not allocated.
        let mut e = Enc::new();
        e.i32(1_000_000);
        let f = e.finish();
        assert!(Dec::new(&f[4..]).strings().is_err());
        assert!(Dec::new(&[0, 0, 0, 9, 1]).buf().is_err());
    }

    #[test]
    fn multi_results() {
        let mut e = Enc::new();
        e.i32(op::CREATE).bool(false).i32(0).str("/x");
        e.i32(-1).bool(true).i32(-1);
        assert_eq!(multi_error(&body(e)), Ok(0));
        let mut e = Enc::new();
        e.i32(op::ERROR)
            .bool(false)
            .i32(code::NODE_EXISTS)
            .i32(code::NODE_EXISTS);
        e.i32(-1).bool(true).i32(-1);
        assert_eq!(multi_error(&body(e)), Ok(code::NODE_EXISTS));
    }
}
