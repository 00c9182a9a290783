//! etcd's v3 API over native gRPC (tonic, with the client stubs
//! `raftlock_etcd::pb` generates from etcd's protos): etcd's fastest
//! client, as Go's clientv3 would talk to it. The same client measures a
//! real etcd (`etcd`) and raftlock's etcd door (`raftlock-etcd`). One
//! HTTP/2 connection per member, shared by the sessions that prefer that
//! member; a lease per session; the lock is clientv3's
//! `concurrency.Mutex` recipe run here, as a Go program would run it:
//! one txn puts `{name}/{lease hex}` if absent and reads the oldest key
//! under `{name}/` (the holder); a waiter watches only the newest key
//! older than its own for deletion. An uncontended acquire is that one
//! txn and a release one delete. (etcd's `Lock` RPC, which the JSON
//! gateway row uses, runs the same recipe inside the server through a
//! loopback client, with a session and extra reads per call: slower.)

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context};
use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::range_request::{SortOrder, SortTarget};
use pb::request_op::Request;
use pb::response_op::Response;
use pb::watch_client::WatchClient;
use raftlock_etcd::pb::etcdserverpb as pb;
use raftlock_etcd::pb::mvccpb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::transport::{Channel, Endpoint};
use tonic::Streaming;

use super::{retry, Acquired, Backend, Step};
use crate::cluster::System;

const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The etcd clients of one member (one HTTP/2 connection).
#[derive(Clone)]
struct Client {
    kv: KvClient<Channel>,
    watch: WatchClient<Channel>,
    lease: LeaseClient<Channel>,
}

#[derive(Clone)]
pub struct EtcdGrpc {
    /// One client per member, in member order.
    clients: Arc<Vec<Client>>,
    admin: Arc<AtomicUsize>,
    /// `etcd`, or `raftlock-etcd` (raftlock's etcd door).
    system: System,
}

/// A lease's keepalive stream: the requests' sender and the answers.
type Keeper = (
    mpsc::Sender<pb::LeaseKeepAliveRequest>,
    Streaming<pb::LeaseKeepAliveResponse>,
);

pub struct Session {
    lease: i64,
    member: AtomicUsize,
    /// Lock name → the key the lock service created (needed to unlock).
    keys: Mutex<HashMap<String, Vec<u8>>>,
    /// This lease's keepalive stream, opened on first use.
    keeper: tokio::sync::Mutex<Option<Keeper>>,
}

/// What a failed call means: the member is unreachable (try another), or
/// etcd said no for a reason worth retrying (no leader, timeout), or not.
fn classify<T>(s: tonic::Status) -> Step<T> {
    use tonic::Code;
    match s.code() {
        Code::Unavailable => Step::Rotate(s.message().to_string()),
        Code::DeadlineExceeded | Code::Aborted | Code::Internal | Code::Unknown => {
            Step::Again(s.message().to_string())
        }
        _ => Step::Fail(anyhow!("{:?}: {}", s.code(), s.message())),
    }
}

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

/// A count of the keys under `prefix`.
fn count_under(prefix: &[u8]) -> pb::RangeRequest {
    pb::RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        count_only: true,
        ..Default::default()
    }
}

fn revision(h: Option<&pb::ResponseHeader>) -> i64 {
    h.map_or(0, |h| h.revision)
}

fn put_op(key: Vec<u8>, lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(Request::RequestPut(pb::PutRequest {
            key,
            lease,
            ..Default::default()
        })),
    }
}

fn range_op(r: pb::RangeRequest) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(Request::RequestRange(r)),
    }
}

impl EtcdGrpc {
    pub async fn new(addrs: &[String], system: System) -> anyhow::Result<Self> {
        let mut clients = Vec::with_capacity(addrs.len());
        for a in addrs {
            let channel = Endpoint::from_shared(format!("http://{a}"))
                .with_context(|| format!("etcd gRPC address {a}"))?
                .connect_timeout(Duration::from_secs(2))
                .timeout(CALL_TIMEOUT)
                .connect()
                .await
                .with_context(|| format!("etcd gRPC connect to {a}"))?;
            clients.push(Client {
                kv: KvClient::new(channel.clone()),
                watch: WatchClient::new(channel.clone()),
                lease: LeaseClient::new(channel),
            });
        }
        Ok(Self {
            clients: Arc::new(clients),
            admin: Arc::new(AtomicUsize::new(0)),
            system,
        })
    }

    fn client(&self, m: usize) -> Client {
        self.clients[m % self.clients.len()].clone()
    }

    fn members(&self) -> usize {
        self.clients.len()
    }

