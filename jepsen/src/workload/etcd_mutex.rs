//! The `etcd-mutex` clients: the `fenced` workload spoken through the
//! members' etcd doors over gRPC (the client stubs `raftlock_etcd::pb`
//! generates), running etcd's own lock recipe: clientv3's
//! `concurrency.Mutex` (etcd's `client/v3/concurrency/mutex.go` and
//! `key.go`), written here from its description.
//!
//! A process is one etcd lease on the client's member (sticky:
//! [`super::route`]; a member without a door, or one that does not
//! answer, is left as an HTTP client leaves it). Each round:
//! - `acquire`: one txn puts `<prefix><lease in hex>` with the lease if
//!   its create revision is 0 (absent), else reads it, and either way
//!   reads the owner: the key under the prefix with the lowest create
//!   revision. Our key's create revision is the **fencing token**. If the
//!   owner is not us, wait for the deletion of every key created before
//!   ours (`waitDeletes`): read the newest such key, watch it from the
//!   read's revision until it is deleted, read again, until none is left.
//!   Then read our own key: gone means the lease expired while we waited
//!   (clientv3's `ErrSessionExpired`, the recipe's known hazard), and the
//!   acquire fails. The grant is decided at the revision of that last
//!   read (of the txn when we were the owner at once). A wait that
//!   outlasts the acquire's `wait_ms` deletes our key (`fail`); an answer
//!   lost to the connection is `info`;
//! - `incr` of the fenced counter under the token, then a short hold;
//! - `release`: delete our key.
//!
//! The grant's value records the key, the lease, the revision and the
//! run time of the client's last look at its lease
//! ([`crate::checker::lease_grant`] checks them; [`spawn_auditor`] reads
//! every grant back from the door's history while the run goes on, and
//! [`audit`] the rest after it).
//!
//! # When a client stops holding
//! The lease is kept alive by this module's keepalives (one request per
//! `LeaseKeepAlive` stream, on the schedule of the HTTP clients'
//! keepalives; none while the `client-pause` nemesis pauses the client).
//! A holder observes its loss, and stops, at the first of: the send time
//! of its last answered keepalive + the granted TTL −
//! [`raftlock_client::lost_margin`] (the door renews a lease only once a
//! quorum confirms it), or a keepalive answered with TTL 0 (the lease is
//! gone). The loss is recorded as [`super::session`] records it; the
//! lease is then revoked (best effort) and the client goes on with a new
//! one.
//!
//! # The injected bug
//! With `Settings::inject_etcd_no_requery` a waiter believes it holds the
//! lock as soon as the key it watches (its immediate predecessor) is
//! deleted, without reading again whether an older key is left: when a
//! waiter in the middle of the queue withdraws (its wait timed out) or
//! its lease ends, its successor "holds" beside the real holder. The
//! mutex, fencing and door-history checks must catch it.

use std::sync::Arc;
use std::time::Duration;

use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::range_request::{SortOrder, SortTarget};
use pb::request_op::Request;
use pb::response_op::Response;
use pb::watch_client::WatchClient;
use raftlock_etcd::pb::etcdserverpb as pb;
use raftlock_etcd::pb::mvccpb;
use rand::rngs::StdRng;
use rand::Rng;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt as _;
use tonic::transport::{Channel, Endpoint};

use super::session::{record_loss, End, Lease, Loss};
use super::zk_mutex::{hold, ns, until};
use super::{backoff, lock, Ctx};
use crate::history::{Value, F};
use crate::runlog::Call;

/// Longest wait for a member's door to take a connection.
const CONNECT_FOR: Duration = Duration::from_secs(2);
/// Longest wait for one call's answer (the door answers "no leader"
/// after the cluster's `leader_wait_ms`, 2 s in the harness).
const CALL_FOR: Duration = Duration::from_secs(4);

