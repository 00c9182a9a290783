//! Control of a real cluster: `raftlock serve` processes (or, with
//! embedded clients, `raftlock-jepsen member` processes) on free loopback
//! ports, every inter-node link through a harness-owned proxy.
//!
//! - [`setup`]: the binary's location, free ports, the cluster TOML;
//! - [`process`]: one member's process (kill -9, SIGSTOP/SIGCONT, restart);
//! - [`net`]: the per-link proxies and partitions built from them;
//! - [`roster`]: which ids are members now (the `membership` nemesis
//!   adds spare ids and removes members at run time);
//! - [`disk`]: data directories on tmpfs mounts, for the `disk-fill`
//!   nemesis's real full disk.

pub mod disk;
pub mod net;
pub use raftlock_testkit::process;
pub mod roster;
pub mod setup;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::Mutex;

use crate::api::{Api, Reply};
use disk::DataDisks;
use net::Net;
use process::{NodeProcess, NodeSpec};
use roster::Roster;
pub use setup::{default_member_bin, default_raftlock_bin, ClusterTiming};

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Members (3 or 5 make sense).
    pub nodes: usize,
    /// Spare ids (`nodes + 1 ..= nodes + spares`) with ports and link
    /// proxies but no process and not in the config: the `membership`
    /// nemesis adds them with `--join`, as the same kind of process as the
    /// founders (`raftlock serve`, or `raftlock-jepsen member` with a
    /// control port).
    pub spares: usize,
    /// The `raftlock` binary.
    pub bin: PathBuf,
    /// `Some(raftlock-jepsen)`: every member (founders, and spares when
    /// they join) is a `raftlock-jepsen member` process with a control
    /// port (for embedded clients and the disk faults); `None`: `raftlock
    /// serve`.
    pub member_bin: Option<PathBuf>,
    /// With `member_bin`: the clients are embedded (they go through the
    /// control ports). Otherwise they use the HTTP API.
    pub embedded: bool,
    /// Where node logs and the cluster TOML are kept (the run directory).
    pub log_dir: PathBuf,
    /// Raft timing.
    pub timing: ClusterTiming,
    /// Every founder serves a ZooKeeper door (`zookeeper = { client_addr
    /// }` in its `[[members]]` entry), whichever kind of process it is.
    pub zookeeper: bool,
    /// Every founder serves an etcd door (`etcd = { client_addr }` in
    /// its `[[members]]` entry), whichever kind of process it is.
    pub etcd: bool,
    /// `Some(MiB)`: every member's data directory is a tmpfs of that size
    /// (needs root), for the `disk-fill` nemesis.
    pub data_tmpfs_mb: Option<u64>,
}

/// A running cluster. Dropping it kills every node (kill_on_drop) and
/// removes the data directories.
#[derive(Debug)]
pub struct Cluster {
    /// Every id the run may use: the founding members 1..=n, then the
    /// spares. The members now are in [`Cluster::roster`].
    pub ids: Vec<u64>,
    /// The members now: the founders at the start; the `membership`
    /// nemesis changes it.
    pub roster: Arc<Roster>,
    /// Membership changes completed (adds, removes) and failed.
    pub changes: ChangeCounts,
    /// The proxies between the members.
    pub net: Net,
    /// An API client for every member.
    pub api: Api,
    /// The ZooKeeper door (`host:port`) of every member that has one.
    pub zk_doors: BTreeMap<u64, String>,
    /// The etcd door (`host:port`) of every member that has one.
    pub etcd_doors: BTreeMap<u64, String>,
    /// With embedded clients: a client for every member's control
    /// endpoint (the same paths as the API, see [`crate::member`]).
    pub control: Option<Api>,
    /// With member processes: their control endpoints, for the disk
    /// faults ([`crate::member::fault`]); spares have theirs too.
    pub faults: Option<Api>,
    /// The member processes (spares too, not started); a tokio mutex
    /// because kill/stop await.
    procs: Mutex<BTreeMap<u64, NodeProcess>>,
    /// API and Raft address of every id (spares join with these).
    addrs: BTreeMap<u64, (SocketAddr, SocketAddr)>,
    /// Ids listed in the config file (1..=nodes).
    founders: usize,
    /// The tmpfs under each data directory, if any; unmounted on drop,
    /// after the processes are killed and before the scratch dir goes.
    disks: DataDisks,
    /// Data directories, removed when the cluster is dropped.
    scratch: tempfile::TempDir,
}