    async fn count(&self, member: &AtomicUsize, lock: &str) -> anyhow::Result<usize> {
        let prefix = format!("{lock}/").into_bytes();
        retry(member, self.members(), |m, _| {
            let mut c = self.client(m).kv;
            let req = count_under(&prefix);
            async move {
                match c.range(req).await {
                    Ok(r) => Step::Done(r.into_inner().count.max(0) as usize),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }
}

/// Oldest key under the prefix (the holder): clientv3's `WithFirstCreate`.
fn first_created(prefix: &[u8]) -> pb::RangeRequest {
    pb::RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: SortOrder::Ascend as i32,
        sort_target: SortTarget::Create as i32,
        ..Default::default()
    }
}

impl EtcdGrpc {
    /// The Mutex's one txn: put our key (with the lease) if it is not
    /// there, else read it; either way read the holder. Returns our key's
    /// create revision, the holder's, and the revision the answer is at.
    async fn enqueue(
        &self,
        s: &Session,
        lock: &str,
        key: &[u8],
    ) -> anyhow::Result<(i64, i64, i64)> {
        let prefix = format!("{lock}/").into_bytes();
        let lease = s.lease;
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m).kv;
            let txn = pb::TxnRequest {
                compare: vec![pb::Compare {
                    result: CompareResult::Equal as i32,
                    target: CompareTarget::Create as i32,
                    key: key.to_vec(),
                    range_end: Vec::new(),
                    target_union: Some(TargetUnion::CreateRevision(0)),
                }],
                success: vec![
                    put_op(key.to_vec(), lease),
                    range_op(first_created(&prefix)),
                ],
                failure: vec![
                    range_op(pb::RangeRequest {
                        key: key.to_vec(),
                        ..Default::default()
                    }),
                    range_op(first_created(&prefix)),
                ],
            };
            async move {
                let r = match c.txn(txn).await {
                    Ok(r) => r.into_inner(),
                    Err(e) => return classify(e),
                };
                let at = revision(r.header.as_ref());
                let created = |i: usize| match r.responses.get(i).and_then(|o| o.response.as_ref())
                {
                    Some(Response::ResponseRange(g)) => g.kvs.first().map(|kv| kv.create_revision),
                    _ => None,
                };
                let mine = if r.succeeded { Some(at) } else { created(0) };
                match (mine, created(1)) {
                    (Some(mine), Some(holder)) => Step::Done((mine, holder, at)),
                    _ => Step::Fail(anyhow!(
                        "lock txn on {lock}: our key or the holder is missing"
                    )),
                }
            }
        })
        .await
    }

    /// clientv3 `waitDeletes`: until no key under the prefix is older than
    /// ours, watch the newest older one for its deletion.
    async fn wait_predecessors(
        &self,
        s: &Session,
        lock: &str,
        mine: i64,
        mut at: i64,
    ) -> anyhow::Result<()> {
        let prefix = format!("{lock}/").into_bytes();
        loop {
            let last_older = retry(&s.member, self.members(), |m, _| {
                let mut c = self.client(m).kv;
                let req = pb::RangeRequest {
                    key: prefix.clone(),
                    range_end: prefix_end(&prefix),
                    limit: 1,
                    sort_order: SortOrder::Descend as i32,
                    sort_target: SortTarget::Create as i32,
                    max_create_revision: mine - 1,
                    ..Default::default()
                };
                async move {
                    match c.range(req).await {
                        Ok(r) => {
                            let r = r.into_inner();
                            Step::Done((
                                r.kvs.first().map(|kv| kv.key.clone()),
                                revision(r.header.as_ref()),
                            ))
                        }
                        Err(e) => classify(e),
                    }
                }
            })
            .await?;
            let (Some(pred), rev) = last_older else {
                return Ok(());
            };
            at = at.max(rev);
            // Watch from the revision the read saw: a delete after it shows.
            let m = s.member.load(std::sync::atomic::Ordering::Relaxed);
            let create = pb::WatchRequest {
                request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
                    pb::WatchCreateRequest {
                        key: pred,
                        start_revision: at,
                        ..Default::default()
                    },
                )),
            };
            // The request stream stays open while we watch.
            let requests = tokio_stream::once(create).chain(tokio_stream::pending());
            let mut stream = match self.client(m).watch.watch(requests).await {
                Ok(w) => w.into_inner(),
                Err(_) => continue,
            };
            // Until our predecessor is deleted, or the stream ends (the
            // member went away): then look again.
            while let Ok(Some(resp)) = stream.message().await {
                let deleted = resp
                    .events
                    .iter()
                    .any(|e| e.r#type == mvccpb::event::EventType::Delete as i32);
                if deleted || resp.canceled {
                    break;
                }
            }
        }
    }

    async fn delete(&self, s: &Session, key: Vec<u8>) -> anyhow::Result<()> {
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m).kv;
            let req = pb::DeleteRangeRequest {
                key: key.clone(),
                ..Default::default()
            };
            async move {
                match c.delete_range(req).await {
                    Ok(_) => Step::Done(()),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }
}

impl Backend for EtcdGrpc {
    type Session = Session;

