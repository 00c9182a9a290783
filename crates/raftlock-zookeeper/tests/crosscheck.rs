//! The ZooKeeper door cross-checked against a real ZooKeeper 3.8: the same
//! seeded request sequences go to raftlock's door (a three-member
//! in-process cluster, each connection on its own member) and to a
//! standalone ZooKeeper (`support/zookeeper_server.rs`), through the
//! crate's own codec, and every answer is compared: error codes, paths,
//! data, children, every `Stat` field and the watch events each
//! connection receives.
//!
//! Zxids and times differ in value between two servers, so they are
//! compared by their relations within one server. A zxid in a stat is
//! named by the write of the sequence that produced it (the n-th change
//! of the seed, from the reply's header zxid), so "mzxid moved on this
//! set", "pzxid moved on that child create" compare exactly; a time must
//! lie near the harness's clock, equal for one change, never earlier for
//! a later change, and `ctime == mtime` must agree on both sides.
//!
//! What the door does differently on purpose is listed in [`DIFFERENCES`]
//! (docs/zookeeper.md, "Deliberate differences") with what the harness
//! does about each; nothing else is excused.
//!
//! `RAFTLOCK_CROSSCHECK_SEEDS=N` runs seeds 0..N (default 1000);
//! `RAFTLOCK_CROSSCHECK_SEED=S` replays seed S alone and prints each step.

mod common;
#[path = "support/zookeeper_server.rs"]
mod zookeeper_server;

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use raftlock_zookeeper::wire::*;
use tokio_util::codec::{Decoder, Encoder};

use common::{door_config, Cluster};
use zookeeper_server::ZooKeeper;

/// The door's deliberate differences that generated sequences can meet,
/// each with how the harness treats it.
const DIFFERENCES: &[(&str, &str)] = &[
    (
        "writes that change nothing take no zxid",
        "ZooKeeper logs a failed write, a lone check and a multi of checks as a \
         transaction with a zxid; raftlock commits nothing for them. The harness \
         names stat zxids by the changes of the sequence only, and compares no \
         reply zxid of an answer that changed nothing.",
    ),
    (
        "ACLs are stored, not enforced",
        "the nodes every step may name only get ACLs that still grant \
         world:anyone every permission (with digest and ip ids beside it, \
         duplicates, odd but valid shapes), so ZooKeeper refuses nothing the \
         door serves; invalid ACLs go anywhere (INVALIDACL on both). ACLs that \
         restrict go only to probe nodes under the root, which later steps \
         only read (getACL, getData, exists) and list, the clean-up deletes, and which keep \
         world read, and world admin beside a digest id (ZooKeeper hides digest \
         hashes from a caller without admin; the door shows them). No step \
         authenticates, so `auth` entries are INVALIDACL on both.",
    ),
    (
        "containers, TTL nodes",
        "not generated: raftlock keeps a container as a persistent node and \
         refuses TTL modes.",
    ),
    (
        "a lone check",
        "ZooKeeper 3.8 leaves a check sent outside a multi unanswered (its \
         clients send none); the door answers it. Not generated: checks go \
         inside multis.",
    ),
    (
        "a sequential create after a session's end",
        "after a closeSession deleted ephemerals, ZooKeeper 3.8 sometimes numbers \
         the next sequential child from the parent's cversion before those \
         deletions, although its reads show them counted; raftlock numbers from \
         the cversion it shows. No sequential create follows a close in a seed.",
    ),
    (
        "sequential names skip taken names",
        "raftlock skips a name a plain create took, ZooKeeper answers NODEEXISTS: \
         plain creates here never use a sequential-looking name.",
    ),
];

const IO_TIMEOUT: Duration = Duration::from_secs(15);
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// Connections (sessions) per server.
const CONNS: usize = 2;

/// One client connection through [`ClientCodec`], with sending and
/// receiving apart so both servers get a request before either answers.
struct Wire {
    stream: TcpStream,
    codec: ClientCodec,
    buf: BytesMut,
    next_xid: i32,
    events: Vec<WatcherEvent>,
    session_id: i64,
}

