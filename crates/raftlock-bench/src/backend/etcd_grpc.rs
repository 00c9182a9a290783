//! etcd 3.4 over native gRPC (the `etcd-client` crate, tonic): its
//! fastest client, as Go's clientv3 would talk to it. One client (one
//! HTTP/2 connection) per member, shared by the sessions that prefer that
//! member; a lease per session; the lock is clientv3's
//! `concurrency.Mutex` recipe run here, as a Go program would run it:
//! one txn puts `{name}/{lease hex}` if absent and reads the oldest key
//! under `{name}/` (the holder); a waiter watches only the newest key
//! older than its own for deletion. An uncontended acquire is that one
//! txn and a release one delete. (etcd's `Lock` RPC, which the JSON
//! gateway row uses, runs the same recipe inside the server through a
//! loopback client, with a session and extra reads per call: slower.)
//!
//! Built only with the `etcd-grpc` feature: the crate's build script runs
//! `protoc`, which CI does not install (bench/compare.sh does).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};

use super::{retry, Acquired, Backend, Step};
use crate::cluster::System;

const CALL_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct EtcdGrpc {
    /// One client per member, in member order.
    clients: Arc<Vec<Client>>,
    admin: Arc<AtomicUsize>,
}

pub struct Session {
    lease: i64,
    member: AtomicUsize,
    /// Lock name → the key the lock service created (needed to unlock).
    keys: Mutex<HashMap<String, Vec<u8>>>,
    /// This lease's keepalive stream, opened on first use.
    keeper: tokio::sync::Mutex<Option<(LeaseKeeper, LeaseKeepAliveStream)>>,
}