/// The lock's key prefix, e.g. `jepsen/lock/`.
pub fn lock_prefix(ctx: &Ctx) -> String {
    format!("{}/", ctx.settings.lock.trim_matches('/'))
}

/// The end of the range of keys under `prefix` (etcd's `WithPrefix`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A call that failed: the server's answer, or none in time.
#[derive(Debug)]
enum CallError {
    Status(tonic::Status),
    /// No answer in time, or the stream ended without one.
    NoAnswer,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status(s) => write!(f, "{:?}: {}", s.code(), s.message()),
            CallError::NoAnswer => f.write_str("no answer"),
        }
    }
}

impl CallError {
    /// The server said the lease is unknown (expired or revoked).
    fn lease_gone(&self) -> bool {
        matches!(self, CallError::Status(s) if s.message().contains("lease not found"))
    }

    /// The member did not serve: a sticky client moves.
    fn unreachable(&self) -> bool {
        match self {
            CallError::NoAnswer => true,
            CallError::Status(s) => s.code() == tonic::Code::Unavailable,
        }
    }
}

/// Runs `call`, bounded by [`CALL_FOR`].
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(CALL_FOR, call).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(CallError::Status(s)),
        Err(_) => Err(CallError::NoAnswer),
    }
}

/// The etcd clients of one member's door (one HTTP/2 connection).
#[derive(Clone)]
struct Door {
    kv: KvClient<Channel>,
    watch: WatchClient<Channel>,
    lease: LeaseClient<Channel>,
}

impl Door {
    async fn connect(addr: &str) -> Option<Door> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .ok()?
            .connect_timeout(CONNECT_FOR);
        let channel = tokio::time::timeout(CONNECT_FOR, endpoint.connect())
            .await
            .ok()?
            .ok()?;
        Some(Door {
            kv: KvClient::new(channel.clone()),
            watch: WatchClient::new(channel.clone()),
            lease: LeaseClient::new(channel),
        })
    }

    async fn range(&self, req: pb::RangeRequest) -> Result<pb::RangeResponse, CallError> {
        bounded(self.kv.clone().range(req)).await
    }
}

/// The header revision of a response.
fn revision(header: Option<&pb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

/// The owner query: the key under `prefix` with the lowest create
/// revision (clientv3's `WithFirstCreate`), as of `at` (0: now).
fn first_created(prefix: &[u8], at: i64) -> pb::RangeRequest {
    pb::RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        revision: at,
        sort_order: SortOrder::Ascend as i32,
        sort_target: SortTarget::Create as i32,
        ..Default::default()
    }
}

/// One open lease of a client process.
struct EtcdSession {
    door: Door,
    /// The lease id.
    id: i64,
    /// The process that owns it.
    pid: u64,
    /// The member it is on.
    node: u64,
    lease: Arc<Lease>,
    /// Sends the keepalives; notes the loss.
    keeper: JoinHandle<()>,
}

impl EtcdSession {
    fn lost(&self, ctx: &Ctx) -> Option<Loss> {
        self.lease.lost(ctx.log.now()).map(|(_, why)| why)
    }

    /// Our key under the lock's prefix.
    fn key(&self, ctx: &Ctx) -> String {
        format!("{}{:x}", lock_prefix(ctx), self.id)
    }

    /// Ends the lease: the loss recorded by process `recorder` on behalf
    /// of this one, then a revoke (best effort), so its key goes now.
    async fn end(self, ctx: &Ctx, recorder: u64, how: End) {
        self.keeper.abort();
        if let End::Lost(why) = how {
            if record_loss(ctx, recorder, self.pid, &self.lease, why) == Loss::Gone {
                return;
            }
        }
        let _ = bounded(
            self.door
                .lease
                .clone()
                .lease_revoke(pb::LeaseRevokeRequest { id: self.id }),
        )
        .await;
    }
}

impl Drop for EtcdSession {
    fn drop(&mut self) {
        // Also when a client task is aborted at the end of a run.
        self.keeper.abort();
    }
}