impl Wire {
    fn connect(addr: SocketAddr) -> Wire {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        let mut wire = Wire {
            stream,
            codec: ClientCodec::default(),
            buf: BytesMut::new(),
            next_xid: 1,
            events: Vec::new(),
            session_id: 0,
        };
        wire.write(ClientPacket::Connect(ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out: SESSION_TIMEOUT_MS,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: Some(false),
        }));
        match wire.read() {
            Some(ServerPacket::Connect(rsp)) if rsp.time_out > 0 => {
                wire.session_id = rsp.session_id
            }
            other => panic!("no session from {addr}: {other:?}"),
        }
        wire
    }

    fn write(&mut self, packet: ClientPacket) {
        let mut out = BytesMut::new();
        self.codec.encode(packet, &mut out).expect("encode");
        self.stream.write_all(&out).expect("send");
    }

    fn read(&mut self) -> Option<ServerPacket> {
        loop {
            let addr = self.stream.peer_addr().ok();
            match self.codec.decode(&mut self.buf) {
                Ok(Some(packet)) => return Some(packet),
                Ok(None) => {}
                Err(e) => panic!("an answer from {addr:?} does not decode: {e}"),
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("no answer from {addr:?}: {e}"),
            }
        }
    }

    fn send(&mut self, op: OpRequest) -> i32 {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.write(ClientPacket::Request(Request { xid, op }));
        xid
    }

    /// The reply to `xid`, keeping the notifications that come first.
    fn recv(&mut self, xid: i32) -> Reply {
        loop {
            match self.read() {
                Some(ServerPacket::Reply(r)) if r.header.xid == xid::NOTIFICATION => match r.body {
                    ReplyBody::Notification(e) => self.events.push(e),
                    other => panic!("notification without an event: {other:?}"),
                },
                Some(ServerPacket::Reply(r)) => {
                    assert_eq!(r.header.xid, xid, "replies come in order");
                    return r;
                }
                other => panic!("expected the reply to {xid}, got {other:?}"),
            }
        }
    }
}

/// A small deterministic generator (splitmix64): the seed is the whole
/// sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One step of a sequence: a request on one connection, or closing that
/// connection's session (and opening a new one in its place).
#[derive(Debug, Clone)]
enum Action {
    Op { conn: usize, op: OpRequest },
    Close { conn: usize },
}

/// Generates a seed's steps over a handful of paths under its own root.
struct Gen {
    rng: Rng,
    root: String,
    /// Paths steps may name: fixed ones and the sequential nodes created.
    paths: Vec<String>,
    /// A session was closed this seed: no sequential create from now on
    /// (`DIFFERENCES`).
    closed: bool,
    /// Probe nodes made so far, with restricting ACLs: only read and
    /// listed until the clean-up deletes them (`DIFFERENCES`).
    probes: Vec<String>,
}

const NAMES: &[&str] = &["a", "b", "e", "a/x", "a/y", "b/x", "e/x", "a/x/z"];

/// `digest` of `bob:secret`, as ZooKeeper computes it.
const BOB: &str = "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=";

/// ACLs that leave world:anyone every permission (`DIFFERENCES`).
fn open_shapes() -> Vec<Vec<Acl>> {
    let open = Acl::open_unsafe();
    vec![
        vec![open.clone()],
        vec![open.clone(), Acl::new(perms::ALL, "digest", BOB)],
        vec![Acl::new(perms::READ, "ip", "10.0.0.0/8"), open.clone()],
        vec![open.clone(), open.clone()],
        vec![
            Acl::new(perms::READ | perms::CREATE, "digest", "amy:x:"),
            open.clone(),
        ],
        vec![open.clone(), Acl::new(perms::ALL, "ip", "127.0.0.1/32")],
        vec![Acl::new(perms::ADMIN, "ip", "+10.001.0.0/016"), open],
    ]
}

/// ACLs ZooKeeper refuses with INVALIDACL.
fn invalid_shapes() -> Vec<Vec<Acl>> {
    let open = Acl::open_unsafe();
    vec![
        vec![],
        vec![Acl::new(perms::ALL, "world", "nobody")],
        vec![Acl::new(perms::ALL, "digest", "bob")],
        vec![Acl::new(perms::ALL, "digest", "a:b:c")],
        vec![Acl::new(perms::ALL, "ip", "300.1.1.1")],
        vec![Acl::new(perms::ALL, "ip", "10.0.0.0/33")],
        vec![Acl::new(perms::ALL, "ip", "1.2.3.4/")],
        vec![Acl::new(perms::ALL, "ip", "::1")],
        vec![Acl::new(perms::ALL, "sasl", "bob")],
        vec![Acl::new(perms::ALL, "auth", "")],
        vec![open, Acl::new(perms::ALL, "x509", "CN=bob")],
    ]
}

/// ACLs that restrict, for probe nodes only (`DIFFERENCES`).
fn probe_shapes() -> Vec<Vec<Acl>> {
    let read = Acl::new(perms::READ, "world", "anyone");
    vec![
        vec![read.clone()],
        vec![
            Acl::new(perms::READ | perms::ADMIN, "world", "anyone"),
            Acl::new(perms::ALL, "digest", BOB),
        ],
        vec![Acl::new(perms::ALL, "ip", "10.0.0.0/8"), read.clone()],
        vec![read.clone(), read.clone()],
        vec![Acl::new(perms::ALL, "ip", "192.168.1.7"), read],
    ]
}
const VERSIONS: &[i32] = &[-1, -1, 0, 0, 1, 2, 7];