/// What a failed call means: the member is unreachable (try another), or
/// etcd said no for a reason worth retrying (no leader, timeout), or not.
fn classify<T>(e: etcd_client::Error) -> Step<T> {
    use tonic::Code;
    match &e {
        etcd_client::Error::GRpcStatus(s) => match s.code() {
            Code::Unavailable => Step::Rotate(s.message().to_string()),
            Code::DeadlineExceeded | Code::Aborted | Code::Internal | Code::Unknown => {
                Step::Again(s.message().to_string())
            }
            _ => Step::Fail(anyhow!("{e}")),
        },
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            Step::Rotate(e.to_string())
        }
        _ => Step::Fail(anyhow!("{e}")),
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

impl EtcdGrpc {
    pub async fn new(addrs: &[String]) -> anyhow::Result<Self> {
        let mut clients = Vec::with_capacity(addrs.len());
        for a in addrs {
            let opts = ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(2))
                .with_timeout(CALL_TIMEOUT);
            let c = Client::connect([format!("http://{a}")], Some(opts))
                .await
                .with_context(|| format!("etcd gRPC connect to {a}"))?;
            clients.push(c);
        }
        Ok(Self {
            clients: Arc::new(clients),
            admin: Arc::new(AtomicUsize::new(0)),
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
            let mut c = self.client(m);
            let prefix = prefix.clone();
            async move {
                let opts = GetOptions::new()
                    .with_range(prefix_end(&prefix))
                    .with_count_only();
                match c.get(prefix, Some(opts)).await {
                    Ok(r) => Step::Done(r.count().max(0) as usize),
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }
}

/// Oldest key under the prefix (the holder): clientv3's `WithFirstCreate`.
fn first_created(prefix: &[u8]) -> GetOptions {
    GetOptions::new()
        .with_range(prefix_end(prefix))
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1)
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
            let mut c = self.client(m);
            let (key, prefix) = (key.to_vec(), prefix.clone());
            async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([
                        TxnOp::put(
                            key.clone(),
                            Vec::<u8>::new(),
                            Some(PutOptions::new().with_lease(lease)),
                        ),
                        TxnOp::get(prefix.clone(), Some(first_created(&prefix))),
                    ])
                    .or_else([
                        TxnOp::get(key.clone(), None),
                        TxnOp::get(prefix.clone(), Some(first_created(&prefix))),
                    ]);
                let r = match c.txn(txn).await {
                    Ok(r) => r,
                    Err(e) => return classify(e),
                };
                let at = r.header().map_or(0, |h| h.revision());
                let ops = r.op_responses();
                let mine = if r.succeeded() {
                    Some(at)
                } else {
                    match ops.first() {
                        Some(TxnOpResponse::Get(g)) => {
                            g.kvs().first().map(|kv| kv.create_revision())
                        }
                        _ => None,
                    }
                };
                let holder = match ops.get(1) {
                    Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
                    _ => None,
                };
                match (mine, holder) {
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
                let mut c = self.client(m);
                let prefix = prefix.clone();
                async move {
                    let opts = GetOptions::new()
                        .with_range(prefix_end(&prefix))
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_max_create_revision(mine - 1)
                        .with_limit(1);
                    match c.get(prefix, Some(opts)).await {
                        Ok(r) => Step::Done((
                            r.kvs().first().map(|kv| kv.key().to_vec()),
                            r.header().map_or(0, |h| h.revision()),
                        )),
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
            let mut stream = match self
                .client(m)
                .watch(pred, Some(WatchOptions::new().with_start_revision(at)))
                .await
            {
                Ok(w) => w,
                Err(_) => continue,
            };
            // Until our predecessor is deleted, or the stream ends (the
            // member went away): then look again.
            while let Ok(Some(resp)) = stream.message().await {
                let deleted = resp
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete);
                if deleted || resp.canceled() {
                    break;
                }
            }
        }
    }

    async fn delete(&self, s: &Session, key: Vec<u8>) -> anyhow::Result<()> {
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m);
            let key = key.clone();
            async move {
                match c.delete(key, None).await {
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
        System::Etcd
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let m = AtomicUsize::new(member);
        let ttl = ttl.as_secs().max(1) as i64;
        let lease = retry(&m, self.members(), |m, _| {
            let mut c = self.client(m);
            async move {
                match c.lease_grant(ttl, None).await {
                    Ok(r) => Step::Done(r.id()),
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
            let mut c = self.client(m);
            let (key, value) = (key.clone(), value.to_vec());
            async move {
                match c.put(key, value, None).await {
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
            let pair = self
                .client(m)
                .lease_keep_alive(s.lease)
                .await
                .context("keepalive stream")?;
            *slot = Some(pair);
        }
        let Some((keeper, stream)) = slot.as_mut() else {
            return Err(anyhow!("keepalive stream missing"));
        };
        let r = async {
            keeper.keep_alive().await?;
            stream.message().await
        }
        .await;
        match r {
            Ok(Some(resp)) if resp.ttl() > 0 => Ok(()),
            Ok(Some(_)) => Err(anyhow!("keepalive: lease expired")),
            Ok(None) | Err(_) => {
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
            let mut c = self.client(m);
            async move {
                match c.lease_revoke(lease).await {
                    Ok(_) => Step::Done(()),
                    // Already expired.
                    Err(e) if e.to_string().contains("not found") => Step::Done(()),
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
        let ops: Vec<TxnOp> = locks
            .iter()
            .map(|l| {
                TxnOp::put(
                    format!("{l}/{lease:x}"),
                    Vec::<u8>::new(),
                    Some(PutOptions::new().with_lease(lease)),
                )
            })
            .collect();
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m);
            let txn = Txn::new().and_then(ops.clone());
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
        let prefix = format!("{lock}/").into_bytes();
        let opts = GetOptions::new()
            .with_range(prefix_end(&prefix))
            .with_count_only();
        let mut c = self.client(member);
        matches!(
            tokio::time::timeout(Duration::from_secs(2), c.get(prefix, Some(opts))).await,
            Ok(Ok(r)) if r.count() > 0
        )
    }
}