/// One `etcd-mutex` client.
pub async fn client(ctx: Arc<Ctx>, idx: usize, mut rng: StdRng) {
    let mut ending: Option<(EtcdSession, End)> = None;
    loop {
        let pid = ctx.next_pid();
        if let Some((old, how)) = ending.take() {
            ctx.set_holding(idx, false);
            old.end(&ctx, pid, how).await;
        }
        if ctx.stopping() {
            return;
        }
        let Some(session) = open(&ctx, idx, pid, &mut rng).await else {
            return;
        };
        let how = session_loop(&ctx, idx, &session, &mut rng).await;
        ending = Some((session, how));
    }
}

/// Grants a lease for process `pid` on client `idx`'s member, retrying
/// (and moving on from members that do not answer) until the run stops.
async fn open(ctx: &Arc<Ctx>, idx: usize, pid: u64, rng: &mut StdRng) -> Option<EtcdSession> {
    let route = &ctx.clients[idx].route;
    let ttl_s = i64::try_from(ctx.settings.ttl_ms.div_ceil(1000)).unwrap_or(i64::MAX);
    while !ctx.stopping() {
        ctx.clients[idx].wait_unpaused().await;
        let node = route.pick(rng);
        let door = match ctx.etcd_doors.get(&node) {
            Some(addr) => Door::connect(addr).await,
            None => None,
        };
        let Some(door) = door else {
            // No door (a spare that joined), or it does not answer.
            route.observe(node, Some("connect"));
            backoff(ctx, rng).await;
            continue;
        };
        let invoked = ctx.log.now();
        let granted = bounded(
            door.lease
                .clone()
                .lease_grant(pb::LeaseGrantRequest { ttl: ttl_s, id: 0 }),
        )
        .await;
        match granted {
            Ok(g) if g.error.is_empty() && g.id > 0 && g.ttl > 0 => {
                let ttl = Duration::from_secs(u64::try_from(g.ttl).unwrap_or(1));
                let timeout_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                let lease = Arc::new(Lease::new(invoked, timeout_ms));
                let keeper = tokio::spawn(keep(
                    Arc::clone(ctx),
                    idx,
                    (door.lease.clone(), g.id, ttl),
                    Arc::clone(&lease),
                ));
                return Some(EtcdSession {
                    door,
                    id: g.id,
                    pid,
                    node,
                    lease,
                    keeper,
                });
            }
            // An unknown outcome may leave a lease behind; it holds
            // nothing and expires on its own.
            Ok(_) => backoff(ctx, rng).await,
            Err(e) => {
                if e.unreachable() {
                    route.observe(node, Some("connect"));
                }
                backoff(ctx, rng).await;
            }
        }
    }
    None
}

/// One keepalive: a `LeaseKeepAlive` stream carrying one request. The
/// TTL answered (0: the lease is gone).
async fn keepalive_once(client: &mut LeaseClient<Channel>, id: i64) -> Result<i64, CallError> {
    let req = tokio_stream::once(pb::LeaseKeepAliveRequest { id });
    let mut answers = client
        .lease_keep_alive(req)
        .await
        .map_err(CallError::Status)?
        .into_inner();
    match answers.message().await {
        Ok(Some(r)) => Ok(r.ttl),
        Ok(None) => Err(CallError::NoAnswer),
        Err(s) => Err(CallError::Status(s)),
    }
}