impl Gen {
    fn new(seed: u64) -> Gen {
        let root = format!("/cc{seed}");
        let mut paths = vec![root.clone()];
        paths.extend(NAMES.iter().map(|n| format!("{root}/{n}")));
        Gen {
            rng: Rng(seed ^ 0x5eed_0fc0_ffee),
            root,
            paths,
            closed: false,
            probes: Vec::new(),
        }
    }

    /// An ACL for a node any step may name: mostly the open one.
    fn acl(&mut self) -> Vec<Acl> {
        match self.rng.below(10) {
            0 | 1 => self.rng.pick(&open_shapes()).clone(),
            2 => self.rng.pick(&invalid_shapes()).clone(),
            _ => vec![Acl::open_unsafe()],
        }
    }

    /// A step on a probe node: making one, or reading one.
    fn probe(&mut self) -> OpRequest {
        if self.probes.is_empty() || self.rng.chance(25) {
            let path = format!("{}/p{}", self.root, self.probes.len());
            self.probes.push(path.clone());
            let acl = if self.rng.chance(15) {
                self.rng.pick(&invalid_shapes()).clone()
            } else {
                self.rng.pick(&probe_shapes()).clone()
            };
            let c = CreateRequest {
                path,
                data: Some(self.data()),
                acl,
                mode: CreateMode::Persistent,
            };
            return if self.rng.chance(50) {
                OpRequest::Create(c)
            } else {
                OpRequest::Create2(c)
            };
        }
        let path = self.rng.pick(&self.probes).clone();
        // Not deleted before the clean-up: a sequential create under the
        // root after a delete there can meet ZooKeeper's numbering from
        // before the delete, as after a session's end (`DIFFERENCES`).
        match self.rng.below(10) {
            0..=5 => OpRequest::GetAcl(PathRequest { path }),
            6..=8 => OpRequest::GetData(PathWatchRequest { path, watch: false }),
            _ => OpRequest::Exists(PathWatchRequest { path, watch: false }),
        }
    }

    fn path(&mut self) -> String {
        self.rng.pick(&self.paths).clone()
    }

    fn data(&mut self) -> Vec<u8> {
        let len = self.rng.below(4) as usize;
        (0..len).map(|_| b'a' + self.rng.below(26) as u8).collect()
    }

    fn version(&mut self) -> i32 {
        *self.rng.pick(VERSIONS)
    }

    fn watch(&mut self) -> PathWatchRequest {
        PathWatchRequest {
            path: self.path(),
            watch: self.rng.chance(60),
        }
    }

    fn create(&mut self) -> CreateRequest {
        let mode = *self.rng.pick(&[
            CreateMode::Persistent,
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
        ]);
        let mode = match mode {
            CreateMode::PersistentSequential if self.closed => CreateMode::Persistent,
            CreateMode::EphemeralSequential if self.closed => CreateMode::Ephemeral,
            mode => mode,
        };
        let mut path = self.path();
        if mode.is_sequential() {
            // A prefix ending in `-`, or in `/` (the counter is the name).
            const SUFFIXES: [&str; 3] = ["/s-", "/s-", "/"];
            let suffix = *self.rng.pick(&SUFFIXES);
            path.push_str(suffix);
        } else if self.rng.chance(3) {
            path.push('/'); // invalid: BADARGUMENTS
        }
        CreateRequest {
            path,
            data: Some(self.data()),
            acl: self.acl(),
            mode,
        }
    }

    fn delete(&mut self) -> DeleteRequest {
        DeleteRequest {
            path: self.path(),
            version: self.version(),
        }
    }

    fn set_data(&mut self) -> SetDataRequest {
        SetDataRequest {
            path: self.path(),
            data: Some(self.data()),
            version: self.version(),
        }
    }

    fn check(&mut self) -> CheckVersionRequest {
        CheckVersionRequest {
            path: self.path(),
            version: self.version(),
        }
    }

    fn multi(&mut self) -> MultiRequest {
        let len = 1 + self.rng.below(4);
        let ops = (0..len)
            .map(|_| match self.rng.below(9) {
                0..=2 => MultiOp::Create(self.create()),
                3 => MultiOp::Create2(self.create()),
                4 | 5 => MultiOp::Delete(self.delete()),
                6 | 7 => MultiOp::SetData(self.set_data()),
                _ => MultiOp::Check(self.check()),
            })
            .collect();
        MultiRequest { ops }
    }

