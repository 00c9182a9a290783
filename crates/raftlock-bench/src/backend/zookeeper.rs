//! ZooKeeper's lock recipe (zookeeper.apache.org/doc/r3.8.0/recipes.html):
//! create an ephemeral sequential node under the lock's directory, list
//! the children; the lowest holds; otherwise set an exists-watch on the
//! immediate predecessor only and list again when it fires. Node names
//! carry a per-session tag (Curator's "protected" mode) so a create whose
//! answer was lost to a connection loss can find its node.
//!
//! A session is one connection of raftlock's ZooKeeper client
//! (`raftlock_zookeeper::client`): the create and the first listing go
//! out in one write,
//! since ZooKeeper answers a session's requests in order (the listing
//! sees the create), which saves a round trip per acquire; the client
//! pings the server itself when the session is idle.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use tokio::sync::OnceCell;

use super::{Acquired, Backend};
use crate::cluster::System;
use raftlock_zookeeper::client::{create_request, Call, Client, Config, Error as ZkError};
use raftlock_zookeeper::wire::{
    CreateMode, ErrorCode, MultiOp, OpRequest, PathWatchRequest, ReplyBody,
};

/// Parent of every lock directory.
const ROOT: &str = "/raftlock-bench";
/// Parent of the put workload's nodes.
const PUT_ROOT: &str = "/raftlock-bench-put";
/// Marks a lock node among a directory's children.
const MARK: &str = "-lock-";
/// Longest a single call keeps retrying over connection losses.
const RETRY_FOR: Duration = super::RETRY_FOR;

#[derive(Clone)]
pub struct Zookeeper {
    /// ZooKeeper itself, or raftlock through its ZooKeeper door.
    system: System,
    servers: Arc<Vec<String>>,
    /// Directories known to exist (created once, persistent).
    dirs: Arc<Mutex<HashSet<String>>>,
    admin: Arc<OnceCell<Client>>,
}

pub struct Session {
    client: Client,
    tag: String,
    /// Lock name → our node's path.
    held: Mutex<HashMap<String, String>>,
    /// Put nodes this session has created.
    put_nodes: Mutex<HashSet<String>>,
}

fn dir_of(lock: &str) -> String {
    format!("{ROOT}/{lock}")
}

/// The sequence number ZooKeeper appended (the last 10 characters).
fn seq_of(name: &str) -> Option<u64> {
    let (_, tail) = name.rsplit_once(MARK)?;
    tail.parse().ok()
}

fn random_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Our lock nodes among `children`, sorted by sequence.
fn lockers(children: Vec<String>) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = children
        .into_iter()
        .filter_map(|c| seq_of(&c).map(|s| (s, c)))
        .collect();
    v.sort_unstable();
    v
}

