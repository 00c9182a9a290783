//! ZooKeeper's lock recipe (zookeeper.apache.org/doc/r3.8.0/recipes.html):
//! create an ephemeral sequential node under the lock's directory, list
//! the children; the lowest holds; otherwise set an exists-watch on the
//! immediate predecessor only and list again when it fires. Node names
//! carry a per-session tag (Curator's "protected" mode) so a create whose
//! answer was lost to a connection loss can find its node.
//!
//! A session is one `zookeeper-client` connection; the library pings the
//! server itself (every 3/20 of the session timeout when idle).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use tokio::sync::OnceCell;
use zookeeper_client as zk;

use super::{Acquired, Backend};
use crate::cluster::System;

/// Parent of every lock directory.
const ROOT: &str = "/raftlock-bench";
/// Marks a lock node among a directory's children.
const MARK: &str = "-lock-";
/// Longest a single call keeps retrying over connection losses.
const RETRY_FOR: Duration = super::RETRY_FOR;

#[derive(Clone)]
pub struct Zookeeper {
    servers: Arc<Vec<String>>,
    /// Lock directories known to exist (created once, persistent).
    dirs: Arc<Mutex<HashSet<String>>>,
    admin: Arc<OnceCell<zk::Client>>,
}

pub struct Session {
    client: zk::Client,
    tag: String,
    /// Lock name → our node's path.
    held: Mutex<HashMap<String, String>>,
}

fn dir_of(lock: &str) -> String {
    format!("{ROOT}/{lock}")
}

/// The sequence number ZooKeeper appended (the last 10 characters).
fn seq_of(name: &str) -> Option<u64> {
    let (_, tail) = name.rsplit_once(MARK)?;
    tail.parse().ok()
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral_seq() -> zk::CreateOptions<'static> {
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all())
}

fn random_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Errors after which the request may or may not have applied and the
/// client reconnects by itself: a lost connection, an I/O error on it
/// (reset by a killed server), a timeout.
fn transient(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::ConnectionLoss | zk::Error::Custom(_) | zk::Error::Timeout
    )
}