    fn action(&mut self) -> Action {
        let conn = self.rng.below(CONNS as u64) as usize;
        let op = match self.rng.below(100) {
            0..=21 => {
                let c = self.create();
                if self.rng.chance(50) {
                    OpRequest::Create(c)
                } else {
                    OpRequest::Create2(c)
                }
            }
            22..=31 => OpRequest::Delete(self.delete()),
            32..=41 => OpRequest::SetData(self.set_data()),
            42..=48 => OpRequest::Exists(self.watch()),
            49..=55 => OpRequest::GetData(self.watch()),
            56..=60 => OpRequest::GetChildren(self.watch()),
            61..=65 => OpRequest::GetChildren2(self.watch()),
            66..=75 => OpRequest::Multi(self.multi()),
            76 | 77 => {
                // Now and then the root or ZooKeeper's own subtree: both
                // servers hold nothing else outside this seed's root.
                let path = if self.rng.chance(20) {
                    self.rng
                        .pick(&["/", "/zookeeper", "/zookeeper/quota"])
                        .to_string()
                } else {
                    self.path()
                };
                OpRequest::GetAllChildrenNumber(PathRequest { path })
            }
            78 | 79 => OpRequest::SetAcl(SetAclRequest {
                path: self.path(),
                acl: self.acl(),
                version: self.version(),
            }),
            80 | 81 => OpRequest::GetAcl(PathRequest { path: self.path() }),
            82..=91 => self.probe(),
            92 | 93 => {
                let ops = (0..1 + self.rng.below(3))
                    .map(|_| {
                        let r = PathWatchRequest {
                            path: self.path(),
                            watch: false,
                        };
                        if self.rng.chance(50) {
                            MultiOp::GetData(r)
                        } else {
                            MultiOp::GetChildren(r)
                        }
                    })
                    .collect();
                OpRequest::MultiRead(MultiRequest { ops })
            }
            94 => OpRequest::Sync(PathRequest { path: self.path() }),
            _ => {
                self.closed = true;
                return Action::Close { conn };
            }
        };
        Action::Op { conn, op }
    }