/// Retries `op` over transient errors (the request may or may not have
/// applied; callers make that harmless).
async fn again<T, F, Fut>(mut op: F) -> Result<T, ZkError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ZkError>>,
{
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match op().await {
            Err(e) if e.transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

impl Zookeeper {
    pub fn new(addrs: &[String]) -> Self {
        Self::of(System::Zookeeper, addrs)
    }

    /// The same client and recipe against `system`'s ZooKeeper ports.
    pub fn of(system: System, addrs: &[String]) -> Self {
        Self {
            system,
            servers: Arc::new(addrs.to_vec()),
            dirs: Arc::new(Mutex::new(HashSet::new())),
            admin: Arc::new(OnceCell::new()),
        }
    }

    async fn connect(&self, first: usize, ttl: Duration) -> anyhow::Result<Client> {
        let config = Config {
            first,
            connect_for: RETRY_FOR,
            ..Config::new(self.servers.to_vec(), ttl)
        };
        Client::connect(config)
            .await
            .with_context(|| format!("zookeeper connect to {}", self.servers.join(",")))
    }

    /// Creates `path` and its parents (persistent, empty) once per run.
    async fn ensure_dir(&self, client: &Client, path: &str) -> anyhow::Result<()> {
        if self.dirs.lock().is_ok_and(|d| d.contains(path)) {
            return Ok(());
        }
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            match again(|| client.create(&at, &[], CreateMode::Persistent)).await {
                Ok(_) | Err(ZkError::Code(ErrorCode::NodeExists)) => {}
                Err(e) => bail!("create {at}: {e}"),
            }
        }
        if let Ok(mut d) = self.dirs.lock() {
            d.insert(path.to_string());
        }
        Ok(())
    }

    async fn list(client: &Client, dir: &str) -> anyhow::Result<Vec<(u64, String)>> {
        let children = again(|| client.children(dir))
            .await
            .with_context(|| format!("list {dir}"))?;
        Ok(lockers(children))
    }

    /// Creates our node and lists the directory in one write; after a
    /// connection loss, finds the node by our tag.
    async fn create_and_list(
        &self,
        s: &Session,
        dir: &str,
    ) -> anyhow::Result<(String, Vec<(u64, String)>)> {
        let prefix = format!("{dir}/_c_{}{MARK}", s.tag);
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let calls = vec![
                Call::new(OpRequest::Create(create_request(
                    &prefix,
                    &[],
                    CreateMode::EphemeralSequential,
                ))),
                Call::new(OpRequest::GetChildren(PathWatchRequest {
                    path: dir.to_string(),
                    watch: false,
                })),
            ];
            let err = match s.client.send(calls).await {
                Ok(mut sent) => {
                    let list = sent.pop();
                    let create = sent.pop();
                    let (Some(create), Some(list)) = (create, list) else {
                        bail!("create {prefix}: no reply slot");
                    };
                    let created = s.client.answer(create).await;
                    let listed = s.client.answer(list).await;
                    match (created, listed) {
                        (
                            Ok(ReplyBody::Create { path }),
                            Ok(ReplyBody::GetChildren { children }),
                        ) => {
                            return Ok((path, lockers(children)));
                        }
                        (Ok(ReplyBody::Create { path }), _) => {
                            return Ok((path, Self::list(&s.client, dir).await?));
                        }
                        (Ok(other), _) => bail!("create {prefix}: unexpected answer {other:?}"),
                        (Err(e), _) => e,
                    }
                }
                Err(e) => e,
            };
            if !err.transient() || Instant::now() > deadline {
                bail!("create {prefix}: {err}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let all = Self::list(&s.client, dir).await?;
            if let Some((_, name)) = all.iter().find(|(_, n)| n.contains(&s.tag)) {
                let path = format!("{dir}/{name}");
                return Ok((path, all));
            }
        }
    }

    async fn admin(&self) -> anyhow::Result<&Client> {
        self.admin
            .get_or_try_init(|| self.connect(0, Duration::from_secs(30)))
            .await
    }
}

impl Backend for Zookeeper {
    type Session = Session;

    fn system(&self) -> System {
        self.system
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let client = self.connect(member, ttl).await?;
        Ok(Session {
            client,
            tag: random_tag(),
            held: Mutex::new(HashMap::new()),
            put_nodes: Mutex::new(HashSet::new()),
        })
    }

    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        let deadline = Instant::now() + wait;
        let dir = dir_of(lock);
        self.ensure_dir(&s.client, &dir).await?;
        // A node kept from an earlier acquire of ours (a retried call).
        let kept = s.held.lock().ok().and_then(|h| h.get(lock).cloned());
        let (me, mut listed) = match kept {
            Some(path) => (path, None),
            None => {
                let (path, all) = self.create_and_list(s, &dir).await?;
                (path, Some(all))
            }
        };
        let my_name = me.rsplit('/').next().unwrap_or_default().to_string();
        loop {
            let all = match listed.take() {
                Some(v) => v,
                None => Self::list(&s.client, &dir).await?,
            };
            let pos = all
                .iter()
                .position(|(_, n)| *n == my_name)
                .ok_or_else(|| anyhow!("{me} vanished (session expired?)"))?;
            if pos == 0 {
                if let Ok(mut held) = s.held.lock() {
                    held.insert(lock.to_string(), me);
                }
                return Ok(Acquired::Granted {
                    token: Some(all[0].0),
                });
            }
            let pred = format!("{dir}/{}", all[pos - 1].1);
            let watch = match s.client.exists_watch(&pred).await {
                Ok(None) => continue,
                Ok(Some(w)) => w,
                Err(e) if e.transient() => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Err(e) => bail!("watch {pred}: {e}"),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            // Fired or dropped (connection lost): either way, look again.
            if tokio::time::timeout(left, watch).await.is_err() {
                match again(|| s.client.delete(&me)).await {
                    Ok(()) | Err(ZkError::Code(ErrorCode::NoNode)) => {
                        return Ok(Acquired::TimedOut)
                    }
                    Err(e) => bail!("withdraw {me}: {e}"),
                }
            }
        }
    }

    async fn release(&self, s: &Session, lock: &str) -> anyhow::Result<()> {
        // Forgotten only once the delete is known to have happened.
        let path = s
            .held
            .lock()
            .ok()
            .and_then(|h| h.get(lock).cloned())
            .ok_or_else(|| anyhow!("release {lock}: not held by this session"))?;
        let mut first = true;
        let r = again(|| {
            let retry = !first;
            first = false;
            let client = &s.client;
            let path = &path;
            async move {
                match client.delete(path).await {
                    // A retry after a delete that did apply.
                    Err(ZkError::Code(ErrorCode::NoNode)) if retry => Ok(()),
                    other => other,
                }
            }
        })
        .await;
        if r.is_ok() {
            if let Ok(mut held) = s.held.lock() {
                held.remove(lock);
            }
        }
        r.with_context(|| format!("delete {path}"))
    }

    /// setData on the key's node; the first put creates it (persistent).
    async fn put(&self, s: &Session, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let path = format!("{PUT_ROOT}/{key}");
        let known = s.put_nodes.lock().is_ok_and(|p| p.contains(&path));
        if !known {
            self.ensure_dir(&s.client, PUT_ROOT).await?;
            match again(|| s.client.create(&path, value, CreateMode::Persistent)).await {
                Ok(_) | Err(ZkError::Code(ErrorCode::NodeExists)) => {}
                Err(e) => bail!("create {path}: {e}"),
            }
            if let Ok(mut p) = s.put_nodes.lock() {
                p.insert(path);
            }
            return Ok(());
        }
        again(|| s.client.set_data(&path, value))
            .await
            .map(drop)
            .with_context(|| format!("set {path}"))
    }

    async fn keepalive(&self, _s: &Session) -> anyhow::Result<()> {
        Ok(())
    }

    fn self_keepalive(&self) -> bool {
        true
    }

    /// CloseSession: the ephemerals go.
    async fn close(&self, s: Session) -> anyhow::Result<()> {
        s.client.close().await;
        Ok(())
    }

    async fn queue_len(&self, lock: &str) -> anyhow::Result<usize> {
        let admin = self.admin().await?;
        let dir = dir_of(lock);
        match again(|| admin.children(&dir)).await {
            Ok(v) => Ok(lockers(v).len()),
            Err(ZkError::Code(ErrorCode::NoNode)) => Ok(0),
            Err(e) => Err(anyhow!("list {}: {e}", dir_of(lock))),
        }
    }

    /// Keeps a multi well under jute.maxbuffer (1 MiB).
    fn bulk_chunk(&self) -> usize {
        250
    }

    /// One multi: per lock its directory and our ephemeral sequential node.
    async fn bulk_hold(&self, s: &Session, locks: &[String]) -> anyhow::Result<()> {
        self.ensure_dir(&s.client, ROOT).await?;
        let mut ops = Vec::with_capacity(2 * locks.len());
        for lock in locks {
            let dir = dir_of(lock);
            let node = format!("{dir}/_c_{}{MARK}", s.tag);
            ops.push(MultiOp::Create(create_request(
                &dir,
                &[],
                CreateMode::Persistent,
            )));
            ops.push(MultiOp::Create(create_request(
                &node,
                &[],
                CreateMode::EphemeralSequential,
            )));
        }
        s.client
            .multi(ops)
            .await
            .map(drop)
            .map_err(|e| anyhow!("multi create: {e}"))
    }

    async fn serves_on(&self, member: usize, lock: &str) -> bool {
        let Some(server) = self.servers.get(member) else {
            return false;
        };
        let probe = async {
            let config = Config {
                connect_for: Duration::from_secs(1),
                ..Config::new(vec![server.clone()], Duration::from_secs(4))
            };
            let client = Client::connect(config).await.ok()?;
            let r = client.children(&dir_of(lock)).await.ok();
            client.close().await;
            r
        };
        tokio::time::timeout(Duration::from_secs(2), probe)
            .await
            .ok()
            .flatten()
            .is_some_and(|v| !lockers(v).is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::seq_of;

    #[test]
    fn sequence_numbers() {
        assert_eq!(seq_of("_c_00ab-lock-0000000042"), Some(42));
        assert_eq!(seq_of("other"), None);
    }
}