/// The keeper: a keepalive every third of the TTL after the last
/// answered one, retried every tenth after a failure, none while the
/// nemesis pauses the client; notes the loss at the lease's deadline or
/// when a keepalive says the lease is gone.
async fn keep(
    ctx: Arc<Ctx>,
    idx: usize,
    (mut client, id, ttl): (LeaseClient<Channel>, i64, Duration),
    lease: Arc<Lease>,
) {
    let interval = ns(ttl / 3);
    let retry = ns((ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)));
    let control = &ctx.clients[idx];
    let mut next = lease.renewed() + interval;
    loop {
        let now = ctx.log.now();
        if lease.lost(now).is_some() {
            return;
        }
        let deadline = lease.deadline();
        let wake = if control.paused() {
            deadline
        } else {
            next.min(deadline)
        };
        tokio::select! {
            _ = tokio::time::sleep(until(wake, now)) => {}
            _ = control.wait_unpaused(), if control.paused() => continue,
        }
        if ctx.log.now() < next || control.paused() {
            continue;
        }
        let sent = ctx.log.now();
        let wait = until(deadline, sent).min(ttl / 3);
        let answered = tokio::time::timeout(wait, keepalive_once(&mut client, id)).await;
        let now = ctx.log.now();
        match answered {
            Ok(Ok(left)) if left > 0 => {
                lease.renew(sent, now);
                next = sent + interval;
            }
            Ok(Ok(_)) => {
                lease.end_by(|| ctx.log.now(), Loss::Gone);
                return;
            }
            Ok(Err(e)) if e.lease_gone() => {
                lease.end_by(|| ctx.log.now(), Loss::Gone);
                return;
            }
            _ => next = now + retry,
        }
    }
}

/// Lock rounds on one lease until it must end; says how.
async fn session_loop(ctx: &Ctx, idx: usize, s: &EtcdSession, rng: &mut StdRng) -> End {
    loop {
        if let Some(why) = s.lost(ctx) {
            return End::Lost(why);
        }
        if ctx.stopping() {
            return End::Quiet;
        }
        let token = match acquire(ctx, idx, s, rng).await {
            Acquired::Held(token) => token,
            Acquired::Retry => continue,
            Acquired::End(end) => return end,
        };
        lock::increment(ctx, idx, s.pid, token).await;
        hold(ctx, idx, &s.lease, rng).await;
        let released = release(ctx, s).await;
        ctx.set_holding(idx, false);
        if let Some(end) = released {
            return end;
        }
    }
}

enum Acquired {
    /// Held with this token.
    Held(u64),
    Retry,
    End(End),
}

/// What the recipe came to before the client holds.
enum Waited {
    /// Every older key is gone, as of this revision.
    Lowest(i64),
    /// The wait ran out (our key is still queued).
    TimedOut,
    /// The lease was lost while waiting.
    Lost(Loss),
    /// A call failed.
    Failed(CallError),
}

/// The recipe's txn: our key put with the lease if absent, else read;
/// the owner read either way. Our key's create revision, the owner's, and
/// the revision of the answer.
async fn enqueue(ctx: &Ctx, s: &EtcdSession) -> Result<(i64, Option<i64>, i64), CallError> {
    let key = s.key(ctx).into_bytes();
    let prefix = lock_prefix(ctx).into_bytes();
    let owner = || pb::RequestOp {
        request: Some(Request::RequestRange(first_created(&prefix, 0))),
    };
    let txn = pb::TxnRequest {
        compare: vec![pb::Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Create as i32,
            key: key.clone(),
            range_end: Vec::new(),
            target_union: Some(TargetUnion::CreateRevision(0)),
        }],
        success: vec![
            pb::RequestOp {
                request: Some(Request::RequestPut(pb::PutRequest {
                    key: key.clone(),
                    lease: s.id,
                    ..Default::default()
                })),
            },
            owner(),
        ],
        failure: vec![
            pb::RequestOp {
                request: Some(Request::RequestRange(pb::RangeRequest {
                    key: key.clone(),
                    ..Default::default()
                })),
            },
            owner(),
        ],
    };
    let r = bounded(s.door.kv.clone().txn(txn)).await?;
    let at = revision(r.header.as_ref());
    let range = |i: usize| match r.responses.get(i).and_then(|o| o.response.as_ref()) {
        Some(Response::ResponseRange(g)) => g.kvs.first().map(|kv| kv.create_revision),
        _ => None,
    };
    let mine = if r.succeeded { Some(at) } else { range(0) };
    match mine {
        Some(mine) => Ok((mine, range(1), at)),
        // Our key exists (the put was skipped) but is not there: it went
        // between the compare and the read, which a txn does not allow.
        None => Err(CallError::NoAnswer),
    }
}

