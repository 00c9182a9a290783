//! etcd 3.4 over native gRPC (the `etcd-client` crate, tonic): its
//! fastest client, as Go's clientv3 would talk to it. One client (one
//! HTTP/2 connection) per member, shared by the sessions that prefer that
//! member; a lease per session; the server-side lock service (`Lock`
//! waits on the predecessor key only, like `concurrency.Mutex`).
//!
//! Built only with the `etcd-grpc` feature: the crate's build script runs
//! `protoc`, which CI does not install (bench/compare.sh does).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context};
use etcd_client::{
    Client, ConnectOptions, GetOptions, LeaseKeepAliveStream, LeaseKeeper, LockOptions, PutOptions,
    Txn, TxnOp,
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

    /// The lock service has no try-lock and no server-side wait limit:
    /// the wait is a client-side deadline; dropping the call cancels the
    /// RPC and the server withdraws the key.
    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        if wait.is_zero() {
            return Err(anyhow!("etcd's lock service has no try-lock"));
        }
        let lease = s.lease;
        let call = retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m);
            let name = lock.as_bytes().to_vec();
            async move {
                match c
                    .lock(name, Some(LockOptions::new().with_lease(lease)))
                    .await
                {
                    Ok(r) => Step::Done(r.key().to_vec()),
                    Err(e) => classify(e),
                }
            }
        });
        match tokio::time::timeout(wait, call).await {
            Err(_) => Ok(Acquired::TimedOut),
            Ok(r) => {
                let key = r?;
                if let Ok(mut keys) = s.keys.lock() {
                    keys.insert(lock.to_string(), key);
                }
                Ok(Acquired::Granted { token: None })
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
        retry(&s.member, self.members(), |m, _| {
            let mut c = self.client(m);
            let key = key.clone();
            async move {
                match c.unlock(key).await {
                    Ok(_) => Step::Done(()),
                    Err(e) => classify(e),
                }
            }
        })
        .await
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