impl Cluster {
    /// Writes the config, starts the proxies and every member. Does not
    /// wait for a leader: see [`Cluster::wait_healthy`].
    pub async fn start(opts: &ClusterOptions) -> anyhow::Result<Cluster> {
        let bin = opts.member_bin.as_ref().unwrap_or(&opts.bin);
        anyhow::ensure!(
            bin.is_file(),
            "member binary not found at {} (build it first: cargo build -p raftlock-cli \
             -p raftlock-jepsen, or pass --raftlock-bin)",
            bin.display()
        );
        std::fs::create_dir_all(&opts.log_dir)
            .with_context(|| format!("creating {}", opts.log_dir.display()))?;
        let scratch = tempfile::Builder::new()
            .prefix("raftlock-jepsen-")
            .tempdir()
            .context("creating a scratch directory")?;
        anyhow::ensure!(
            !opts.embedded || opts.member_bin.is_some(),
            "embedded clients need member processes (member_bin)"
        );
        let total = opts.nodes + opts.spares;
        let ids: Vec<u64> = (1..=total as u64).collect();
        let disks = match opts.data_tmpfs_mb {
            Some(mb) => DataDisks::mount(ids.iter().map(|id| data_dir(&scratch, *id)), mb)?,
            None => DataDisks::default(),
        };
        let ports = if opts.member_bin.is_some() { 3 } else { 2 };
        let doors = if opts.zookeeper { opts.nodes } else { 0 };
        let etcd_doors = if opts.etcd { opts.nodes } else { 0 };
        let addrs =
            setup::free_addrs(ports * total + doors + etcd_doors).context("finding free ports")?;
        let zk_doors: BTreeMap<u64, String> = (1..=doors as u64)
            .zip(&addrs[ports * total..])
            .map(|(id, a)| (id, a.to_string()))
            .collect();
        let etcd_doors: BTreeMap<u64, String> = (1..=etcd_doors as u64)
            .zip(&addrs[ports * total + doors..])
            .map(|(id, a)| (id, a.to_string()))
            .collect();
        // Spares too: they join as the same kind of process.
        let controls: Option<Vec<SocketAddr>> = opts
            .member_bin
            .is_some()
            .then(|| addrs[2 * total..3 * total].to_vec());
        let all: BTreeMap<u64, (SocketAddr, SocketAddr)> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, (addrs[i], addrs[total + i])))
            .collect();
        let members: BTreeMap<u64, (SocketAddr, SocketAddr)> = all
            .iter()
            .filter(|(&id, _)| id <= opts.nodes as u64)
            .map(|(&id, &a)| (id, a))
            .collect();
        let mut config_text = setup::cluster_toml(&members, ".", &opts.timing);
        setup::add_zookeeper_doors(&mut config_text, &zk_doors);
        setup::add_etcd_doors(&mut config_text, &etcd_doors);
        let config = scratch.path().join("cluster.toml");
        std::fs::write(&config, &config_text).context("writing the cluster config")?;
        // A copy for the report (its data_dir is relative to the scratch dir).
        let _ = std::fs::write(opts.log_dir.join("cluster.toml"), &config_text);

        let raft_addrs: BTreeMap<u64, SocketAddr> =
            all.iter().map(|(&id, &(_, raft))| (id, raft)).collect();
        let net = Net::start(&raft_addrs)
            .await
            .context("starting link proxies")?;
        let mut procs = BTreeMap::new();
        for &id in &ids {
            let peers = ids
                .iter()
                .filter(|&&p| p != id)
                .filter_map(|&p| net.proxy_addr(id, p).map(|a| (p, a.to_string())))
                .collect();
            let control = controls
                .as_ref()
                .and_then(|c| c.get((id - 1) as usize).copied());
            let spec = NodeSpec {
                id,
                bin: if control.is_some() {
                    bin.clone()
                } else {
                    opts.bin.clone()
                },
                control,
                config: config.clone(),
                peers,
                extra: Vec::new(),
                log: opts.log_dir.join(format!("node-{id}.log")),
                cpu: None,
            };
            let mut node = NodeProcess::new(spec);
            if id <= opts.nodes as u64 {
                node.start()
                    .with_context(|| format!("starting node {id} ({})", bin.display()))?;
            }
            procs.insert(id, node);
        }
        let timeout = Duration::from_millis(opts.timing.leader_wait_ms + 3_000);
        let api = Api::new(
            all.values().map(|(a, _)| format!("http://{a}")).collect(),
            timeout,
        );
        let faults = controls.map(|c| {
            let urls = c.iter().map(|a| format!("http://{a}")).collect();
            Api::new(urls, timeout)
        });
        let control = faults.clone().filter(|_| opts.embedded);
        Ok(Cluster {
            roster: Arc::new(Roster::new(members.keys().copied())),
            changes: ChangeCounts::default(),
            ids,
            zk_doors,
            etcd_doors,
            addrs: all,
            founders: opts.nodes,
            net,
            api,
            control,
            faults,
            procs: Mutex::new(procs),
            disks,
            scratch,
        })
    }

    /// Waits until every member answers `/v1/health` with 200 and all
    /// agree on the leader; returns it, or says what is still wrong.
    pub async fn wait_healthy(&self, timeout: Duration) -> Result<u64, String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let problem = match self.health_problem().await {
                Ok(leader) => return Ok(leader),
                Err(p) => p,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(problem);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn health_problem(&self) -> Result<u64, String> {
        let members = self.roster.members();
        {
            let mut procs = self.procs.lock().await;
            for id in &members {
                if !procs.get_mut(id).is_some_and(NodeProcess::is_running) {
                    return Err(format!("node {id} is not running"));
                }
            }
        }
        let mut leaders = Vec::new();
        for &id in &members {
            if !self.api.healthy(id).await {
                return Err(format!("node {id} is not healthy"));
            }
            match self.api.cluster(id).await {
                Reply::Ok(view) => leaders.push(view.leader),
                _ => return Err(format!("node {id} does not answer /v1/cluster")),
            }
        }
        match leaders.first() {
            Some(Some(l)) if leaders.iter().all(|x| *x == Some(*l)) => Ok(*l),
            _ => Err(format!("members disagree on the leader: {leaders:?}")),
        }
    }

    /// The leader as the members see it: the one reported with the highest
    /// term by any reachable member.
    pub async fn leader(&self) -> Option<u64> {
        let mut best: Option<(u64, u64)> = None;
        for id in self.roster.members() {
            if let Reply::Ok(view) = self.api.cluster(id).await {
                if let Some(l) = view.leader {
                    if best.is_none_or(|(term, _)| view.term > term) {
                        best = Some((view.term, l));
                    }
                }
            }
        }
        best.map(|(_, l)| l)
    }

    /// kill -9 member `id`.
    pub async fn kill(&self, id: u64) {
        if let Some(p) = self.procs.lock().await.get_mut(&id) {
            p.kill9().await;
        }
    }

    /// Starts member `id` again (no-op while it runs).
    pub async fn restart(&self, id: u64) -> std::io::Result<()> {
        match self.procs.lock().await.get_mut(&id) {
            Some(p) => p.start(),
            None => Ok(()),
        }
    }

    /// Stops member `id` (SIGTERM, kill -9 after 5 s) and starts it again,
    /// as an operator restarts a member after a disk fault.
    pub async fn reboot(&self, id: u64) -> std::io::Result<()> {
        match self.procs.lock().await.get_mut(&id) {
            Some(p) => {
                p.stop(Duration::from_secs(5)).await;
                p.start()
            }
            None => Ok(()),
        }
    }

    /// SIGSTOP member `id`.
    pub async fn pause(&self, id: u64) -> nix::Result<()> {
        match self.procs.lock().await.get_mut(&id) {
            Some(p) => p.pause(),
            None => Ok(()),
        }
    }

    /// SIGCONT member `id`.
    pub async fn resume(&self, id: u64) -> nix::Result<()> {
        match self.procs.lock().await.get_mut(&id) {
            Some(p) => p.resume(),
            None => Ok(()),
        }
    }

    /// Undoes every process fault: resumes paused members and restarts
    /// killed ones (links are healed with [`Net::heal`]). Spares and
    /// removed members stay down.
    pub async fn heal_processes(&self) -> std::io::Result<()> {
        let members = self.roster.members();
        let mut procs = self.procs.lock().await;
        for (id, p) in procs.iter_mut() {
            if p.is_paused() {
                let _ = p.resume();
            }
            if members.contains(id) && !p.is_running() {
                p.start()?;
            }
        }
        Ok(())
    }

    /// True while member `id`'s process runs (paused or not).
    pub async fn running(&self, id: u64) -> bool {
        self.procs
            .lock()
            .await
            .get_mut(&id)
            .is_some_and(NodeProcess::is_running)
    }

    /// The members now.
    pub fn members(&self) -> Vec<u64> {
        self.roster.members()
    }

    /// Ids that are neither members nor running: ready to join.
    pub async fn spares(&self) -> Vec<u64> {
        let members = self.roster.members();
        let mut procs = self.procs.lock().await;
        let mut out = Vec::new();
        for (&id, p) in procs.iter_mut() {
            if !members.contains(&id) && !p.is_running() {
                out.push(id);
            }
        }
        out
    }

    /// Starts spare `id` as a new member with `--join` through the current
    /// members' APIs (with its addresses when the config file does not
    /// list it): `raftlock serve --join`, or `raftlock-jepsen member
    /// --join` in runs with member processes (which joins the same way).
    /// The process asks to be added and serves once it is a voter; it is
    /// not in the roster until the caller adds it.
    pub async fn start_joining(&self, id: u64) -> anyhow::Result<()> {
        let endpoints: Vec<String> = self
            .roster
            .members()
            .iter()
            .filter_map(|m| self.addrs.get(m))
            .map(|(api, _)| format!("http://{api}"))
            .collect();
        let mut extra = vec!["--join".to_string(), endpoints.join(",")];
        if id > self.founders as u64 {
            let (api, raft) = self
                .addrs
                .get(&id)
                .with_context(|| format!("no addresses for member {id}"))?;
            extra.extend([
                "--api-addr".to_string(),
                api.to_string(),
                "--raft-addr".to_string(),
                raft.to_string(),
            ]);
        }
        let mut procs = self.procs.lock().await;
        let p = procs
            .get_mut(&id)
            .with_context(|| format!("no member {id}"))?;
        p.spec.extra = extra;
        p.start()
            .with_context(|| format!("starting member {id} with --join"))
    }

    /// kill -9 a member that is no longer in the cluster and delete its
    /// data directory, so that it can only come back as a new member
    /// (through `--join`, with an empty disk).
    pub async fn retire(&self, id: u64) -> std::io::Result<()> {
        self.kill(id).await;
        let dir = data_dir(&self.scratch, id);
        if self.disks.is_mounted(&dir) {
            return disk::remove_contents(&dir);
        }
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Fills member `id`'s data directory (its tmpfs) to the last byte;
    /// the ballast's size. An error when the run has no tmpfs for it.
    pub async fn fill_disk(&self, id: u64) -> std::io::Result<u64> {
        self.disks.fill(&data_dir(&self.scratch, id)).await
    }

    /// Removes the ballast of [`fill_disk`](Self::fill_disk).
    pub fn free_disk(&self, id: u64) -> std::io::Result<()> {
        self.disks.free(&data_dir(&self.scratch, id))
    }

    /// Every exit the harness did not cause, so far, per member.
    pub async fn crashed(&self) -> Vec<(u64, String)> {
        let mut procs = self.procs.lock().await;
        let mut out = Vec::new();
        for (&id, p) in procs.iter_mut() {
            p.note_crash();
            out.extend(p.crashes.iter().map(|c| (id, c.clone())));
        }
        out
    }

    /// Incarnations started per member (restarts + 1).
    pub async fn starts(&self) -> BTreeMap<u64, u32> {
        let procs = self.procs.lock().await;
        procs.iter().map(|(&id, p)| (id, p.starts)).collect()
    }

    /// Stops every member gracefully (kill -9 after a grace period).
    pub async fn shutdown(&self) {
        let mut procs = self.procs.lock().await;
        for p in procs.values_mut() {
            p.stop(Duration::from_secs(5)).await;
        }
    }
}

/// Member `id`'s data directory (the config's `data_dir` is the scratch
/// directory; a member keeps its files under `node-{id}`).
fn data_dir(scratch: &tempfile::TempDir, id: u64) -> PathBuf {
    scratch.path().join(format!("node-{id}"))
}

/// Membership changes the harness made in one run.
#[derive(Debug, Default)]
pub struct ChangeCounts {
    /// Spares that became voters.
    pub adds: AtomicUsize,
    /// Members whose removal committed.
    pub removes: AtomicUsize,
    /// Changes that did not complete (see the nemesis's stderr).
    pub failed: AtomicUsize,
}

impl ChangeCounts {
    /// (adds, removes, failed) so far.
    pub fn get(&self) -> (usize, usize, usize) {
        (
            self.adds.load(Ordering::Relaxed),
            self.removes.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// The last `lines` lines of a node's log, for error messages.
pub fn log_tail(log_dir: &Path, id: u64, lines: usize) -> String {
    let text = std::fs::read_to_string(log_dir.join(format!("node-{id}.log"))).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