/// The recipe, recorded as one `acquire`.
async fn acquire(ctx: &Ctx, idx: usize, s: &EtcdSession, rng: &mut StdRng) -> Acquired {
    let wait_ms = rng.random_range(500..=ctx.settings.max_wait_ms.max(500));
    let call = Call {
        pid: s.pid,
        f: F::Acquire,
        key: ctx.settings.lock.clone(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    let (mine, owner, at) = match enqueue(ctx, s).await {
        Ok(q) => q,
        Err(e) => {
            observe(ctx, idx, s, &e);
            if e.lease_gone() {
                // Refused: nothing was put.
                ctx.log.fail(&call, &format!("txn: {e}"));
                return Acquired::End(End::Lost(Loss::Gone));
            }
            // The key may exist: the lease is given up.
            ctx.log.info(&call, &format!("txn: {e}"));
            return Acquired::End(End::Lost(Loss::GaveUp));
        }
    };
    let token = u64::try_from(mine).unwrap_or(0);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let first = owner.is_none_or(|o| o == mine);
    let waited = if first {
        Waited::Lowest(at)
    } else {
        wait_deletes(ctx, s, mine, deadline).await
    };
    let at = match waited {
        Waited::Lowest(at) if first => at,
        // After a wait: our key must still be there (the lease alive).
        Waited::Lowest(_) => match own_key(ctx, s).await {
            Ok(Some((created, at))) if created == mine => at,
            Ok(_) => {
                ctx.log
                    .fail(&call, "lease expired while waiting: our key is gone");
                return Acquired::End(End::Lost(Loss::Gone));
            }
            Err(e) => return failed(ctx, idx, s, &call, &e),
        },
        Waited::TimedOut => return withdraw(ctx, idx, s, &call).await,
        // Never believed held; the key goes with the lease.
        Waited::Lost(why) => {
            ctx.log.fail(&call, "lease lost while waiting");
            return Acquired::End(End::Lost(why));
        }
        Waited::Failed(e) => return failed(ctx, idx, s, &call, &e),
    };
    grant(ctx, idx, s, call, token, at)
}

/// A call of the wait failed: never believed held, and the lease is
/// given up (its key goes with it).
fn failed(ctx: &Ctx, idx: usize, s: &EtcdSession, call: &Call, e: &CallError) -> Acquired {
    observe(ctx, idx, s, e);
    ctx.log.fail(call, &format!("while waiting: {e}"));
    Acquired::End(End::Lost(if e.lease_gone() {
        Loss::Gone
    } else {
        Loss::GaveUp
    }))
}

/// Records the grant decided at revision `at`, if the lease is still
/// alive by the client's rule.
fn grant(ctx: &Ctx, idx: usize, s: &EtcdSession, call: Call, token: u64, at: i64) -> Acquired {
    let Some(alive_at) = s.lease.alive_by(|| ctx.log.now()) else {
        ctx.log.fail(&call, "lease lost while waiting");
        return Acquired::End(End::Lost(s.lost(ctx).unwrap_or(Loss::Deadline)));
    };
    let value = Value::Map(
        [
            ("key", Value::Str(s.key(ctx))),
            ("lease", Value::Int(s.id)),
            ("revision", Value::Int(at)),
            (
                "alive_at",
                Value::Int(i64::try_from(alive_at).unwrap_or(i64::MAX)),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    ctx.log.ok(
        &Call {
            token: Some(token),
            ..call
        },
        value,
    );
    ctx.set_holding(idx, true);
    Acquired::Held(token)
}

/// The wait ran out: our key is deleted (clientv3 unlocks when `Lock`'s
/// context ends).
async fn withdraw(ctx: &Ctx, idx: usize, s: &EtcdSession, call: &Call) -> Acquired {
    match delete_own(ctx, s).await {
        Ok(_) => {
            ctx.log.fail(call, "timeout");
            Acquired::Retry
        }
        Err(e) => {
            observe(ctx, idx, s, &e);
            ctx.log.info(call, &format!("withdraw: {e}"));
            Acquired::End(End::Lost(Loss::GaveUp))
        }
    }
}

/// Our key's create revision, if it exists, and the read's revision.
async fn own_key(ctx: &Ctx, s: &EtcdSession) -> Result<Option<(i64, i64)>, CallError> {
    let r = s
        .door
        .range(pb::RangeRequest {
            key: s.key(ctx).into_bytes(),
            ..Default::default()
        })
        .await?;
    let at = revision(r.header.as_ref());
    Ok(r.kvs.first().map(|kv| (kv.create_revision, at)))
}

/// Deletes our key; how many keys went.
async fn delete_own(ctx: &Ctx, s: &EtcdSession) -> Result<i64, CallError> {
    let r = bounded(s.door.kv.clone().delete_range(pb::DeleteRangeRequest {
        key: s.key(ctx).into_bytes(),
        ..Default::default()
    }))
    .await?;
    Ok(r.deleted)
}

/// clientv3's `waitDeletes`: until no key under the prefix was created
/// before ours (`mine`), watch the newest such key, from the revision of
/// the read that found it, for its deletion.
async fn wait_deletes(
    ctx: &Ctx,
    s: &EtcdSession,
    mine: i64,
    deadline: tokio::time::Instant,
) -> Waited {
    let prefix = lock_prefix(ctx).into_bytes();
    loop {
        if let Some(why) = s.lost(ctx) {
            return Waited::Lost(why);
        }
        let read = s
            .door
            .range(pb::RangeRequest {
                key: prefix.clone(),
                range_end: prefix_end(&prefix),
                limit: 1,
                sort_order: SortOrder::Descend as i32,
                sort_target: SortTarget::Create as i32,
                max_create_revision: mine - 1,
                ..Default::default()
            })
            .await;
        let r = match read {
            Ok(r) => r,
            Err(e) => return Waited::Failed(e),
        };
        let at = revision(r.header.as_ref());
        let Some(last) = r.kvs.first() else {
            return Waited::Lowest(at);
        };
        let deleted = tokio::select! {
            d = wait_delete(s, &last.key, at) => d,
            _ = tokio::time::sleep_until(deadline) => return Waited::TimedOut,
            _ = s.lease.wait_lost() => continue,
        };
        match deleted {
            Ok(Some(rev)) if ctx.settings.inject_etcd_no_requery => {
                // The injected bug: the predecessor's deletion taken for
                // the lock, with no read to check no older key is left.
                return Waited::Lowest(rev);
            }
            // Deleted: read again.
            Ok(_) => {}
            Err(e) => return Waited::Failed(e),
        }
    }
}

/// clientv3's `waitDelete`: watches `key` from revision `from` until a
/// delete event; its revision. `None` when the watch ended without one
/// (canceled, e.g. compacted): the caller reads again.
async fn wait_delete(s: &EtcdSession, key: &[u8], from: i64) -> Result<Option<i64>, CallError> {
    let create = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
            pb::WatchCreateRequest {
                key: key.to_vec(),
                start_revision: from,
                ..Default::default()
            },
        )),
    };
    // The request stream stays open: closing it may end the watch.
    let requests = tokio_stream::once(create).chain(tokio_stream::pending());
    let mut events =
        match tokio::time::timeout(CALL_FOR, s.door.watch.clone().watch(requests)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(st)) => return Err(CallError::Status(st)),
            Err(_) => return Err(CallError::NoAnswer),
        };
    loop {
        match events.message().await {
            Ok(Some(w)) => {
                if let Some(ev) = w
                    .events
                    .iter()
                    .find(|e| e.r#type == mvccpb::event::EventType::Delete as i32)
                {
                    return Ok(Some(ev.kv.as_ref().map_or(0, |kv| kv.mod_revision)));
                }
                if w.canceled {
                    return Ok(None);
                }
            }
            Ok(None) => return Err(CallError::NoAnswer),
            Err(st) => return Err(CallError::Status(st)),
        }
    }
}

/// Deletes our key. `None` when released and the lease goes on.
async fn release(ctx: &Ctx, s: &EtcdSession) -> Option<End> {
    if let Some(why) = s.lost(ctx) {
        return Some(End::Lost(why));
    }
    let call = Call {
        pid: s.pid,
        f: F::Release,
        key: ctx.settings.lock.clone(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    match delete_own(ctx, s).await {
        Ok(1) => {
            ctx.log.ok(&call, Value::Nil);
            None
        }
        Ok(_) => {
            // Our key was not there: the lease is gone.
            ctx.log.fail(&call, "our key is gone");
            Some(End::Lost(Loss::Gone))
        }
        Err(e) => {
            ctx.log.info(&call, &format!("delete: {e}"));
            Some(End::Lost(Loss::GaveUp))
        }
    }
}

/// A failure that says the member did not serve: a sticky client moves.
fn observe(ctx: &Ctx, idx: usize, s: &EtcdSession, e: &CallError) {
    if e.unreachable() {
        ctx.clients[idx].route.observe(s.node, Some("connect"));
    }
}

async fn door_of(ctx: &Ctx, node: u64) -> Result<Door, String> {
    let addr = ctx
        .etcd_doors
        .get(&node)
        .ok_or_else(|| format!("n{node} has no etcd door"))?;
    Door::connect(addr)
        .await
        .ok_or_else(|| format!("n{node}: no connection to {addr}"))
}

/// Whether no key is left under the lock's prefix (the quiet phase's
/// check), read through member `node`'s door.
pub async fn lock_is_free(ctx: &Ctx, node: u64) -> Result<bool, String> {
    let door = door_of(ctx, node).await?;
    let prefix = lock_prefix(ctx).into_bytes();
    let r = door
        .range(pb::RangeRequest {
            key: prefix.clone(),
            range_end: prefix_end(&prefix),
            count_only: true,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("n{node}: range: {e}"))?;
    Ok(r.count == 0)
}

/// What the audit found: grants read back, grants it could not read, and
/// the violations (the grant's op, what was wrong).
pub type Audit = (usize, Vec<String>, Vec<(u64, String)>);

/// How often the auditor reads back the grants made so far while the
/// run goes on: well inside the time the door's history (bounded by
/// `raftlock_core::kv::HISTORY_MAX_EVENTS`) keeps a revision under this
/// workload's load, so a long run's early grants are read before they
/// are compacted away.
const AUDIT_EVERY: Duration = Duration::from_secs(10);

/// The grants read back so far, shared by the auditor during the run and
/// the audit after it. A grant counts once it was read (fine or wrong);
/// one that could not be read is tried again next time.
#[derive(Default)]
pub struct AuditLog {
    state: std::sync::Mutex<AuditState>,
}

#[derive(Default)]
struct AuditState {
    done: std::collections::HashSet<u64>,
    problems: Vec<(u64, String)>,
}

impl AuditLog {
    fn state(&self) -> std::sync::MutexGuard<'_, AuditState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Grants read so far and the violations among them.
    pub fn found(&self) -> (usize, Vec<(u64, String)>) {
        let s = self.state();
        (s.done.len(), s.problems.clone())
    }
}

/// Reads the grants made so far back from the door's history every
/// [`AUDIT_EVERY`], through the members in turn, until the run stops
/// (then [`audit`] reads the rest).
pub fn spawn_auditor(ctx: Arc<Ctx>, log: Arc<AuditLog>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut attempt = 0;
        loop {
            tokio::time::sleep(AUDIT_EVERY).await;
            if ctx.stopping() {
                return;
            }
            let Some(node) = ctx.roster.nth(attempt) else {
                continue;
            };
            attempt += 1;
            // A member that does not answer now is another's turn next time.
            let _ = audit(&ctx, node, &log).await;
        }
    })
}

/// Reads every grant of the history not yet in `log` back from the door's
/// history on member `node` ([`crate::checker::lease_grant`], check 2):
/// at the grant's revision the client's key existed with its lease and
/// create revision, and no key under the prefix was older. Returns the
/// grants it could not read.
pub async fn audit(ctx: &Ctx, node: u64, log: &AuditLog) -> Result<Vec<String>, String> {
    let door = door_of(ctx, node).await?;
    let history = ctx.log.history().map_err(|e| e.to_string())?;
    let ops = history.operations().map_err(|e| e.to_string())?;
    let prefix = lock_prefix(ctx).into_bytes();
    let mut unchecked = Vec::new();
    for g in crate::checker::lease_grant::grants(&ops) {
        if log.state().done.contains(&g.op) {
            continue;
        }
        match read_back(&door, &prefix, &g).await {
            Ok(problems) => {
                let mut s = log.state();
                s.done.insert(g.op);
                s.problems.extend(problems.into_iter().map(|p| (g.op, p)));
            }
            Err(why) => unchecked.push(why),
        }
    }
    Ok(unchecked)
}

/// One grant read back at its revision: what is wrong with it (nothing
/// when empty), or why it could not be read.
async fn read_back(
    door: &Door,
    prefix: &[u8],
    g: &crate::checker::lease_grant::Grant,
) -> Result<Vec<String>, String> {
    let (Some(key), Some(lease), Some(at), Some(token)) = (&g.key, g.lease, g.revision, g.token)
    else {
        return Err(format!(
            "#{}: the grant has no key, lease or revision",
            g.op
        ));
    };
    let own = door
        .range(pb::RangeRequest {
            key: key.clone().into_bytes(),
            revision: at,
            ..Default::default()
        })
        .await;
    let first = door.range(first_created(prefix, at)).await;
    let (own, first) = match (own, first) {
        (Ok(own), Ok(first)) => (own, first),
        (Err(e), _) | (_, Err(e)) => return Err(format!("#{} at revision {at}: {e}", g.op)),
    };
    let mut problems = Vec::new();
    match own.kvs.first() {
        None => problems.push(format!(
            "granted at revision {at}, but key {key} (lease {lease:x}) was gone by then: the \
             cluster had revoked or expired the lease before the grant"
        )),
        Some(kv) if kv.lease != lease || u64::try_from(kv.create_revision).ok() != Some(token) => {
            problems.push(format!(
                "granted at revision {at} with token {token} on lease {lease:x}, but key {key} \
                 there has create revision {} and lease {:x}",
                kv.create_revision, kv.lease
            ));
        }
        Some(_) => {}
    }
    if let Some(kv) = first.kvs.first() {
        if u64::try_from(kv.create_revision).is_ok_and(|c| c < token) {
            problems.push(format!(
                "granted at revision {at} with token {token}, but key {} (created at {}) was \
                 older and still there: not the owner",
                String::from_utf8_lossy(&kv.key),
                kv.create_revision
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_end_past_the_prefix() {
        assert_eq!(prefix_end(b"jepsen/lock/"), b"jepsen/lock0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
        let q = first_created(b"p/", 7);
        assert_eq!((q.limit, q.revision), (1, 7));
        assert_eq!(q.range_end, b"p0".to_vec());
    }
}