    fn system(&self) -> System {
        self.system
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let m = AtomicUsize::new(member);
        let ttl = ttl.as_secs().max(1) as i64;
        let lease = retry(&m, self.members(), |m, _| {
            let mut c = self.client(m).lease;
            async move {
                match c.lease_grant(pb::LeaseGrantRequest { ttl, id: 0 }).await {
                    Ok(r) => Step::Done(r.into_inner().id),
                    Err(e) => classify(e),
                }
            }
        })
        .await?;
        Ok(Session {
            lease,
            member: m,
            keys: Mutex::new(HashMap::new()),
            keeper: tokio::sync::Mutex::new(None),
        })
    }

    /// clientv3 `concurrency.Mutex.Lock`; the wait is a client-side
    /// deadline, after which our key is deleted (as `Lock` does when its
    /// context ends).
    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        if wait.is_zero() {
            return Err(anyhow!("clientv3's Mutex has no try-lock here"));
        }
        let key = format!("{lock}/{:x}", s.lease).into_bytes();
        let wanted = async {
            let (mine, holder, at) = self.enqueue(s, lock, &key).await?;
            if holder != mine {
                self.wait_predecessors(s, lock, mine, at).await?;
            }
            anyhow::Ok(mine)
        };
        match tokio::time::timeout(wait, wanted).await {
            Ok(r) => {
                let mine = r?;
                if let Ok(mut keys) = s.keys.lock() {
                    keys.insert(lock.to_string(), key);
                }
                Ok(Acquired::Granted {
                    token: Some(mine as u64),
                })
            }
            Err(_) => {
                self.delete(s, key).await?;
                Ok(Acquired::TimedOut)
            }
        }
    }

    async fn release(&self, s: &Session, lock: &str) -> anyhow::Result<()> {
        let key = s
            .keys
            .lock()
            .ok()
            .and_then(|mut k| k.remove(lock))
            .ok_or_else(|| anyhow!("unlock {lock}: not held by this session"))?;
        self.delete(s, key).await
    }

    /// A plain put, no lease (the key outlives the session, as the other
    /// systems' put nodes do).
    async fn put(&self, s: &Session, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let key = format!("bench-put/{key}").into_bytes();
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m).kv;
            let req = pb::PutRequest {
                key: key.clone(),
                value: value.to_vec(),
                ..Default::default()
            };
            async move {
                match c.put(req).await {
                    Ok(_) => Step::Done(()),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }

    async fn keepalive(&self, s: &Session) -> anyhow::Result<()> {
        let mut slot = s.keeper.lock().await;
        if slot.is_none() {
            let m = s.member.load(std::sync::atomic::Ordering::Relaxed);
            let (tx, rx) = mpsc::channel(4);
            let answers = self
                .client(m)
                .lease
                .lease_keep_alive(ReceiverStream::new(rx))
                .await
                .context("keepalive stream")?
                .into_inner();
            *slot = Some((tx, answers));
        }
        let Some((keeper, stream)) = slot.as_mut() else {
            return Err(anyhow!("keepalive stream missing"));
        };
        let sent = keeper
            .send(pb::LeaseKeepAliveRequest { id: s.lease })
            .await
            .is_ok();
        let r = if sent {
            stream.message().await.ok().flatten()
        } else {
            None
        };
        match r {
            Some(resp) if resp.ttl > 0 => Ok(()),
            Some(_) => Err(anyhow!("keepalive: lease expired")),
            None => {
                // The stream broke (member gone): a new one next time.
                *slot = None;
                Err(anyhow!("keepalive stream closed"))
            }
        }
    }

    fn self_keepalive(&self) -> bool {
        false
    }

    async fn close(&self, s: Session) -> anyhow::Result<()> {
        let lease = s.lease;
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m).lease;
            async move {
                match c.lease_revoke(pb::LeaseRevokeRequest { id: lease }).await {
                    Ok(_) => Step::Done(()),
                    // Already expired.
                    Err(e) if e.message().contains("not found") => Step::Done(()),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }

    async fn queue_len(&self, lock: &str) -> anyhow::Result<usize> {
        self.count(&self.admin, lock).await
    }

    /// `--max-txn-ops` defaults to 128.
    fn bulk_chunk(&self) -> usize {
        128
    }

    /// One txn putting, for each lock, the key the lock service would
    /// have created for this lease (`{name}/{lease in hex}`).
    async fn bulk_hold(&self, s: &Session, locks: &[String]) -> anyhow::Result<()> {
        let lease = s.lease;
        let ops: Vec<pb::RequestOp> = locks
            .iter()
            .map(|l| put_op(format!("{l}/{lease:x}").into_bytes(), lease))
            .collect();
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m).kv;
            let txn = pb::TxnRequest {
                success: ops.clone(),
                ..Default::default()
            };
            async move {
                match c.txn(txn).await {
                    Ok(_) => Step::Done(()),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }

    async fn serves_on(&self, member: usize, lock: &str) -> bool {
        let req = count_under(format!("{lock}/").as_bytes());
        let mut c = self.client(member).kv;
        matches!(
            tokio::time::timeout(Duration::from_secs(2), c.range(req)).await,
            Ok(Ok(r)) if r.get_ref().count > 0
        )
    }
}