    /// Remembers the nodes a step created, so later steps name them.
    fn learn(&mut self, answer: &Reply) {
        let probes = &self.probes;
        let mut add = |path: &str| {
            if !self.paths.iter().any(|p| p == path) && !probes.iter().any(|p| p == path) {
                self.paths.push(path.to_string());
            }
        };
        match &answer.body {
            ReplyBody::Create { path } | ReplyBody::Create2 { path, .. } => add(path),
            ReplyBody::Multi(m) => {
                for r in &m.results {
                    if let OpResult::Create { path } | OpResult::Create2 { path, .. } = r {
                        add(path);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A zxid named by the changes of the current seed on one server:
/// exactly the n-th change, or after n changes without being one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Zxid {
    Change(usize),
    After(usize),
}

/// A `Stat` with zxids named by changes, times by their relations, and the
/// owner by connection.
#[derive(Debug, PartialEq, Eq)]
struct CanonStat {
    czxid: Zxid,
    mzxid: Zxid,
    pzxid: Zxid,
    /// Only for a node whose creation is its last change: after two
    /// changes, equal times say only that both fell in one millisecond.
    ctime_is_mtime: Option<bool>,
    version: i32,
    cversion: i32,
    aversion: i32,
    owner: Option<String>,
    data_length: i32,
    num_children: i32,
}

#[derive(Debug, PartialEq, Eq)]
enum CanonResult {
    Create(String),
    Create2(String, CanonStat),
    Delete,
    SetData(CanonStat),
    Check,
    GetChildren(Vec<String>),
    GetData(Option<Vec<u8>>, CanonStat),
    Error(ErrorCode),
}

#[derive(Debug, PartialEq, Eq)]
enum CanonBody {
    Empty,
    Create(String),
    Create2(String, CanonStat),
    Stat(CanonStat),
    GetData(Option<Vec<u8>>, CanonStat),
    GetAcl(Vec<Acl>, CanonStat),
    Children(Vec<String>),
    Children2(Vec<String>, CanonStat),
    Sync(String),
    Multi(Vec<CanonResult>),
    Other(String),
}

#[derive(Debug, PartialEq, Eq)]
struct Answer {
    err: ErrorCode,
    body: CanonBody,
}

/// One server under test: its connections and what its answers showed.
struct Side {
    name: &'static str,
    addrs: Vec<SocketAddr>,
    conns: Vec<Wire>,
    /// Session ids by the connection (and generation) that opened them.
    sessions: HashMap<i64, String>,
    generation: usize,
    /// This seed's changes, by their zxid (the reply's header zxid).
    changes: Vec<i64>,
    /// The time each change of this seed wrote (ctime/mtime), by change.
    times: BTreeMap<usize, i64>,
}

impl Side {
    fn new(name: &'static str, addrs: Vec<SocketAddr>) -> Side {
        let mut side = Side {
            name,
            addrs,
            conns: Vec::new(),
            sessions: HashMap::new(),
            generation: 0,
            changes: Vec::new(),
            times: BTreeMap::new(),
        };
        for conn in 0..CONNS {
            let wire = side.open(conn);
            side.conns.push(wire);
        }
        side
    }

    /// A new session for connection `conn`, on its own member.
    fn open(&mut self, conn: usize) -> Wire {
        let wire = Wire::connect(self.addrs[conn % self.addrs.len()]);
        self.generation += 1;
        self.sessions
            .insert(wire.session_id, format!("conn{conn}.{}", self.generation));
        wire
    }

    fn reopen(&mut self, conn: usize) {
        self.conns[conn] = self.open(conn);
    }

    fn zxid(&self, zxid: i64) -> Zxid {
        match self.changes.binary_search(&zxid) {
            Ok(n) => Zxid::Change(n),
            Err(n) => Zxid::After(n),
        }
    }

    /// Records a time written by `change` (the wall clock is compared with
    /// ZooKeeper's times, nothing waits on it); an error if it breaks the
    /// relations times must keep.
    #[allow(clippy::disallowed_methods)]
    fn time(&mut self, change: Zxid, time: i64) -> Result<(), String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if (now - time).abs() > 600_000 {
            return Err(format!("time {time} is not near the clock ({now})"));
        }
        let Zxid::Change(n) = change else {
            return Ok(());
        };
        if let Some(&seen) = self.times.get(&n) {
            if seen != time {
                return Err(format!("change {n} wrote time {seen} and {time}"));
            }
            return Ok(());
        }
        let earlier = self.times.range(..n).next_back().map(|(_, t)| *t);
        let later = self.times.range(n + 1..).next().map(|(_, t)| *t);
        if earlier.is_some_and(|e| e > time) || later.is_some_and(|l| l < time) {
            return Err(format!(
                "change {n} wrote time {time}, out of order with {earlier:?} / {later:?}"
            ));
        }
        self.times.insert(n, time);
        Ok(())
    }

    fn stat(&mut self, s: &Stat, problems: &mut Vec<String>) -> CanonStat {
        let czxid = self.zxid(s.czxid);
        let mzxid = self.zxid(s.mzxid);
        for (change, time) in [(czxid, s.ctime), (mzxid, s.mtime)] {
            if let Err(p) = self.time(change, time) {
                problems.push(p);
            }
        }
        if s.ctime > s.mtime {
            problems.push(format!("ctime {} after mtime {}", s.ctime, s.mtime));
        }
        let one_change = czxid == mzxid;
        CanonStat {
            czxid,
            mzxid,
            pzxid: self.zxid(s.pzxid),
            ctime_is_mtime: one_change.then_some(s.ctime == s.mtime),
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            owner: (s.ephemeral_owner != 0).then(|| {
                self.sessions
                    .get(&s.ephemeral_owner)
                    .cloned()
                    .unwrap_or_else(|| "an unknown session".into())
            }),
            data_length: s.data_length,
            num_children: s.num_children,
        }
    }

    fn answer(&mut self, reply: &Reply, problems: &mut Vec<String>) -> Answer {
        let body = match &reply.body {
            ReplyBody::Empty => CanonBody::Empty,
            ReplyBody::Create { path } => CanonBody::Create(path.clone()),
            ReplyBody::Create2 { path, stat } => {
                CanonBody::Create2(path.clone(), self.stat(stat, problems))
            }
            ReplyBody::Stat(s) => CanonBody::Stat(self.stat(s, problems)),
            ReplyBody::GetData { data, stat } => {
                CanonBody::GetData(data.clone(), self.stat(stat, problems))
            }
            ReplyBody::GetAcl { acl, stat } => {
                CanonBody::GetAcl(acl.clone(), self.stat(stat, problems))
            }
            ReplyBody::GetChildren { children } => CanonBody::Children(sorted(children)),
            ReplyBody::GetChildren2 { children, stat } => {
                CanonBody::Children2(sorted(children), self.stat(stat, problems))
            }
            ReplyBody::Sync { path } => CanonBody::Sync(path.clone()),
            ReplyBody::Multi(m) => CanonBody::Multi(
                m.results
                    .iter()
                    .map(|r| match r {
                        OpResult::Create { path } => CanonResult::Create(path.clone()),
                        OpResult::Create2 { path, stat } => {
                            CanonResult::Create2(path.clone(), self.stat(stat, problems))
                        }
                        OpResult::Delete => CanonResult::Delete,
                        OpResult::SetData { stat } => {
                            CanonResult::SetData(self.stat(stat, problems))
                        }
                        OpResult::Check => CanonResult::Check,
                        OpResult::GetChildren { children } => {
                            CanonResult::GetChildren(sorted(children))
                        }
                        OpResult::GetData { data, stat } => {
                            CanonResult::GetData(data.clone(), self.stat(stat, problems))
                        }
                        OpResult::Error { err } => CanonResult::Error(*err),
                    })
                    .collect(),
            ),
            other => CanonBody::Other(format!("{other:?}")),
        };
        Answer {
            err: reply.header.err,
            body,
        }
    }

    fn events(&mut self, conn: usize) -> Vec<(EventType, KeeperState, String)> {
        self.conns[conn]
            .events
            .drain(..)
            .map(|e| (e.event_type, e.state, e.path))
            .collect()
    }
}

fn sorted(children: &[String]) -> Vec<String> {
    let mut c = children.to_vec();
    c.sort();
    c
}

/// True when `op`, answered by `reply`, changed the tree: its reply's zxid
/// is then a change of the sequence (`DIFFERENCES`: nothing else takes one
/// in raftlock).
fn changes_the_tree(op: &OpRequest, reply: &Reply) -> bool {
    if reply.header.err != ErrorCode::Ok {
        return false;
    }
    if let ReplyBody::Multi(m) = &reply.body {
        if m.results
            .iter()
            .any(|r| matches!(r, OpResult::Error { .. }))
        {
            return false;
        }
    }
    match op {
        OpRequest::Create(_)
        | OpRequest::Create2(_)
        | OpRequest::Delete(_)
        | OpRequest::SetData(_)
        | OpRequest::SetAcl(_)
        | OpRequest::CloseSession => true,
        OpRequest::Multi(m) => m.ops.iter().any(|o| !matches!(o, MultiOp::Check(_))),
        _ => false,
    }
}

/// The raftlock side first, then ZooKeeper.
struct Harness {
    sides: [Side; 2],
    /// Connections that left a watch this seed (they get a barrier read
    /// after each step, so their events are in before comparing).
    armed: [bool; CONNS],
    verbose: bool,
}

/// Why a seed failed.
struct Mismatch(String);

impl Harness {
    /// Runs one step on both sides and compares; the ZooKeeper reply.
    fn step(&mut self, seed: u64, index: usize, action: &Action) -> Result<Reply, Mismatch> {
        let (conn, op) = match action {
            Action::Op { conn, op } => (*conn, op.clone()),
            Action::Close { conn } => (*conn, OpRequest::CloseSession),
        };
        if let OpRequest::Exists(r)
        | OpRequest::GetData(r)
        | OpRequest::GetChildren(r)
        | OpRequest::GetChildren2(r) = &op
        {
            self.armed[conn] |= r.watch;
        }
        if self.verbose {
            eprintln!("seed {seed} step {index}: sending {action:?}");
        }
        let xids: Vec<i32> = self
            .sides
            .iter_mut()
            .map(|s| s.conns[conn].send(op.clone()))
            .collect();
        let replies: Vec<Reply> = self
            .sides
            .iter_mut()
            .zip(&xids)
            .map(|(s, xid)| s.conns[conn].recv(*xid))
            .collect();
        let mut problems = Vec::new();
        let mut answers = Vec::new();
        for (side, reply) in self.sides.iter_mut().zip(&replies) {
            if changes_the_tree(&op, reply) {
                if side.changes.last().is_some_and(|&z| z >= reply.header.zxid) {
                    problems.push(format!("{}: a change's zxid did not grow", side.name));
                }
                side.changes.push(reply.header.zxid);
            }
            let mut side_problems = Vec::new();
            answers.push(side.answer(reply, &mut side_problems));
            problems.extend(
                side_problems
                    .into_iter()
                    .map(|p| format!("{}: {p}", side.name)),
            );
        }
        if matches!(action, Action::Close { .. }) {
            let events: Vec<_> = self.sides.iter_mut().map(|s| s.events(conn)).collect();
            if events[0] != events[1] {
                problems.push(format!("events before the close differ: {events:?}"));
            }
            for side in &mut self.sides {
                side.reopen(conn);
            }
            self.armed[conn] = false;
        }
        if self.verbose {
            eprintln!(
                "  raftlock:  {:?} {:?}\n  zookeeper: {:?} {:?}",
                replies[0].header, answers[0], replies[1].header, answers[1]
            );
        }
        if answers[0] != answers[1] {
            problems.push("the answers differ".into());
        }
        self.barrier(conn, &mut problems);
        if problems.is_empty() {
            Ok(replies.into_iter().nth(1).expect("two replies"))
        } else {
            Err(Mismatch(format!(
                "seed {seed}, step {index}: {action:?}\n  raftlock:  {:?} {:?}\n  zookeeper: {:?} {:?}\n  {}\n  \
                 (replay: RAFTLOCK_CROSSCHECK_SEED={seed})",
                replies[0].header, answers[0], replies[1].header, answers[1],
                problems.join("\n  ")
            )))
        }
    }

    /// Reads once on every armed connection but `actor` (whose events
    /// came before its answer), so both servers have delivered the events
    /// of the step; then compares every connection's events.
    fn barrier(&mut self, actor: usize, problems: &mut Vec<String>) {
        for conn in (0..CONNS).filter(|&c| c != actor && self.armed[c]) {
            for side in &mut self.sides {
                let xid = side.conns[conn].send(OpRequest::Exists(PathWatchRequest {
                    path: "/".into(),
                    watch: false,
                }));
                side.conns[conn].recv(xid);
            }
        }
        for conn in 0..CONNS {
            let raftlock = self.sides[0].events(conn);
            let zookeeper = self.sides[1].events(conn);
            if raftlock != zookeeper {
                problems.push(format!(
                    "conn{conn}'s watch events differ:\n    raftlock:  {raftlock:?}\n    zookeeper: {zookeeper:?}"
                ));
            }
        }
    }

    fn run_seed(&mut self, seed: u64) -> Result<(), Mismatch> {
        let mut gen = Gen::new(seed);
        for side in &mut self.sides {
            side.changes.clear();
            side.times.clear();
        }
        self.armed = [false; CONNS];
        let root = Action::Op {
            conn: 0,
            op: OpRequest::Create(CreateRequest {
                path: gen.root.clone(),
                data: Some(b"root".to_vec()),
                acl: vec![Acl::open_unsafe()],
                mode: CreateMode::Persistent,
            }),
        };
        let mut index = 0;
        self.step(seed, index, &root)?;
        let steps = 6 + gen.rng.below(10);
        for _ in 0..steps {
            index += 1;
            let action = gen.action();
            let reply = self.step(seed, index, &action)?;
            gen.learn(&reply);
        }
        // The tree is reset by the same compared requests: children
        // first, depth first.
        let root = gen.root.clone();
        self.clean(seed, &mut index, &root)?;
        for conn in 0..CONNS {
            self.armed[conn] = true;
        }
        let mut problems = Vec::new();
        self.barrier(CONNS, &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Mismatch(format!(
                "seed {seed}, after cleaning up: {}\n  (replay: RAFTLOCK_CROSSCHECK_SEED={seed})",
                problems.join("\n  ")
            )))
        }
    }

    fn clean(&mut self, seed: u64, index: &mut usize, path: &str) -> Result<(), Mismatch> {
        *index += 1;
        let list = Action::Op {
            conn: 0,
            op: OpRequest::GetChildren(PathWatchRequest {
                path: path.into(),
                watch: false,
            }),
        };
        let reply = self.step(seed, *index, &list)?;
        let ReplyBody::GetChildren { children } = reply.body else {
            return Ok(()); // NONODE: nothing to delete
        };
        for child in sorted(&children) {
            self.clean(seed, index, &format!("{path}/{child}"))?;
        }
        *index += 1;
        let delete = Action::Op {
            conn: 0,
            op: OpRequest::Delete(DeleteRequest {
                path: path.into(),
                version: -1,
            }),
        };
        self.step(seed, *index, &delete).map(|_| ())
    }

    /// After a mismatch the two trees may differ: each side deletes its
    /// own copy of the seed's subtree, and every session starts afresh.
    fn recover(&mut self, root: &str) {
        for side in &mut self.sides {
            delete_tree(&mut side.conns[0], root);
            for conn in 0..CONNS {
                side.reopen(conn);
            }
        }
    }
}

/// Deletes `path` and everything below it, uncompared.
fn delete_tree(wire: &mut Wire, path: &str) {
    let xid = wire.send(OpRequest::GetChildren(PathWatchRequest {
        path: path.into(),
        watch: false,
    }));
    if let ReplyBody::GetChildren { children } = wire.recv(xid).body {
        for child in children {
            delete_tree(wire, &format!("{path}/{child}"));
        }
    }
    let xid = wire.send(OpRequest::Delete(DeleteRequest {
        path: path.into(),
        version: -1,
    }));
    wire.recv(xid);
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_answers_as_a_real_zookeeper_does() {
    let Some(zk) = tokio::task::spawn_blocking(ZooKeeper::start)
        .await
        .expect("start ZooKeeper")
    else {
        return;
    };
    let cluster = Cluster::start(door_config()).await;
    let doors = cluster.addrs();
    let zk_addr: SocketAddr = zk.addr().parse().expect("ZooKeeper's address");
    let replay = env_u64("RAFTLOCK_CROSSCHECK_SEED");
    let seeds: Vec<u64> = match replay {
        Some(seed) => vec![seed],
        None => (0..env_u64("RAFTLOCK_CROSSCHECK_SEEDS").unwrap_or(1000)).collect(),
    };
    let failures = common::client(move || {
        let mut harness = Harness {
            sides: [
                Side::new("raftlock", doors),
                Side::new("zookeeper", vec![zk_addr]),
            ],
            armed: [false; CONNS],
            verbose: replay.is_some() || std::env::var_os("RAFTLOCK_CROSSCHECK_VERBOSE").is_some(),
        };
        if harness.verbose {
            eprintln!(
                "raftlock doors {:?}, ZooKeeper {zk_addr}",
                harness.sides[0].addrs
            );
        }
        let started = Instant::now();
        let mut failures = Vec::new();
        for &seed in &seeds {
            if let Err(Mismatch(m)) = harness.run_seed(seed) {
                eprintln!("MISMATCH {m}");
                failures.push(m);
                harness.recover(&Gen::new(seed).root);
            }
        }
        eprintln!(
            "cross-checked {} seeds in {:.1?}: {} mismatched",
            seeds.len(),
            started.elapsed(),
            failures.len()
        );
        failures
    })
    .await;
    drop(zk);
    assert!(
        failures.is_empty(),
        "{} seeds answered differently (deliberate differences: {:?}); the first:\n{}",
        failures.len(),
        DIFFERENCES.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        failures[0]
    );
}

/// What one server answers to `auth` ACLs: a connection that ran
/// `addauth digest` twice (and one again), another that ran none. The
/// entries keep admin permission: ZooKeeper would refuse `setACL`
/// without it and hide the hashes (`DIFFERENCES`, not enforced).
fn auth_acl_answers(addr: SocketAddr, path: &str) -> Vec<String> {
    let mut authed = Wire::connect(addr);
    let mut anonymous = Wire::connect(addr);
    let mut answers = Vec::new();
    for credentials in ["bob:secret", "amy:pw", "bob:secret"] {
        authed.write(ClientPacket::Request(Request {
            xid: xid::AUTH,
            op: OpRequest::Auth(AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: credentials.as_bytes().to_vec(),
            }),
        }));
        answers.push(format!("addauth: {:?}", authed.recv(xid::AUTH).header.err));
    }
    let admin = perms::READ | perms::WRITE | perms::ADMIN;
    let auth = vec![
        Acl::new(admin, "auth", ""),
        // Not a duplicate of the first (its id differs): both expand.
        Acl::new(admin, "auth", "ignored"),
        Acl::new(perms::READ, "world", "anyone"),
    ];
    let request = |path: &str| {
        OpRequest::Create(CreateRequest {
            path: path.into(),
            data: None,
            acl: auth.clone(),
            mode: CreateMode::Persistent,
        })
    };
    let anonymous_path = format!("{path}-anonymous");
    let xid = anonymous.send(request(&anonymous_path));
    answers.push(format!(
        "anonymous create: {:?}",
        anonymous.recv(xid).header.err
    ));
    let xid = authed.send(request(path));
    answers.push(format!("create: {:?}", authed.recv(xid).header.err));
    let xid = authed.send(OpRequest::GetAcl(PathRequest { path: path.into() }));
    match authed.recv(xid).body {
        ReplyBody::GetAcl { acl, stat } => {
            answers.push(format!("getACL: {acl:?}, aversion {}", stat.aversion))
        }
        other => answers.push(format!("getACL: {other:?}")),
    }
    let set = OpRequest::SetAcl(SetAclRequest {
        path: path.into(),
        acl: vec![Acl::new(perms::ALL, "auth", "")],
        version: 0,
    });
    let xid = anonymous.send(set.clone());
    answers.push(format!(
        "anonymous setACL: {:?}",
        anonymous.recv(xid).header.err
    ));
    let xid = authed.send(set);
    answers.push(format!("setACL: {:?}", authed.recv(xid).header.err));
    let xid = authed.send(OpRequest::GetAcl(PathRequest { path: path.into() }));
    if let ReplyBody::GetAcl { acl, .. } = authed.recv(xid).body {
        answers.push(format!("getACL: {acl:?}"));
    }
    delete_tree(&mut authed, path);
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_acls_become_the_digest_ids_zookeeper_gives() {
    let Some(zk) = tokio::task::spawn_blocking(ZooKeeper::start)
        .await
        .expect("start ZooKeeper")
    else {
        return;
    };
    let cluster = Cluster::start(door_config()).await;
    let door = cluster.addrs()[0];
    let zk_addr: SocketAddr = zk.addr().parse().expect("ZooKeeper's address");
    let (ours, theirs) = common::client(move || {
        (
            auth_acl_answers(door, "/authacl"),
            auth_acl_answers(zk_addr, "/authacl"),
        )
    })
    .await;
    drop(zk);
    assert_eq!(ours, theirs, "raftlock (left) and ZooKeeper (right) differ");
    let admin = perms::READ | perms::WRITE | perms::ADMIN;
    let bob = format!("{:?}", Acl::new(admin, "digest", BOB));
    assert!(ours[5].contains(&bob), "{ours:?}");
}
