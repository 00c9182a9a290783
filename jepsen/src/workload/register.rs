//! The `register` client: read / write / cas of small integers on a few
//! keys through the generic nodes API, with linearizable reads, each op
//! to a random node.
//!
//! - `read`: `GET /v1/nodes/jepsen/{key}`; ok value = the integer stored,
//!   `nil` for a node that does not exist.
//! - `write v`: `PUT` with the data `v` (decimal text).
//! - `cas [e n]`: a linearizable read, then, if it holds `e`, a `PUT` with
//!   `expected_version` = the version read. The version check makes the
//!   pair atomic: ok `true` when the put succeeds; ok `false` when the read
//!   showed another value (the read is the linearization point); `fail` on
//!   `version_mismatch` or when the read could not be done.
//!
//! Keys rotate ([`KeySpace`]): after a fixed number of ops a key is retired
//! for a fresh one, so each key's history stays small enough to check
//! exhaustively. Every key used gets a final read after the run.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::Rng;

use super::{backoff, Ctx};
use crate::api::{NodeData, Reply};
use crate::history::{Value, F};
use crate::runlog::Call;

/// Values written are `0..VALUES` (small, so cas often succeeds and
/// equal values recur, as in Jepsen's register tests).
const VALUES: i64 = 5;

/// The register keys in use and those retired.
#[derive(Debug)]
pub struct KeySpace {
    /// (key number, ops issued on it) per slot.
    slots: Vec<Mutex<(u64, u64)>>,
    /// Every key handed out, for the final reads.
    used: Mutex<BTreeSet<String>>,
    /// Next key number.
    next: Mutex<u64>,
    /// Ops per key before it is retired.
    ops_per_key: u64,
}

impl KeySpace {
    /// `slots` keys in use at once, each for `ops_per_key` ops.
    pub fn new(slots: usize, ops_per_key: u64) -> Self {
        let slots = slots.max(1);
        KeySpace {
            slots: (0..slots as u64).map(|k| Mutex::new((k, 0))).collect(),
            used: Mutex::new(BTreeSet::new()),
            next: Mutex::new(slots as u64),
            ops_per_key: ops_per_key.max(1),
        }
    }

    /// A key for the next op.
    pub fn pick(&self, rng: &mut StdRng) -> String {
        let slot = &self.slots[rng.random_range(0..self.slots.len())];
        let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
        if s.1 >= self.ops_per_key {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *s = (*next, 0);
            *next += 1;
        }
        s.1 += 1;
        let key = format!("r{}", s.0);
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone());
        key
    }

    /// Every key used so far.
    pub fn used(&self) -> Vec<String> {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// The node path of a register key.
pub fn path(key: &str) -> String {
    format!("jepsen/{key}")
}

/// What a stored node means as a register value: its decimal integer, or
/// the raw text (which no write produced, so the checker will object).
fn decode(node: Option<NodeData>) -> Value {
    match node {
        None => Value::Nil,
        Some(n) => {
            let text = String::from_utf8_lossy(&n.data).into_owned();
            text.parse::<i64>().map_or(Value::Str(text), Value::Int)
        }
    }
}

/// One register client (client `idx`, routed by its [`Route`](super::route::Route)).
pub async fn client(ctx: Arc<Ctx>, idx: usize, mut rng: StdRng) {
    let mut pid = ctx.next_pid();
    let route = &ctx.clients[idx].route;
    while !ctx.stopping() {
        let key = ctx.keys.pick(&mut rng);
        let node = route.pick(&mut rng);
        let (outcome, code) = match rng.random_range(0..4) {
            0 | 1 => read_op(&ctx, pid, node, &key).await,
            2 => write(&ctx, pid, node, &key, rng.random_range(0..VALUES)).await,
            _ => {
                let (e, n) = (rng.random_range(0..VALUES), rng.random_range(0..VALUES));
                cas(&ctx, pid, node, &key, e, n).await
            }
        };
        route.observe(node, code.as_deref());
        match outcome {
            Outcome::Ok => {}
            Outcome::Fail => backoff(&ctx, &mut rng).await,
            Outcome::Info => pid = ctx.next_pid(),
        }
    }
}

/// How an op ended, for the client's next move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// ok.
    Ok,
    /// Definitely not applied (back off a little).
    Fail,
    /// Unknown: the process is retired.
    Info,
}

/// A linearizable read of `key` on `node`, recorded by `pid`.
pub async fn read(ctx: &Ctx, pid: u64, node: u64, key: &str) -> Outcome {
    read_op(ctx, pid, node, key).await.0
}

/// What an op did, and the error code of a failed one (for routing).
type Done = (Outcome, Option<String>);

async fn read_op(ctx: &Ctx, pid: u64, node: u64, key: &str) -> Done {
    let call = Call {
        pid,
        f: F::Read,
        key: key.to_string(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    match ctx.api.get_node(node, &path(key)).await {
        Reply::Ok(n) => {
            ctx.log.ok(&call, decode(n));
            (Outcome::Ok, None)
        }
        Reply::Fail(e) => {
            ctx.log.fail(&call, &e.text());
            (Outcome::Fail, Some(e.code))
        }
        Reply::Info(e) => {
            ctx.log.info(&call, &e.text());
            (Outcome::Info, Some(e.code))
        }
    }
}

async fn write(ctx: &Ctx, pid: u64, node: u64, key: &str, v: i64) -> Done {
    let call = Call {
        pid,
        f: F::Write,
        key: key.to_string(),
        value: Value::Int(v),
        token: None,
    };
    ctx.log.invoke(&call);
    match ctx
        .api
        .put_node(node, &path(key), v.to_string().as_bytes(), None)
        .await
    {
        Reply::Ok(()) => {
            ctx.log.ok(&call, v);
            (Outcome::Ok, None)
        }
        Reply::Fail(e) => {
            ctx.log.fail(&call, &e.text());
            (Outcome::Fail, Some(e.code))
        }
        Reply::Info(e) => {
            ctx.log.info(&call, &e.text());
            (Outcome::Info, Some(e.code))
        }
    }
}

async fn cas(ctx: &Ctx, pid: u64, node: u64, key: &str, expected: i64, new: i64) -> Done {
    let call = Call {
        pid,
        f: F::Cas,
        key: key.to_string(),
        value: Value::List(vec![Value::Int(expected), Value::Int(new)]),
        token: None,
    };
    ctx.log.invoke(&call);
    let version = match ctx.api.get_node(node, &path(key)).await {
        Reply::Ok(Some(n)) => {
            let version = n.version;
            if decode(Some(n)) != Value::Int(expected) {
                ctx.log.ok(&call, false);
                return (Outcome::Ok, None);
            }
            version
        }
        Reply::Ok(None) => {
            ctx.log.ok(&call, false);
            return (Outcome::Ok, None);
        }
        // The read changed nothing, so neither did the cas.
        Reply::Fail(e) | Reply::Info(e) => {
            ctx.log.fail(&call, &format!("read for cas: {}", e.text()));
            return (Outcome::Fail, Some(e.code));
        }
    };
    let data = new.to_string();
    match ctx
        .api
        .put_node(node, &path(key), data.as_bytes(), Some(version))
        .await
    {
        Reply::Ok(()) => {
            ctx.log.ok(&call, true);
            (Outcome::Ok, None)
        }
        Reply::Fail(e) => {
            ctx.log.fail(&call, &e.text());
            (Outcome::Fail, Some(e.code))
        }
        Reply::Info(e) => {
            ctx.log.info(&call, &e.text());
            (Outcome::Info, Some(e.code))
        }
    }
}