/// Retries `op` over transient errors.
async fn again<T, F, Fut>(mut op: F) -> Result<T, zk::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zk::Error>>,
{
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match op().await {
            Err(e) if transient(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

impl Zookeeper {
    pub fn new(addrs: &[String]) -> Self {
        Self {
            servers: Arc::new(addrs.to_vec()),
            dirs: Arc::new(Mutex::new(HashSet::new())),
            admin: Arc::new(OnceCell::new()),
        }
    }

    /// The connect string with `first` first: the library tries servers in
    /// order on the first connect, then cycles through the rest.
    fn connect_string(&self, first: usize) -> String {
        let n = self.servers.len();
        (0..n)
            .map(|i| self.servers[(first + i) % n].clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    async fn connect(&self, servers: &str, ttl: Duration) -> anyhow::Result<zk::Client> {
        let connect = zk::Client::connector()
            .with_session_timeout(ttl)
            .connect(servers);
        tokio::time::timeout(RETRY_FOR, connect)
            .await
            .context("zookeeper connect timed out")?
            .with_context(|| format!("zookeeper connect to {servers}"))
    }

    async fn ensure_dir(&self, client: &zk::Client, dir: &str) -> anyhow::Result<()> {
        if self.dirs.lock().is_ok_and(|d| d.contains(dir)) {
            return Ok(());
        }
        for path in [ROOT, dir] {
            match again(|| client.create(path, &[], &persistent())).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => bail!("create {path}: {e}"),
            }
        }
        if let Ok(mut d) = self.dirs.lock() {
            d.insert(dir.to_string());
        }
        Ok(())
    }

    /// Our lock nodes' names under `dir`, sorted by sequence.
    async fn lockers(client: &zk::Client, dir: &str) -> anyhow::Result<Vec<(u64, String)>> {
        let children = again(|| client.list_children(dir))
            .await
            .with_context(|| format!("list {dir}"))?;
        let mut v: Vec<(u64, String)> = children
            .into_iter()
            .filter_map(|c| seq_of(&c).map(|s| (s, c)))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Creates our node; after a connection loss, finds it by our tag.
    async fn create_node(&self, s: &Session, dir: &str) -> anyhow::Result<String> {
        let prefix = format!("{dir}/_c_{}{MARK}", s.tag);
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            match s.client.create(&prefix, &[], &ephemeral_seq()).await {
                Ok((_, seq)) => return Ok(format!("{prefix}{seq}")),
                Err(e) if transient(&e) && Instant::now() < deadline => {
                    let mine = Self::lockers(&s.client, dir)
                        .await?
                        .into_iter()
                        .find(|(_, name)| name.contains(&s.tag));
                    if let Some((_, name)) = mine {
                        return Ok(format!("{dir}/{name}"));
                    }
                }
                Err(e) => bail!("create {prefix}: {e}"),
            }
        }
    }

    async fn admin(&self) -> anyhow::Result<&zk::Client> {
        self.admin
            .get_or_try_init(|| async {
                let servers = self.connect_string(0);
                self.connect(&servers, Duration::from_secs(30)).await
            })
            .await
    }
}

impl Backend for Zookeeper {
    type Session = Session;

    fn system(&self) -> System {
        System::Zookeeper
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let client = self.connect(&self.connect_string(member), ttl).await?;
        Ok(Session {
            client,
            tag: random_tag(),
            held: Mutex::new(HashMap::new()),
        })
    }

    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        let deadline = Instant::now() + wait;
        let dir = dir_of(lock);
        self.ensure_dir(&s.client, &dir).await?;
        // A node this session still has (its release failed): the same
        // node again, as raftlock and etcd do for a repeated acquire.
        let kept = s.held.lock().ok().and_then(|h| h.get(lock).cloned());
        let me = match kept {
            Some(path) => path,
            None => self.create_node(s, &dir).await?,
        };
        let my_name = me.rsplit('/').next().unwrap_or_default().to_string();
        loop {
            let lockers = Self::lockers(&s.client, &dir).await?;
            let pos = lockers
                .iter()
                .position(|(_, n)| *n == my_name)
                .ok_or_else(|| anyhow!("{me} vanished (session expired?)"))?;
            if pos == 0 {
                if let Ok(mut held) = s.held.lock() {
                    held.insert(lock.to_string(), me);
                }
                return Ok(Acquired::Granted {
                    token: Some(lockers[0].0),
                });
            }
            let pred = format!("{dir}/{}", lockers[pos - 1].1);
            let watcher = match s.client.check_and_watch_stat(&pred).await {
                Ok((None, _)) => continue,
                Ok((Some(_), watcher)) => watcher,
                Err(e) if transient(&e) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Err(e) => bail!("watch {pred}: {e}"),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, watcher.changed()).await.is_err() {
                match again(|| s.client.delete(&me, None)).await {
                    Ok(()) | Err(zk::Error::NoNode) => return Ok(Acquired::TimedOut),
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
                match client.delete(path, None).await {
                    // A retry after a delete that did apply.
                    Err(zk::Error::NoNode) if retry => Ok(()),
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

    async fn keepalive(&self, _s: &Session) -> anyhow::Result<()> {
        Ok(())
    }

    fn self_keepalive(&self) -> bool {
        true
    }

    /// Dropping the last handle sends CloseSession; the ephemerals go.
    async fn close(&self, s: Session) -> anyhow::Result<()> {
        drop(s);
        Ok(())
    }

    async fn queue_len(&self, lock: &str) -> anyhow::Result<usize> {
        let admin = self.admin().await?;
        match Self::lockers(admin, &dir_of(lock)).await {
            Ok(v) => Ok(v.len()),
            Err(e) if e.root_cause().to_string().contains("not exist") => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Keeps a multi well under jute.maxbuffer (1 MiB).
    fn bulk_chunk(&self) -> usize {
        250
    }

    /// One multi: per lock its directory and our ephemeral sequential node.
    async fn bulk_hold(&self, s: &Session, locks: &[String]) -> anyhow::Result<()> {
        self.ensure_dir(&s.client, ROOT).await?;
        let mut multi = s.client.new_multi_writer();
        for lock in locks {
            let dir = dir_of(lock);
            multi.add_create(&dir, &[], &persistent())?;
            multi.add_create(&format!("{dir}/_c_{}{MARK}", s.tag), &[], &ephemeral_seq())?;
        }
        multi
            .commit()
            .await
            .map_err(|e| anyhow!("multi create: {e}"))?;
        Ok(())
    }

    async fn serves_on(&self, member: usize, lock: &str) -> bool {
        let Some(server) = self.servers.get(member) else {
            return false;
        };
        let probe = async {
            let client = zk::Client::connector()
                .with_session_timeout(Duration::from_secs(4))
                .with_fail_eagerly()
                .connect(server)
                .await
                .ok()?;
            Self::lockers(&client, &dir_of(lock)).await.ok()
        };
        tokio::time::timeout(Duration::from_secs(2), probe)
            .await
            .ok()
            .flatten()
            .is_some_and(|v| !v.is_empty())
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
