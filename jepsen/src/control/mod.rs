//! Control of a real cluster: `raftlock serve` processes (or, with
//! embedded clients, `raftlock-jepsen member` processes) on free loopback
//! ports, every inter-node link through a harness-owned proxy.
//!
//! - [`setup`]: the binary's location, free ports, the cluster TOML;
//! - [`process`]: one member's process (kill -9, SIGSTOP/SIGCONT, restart);
//! - [`net`]: the per-link proxies and partitions built from them.

pub mod net;
pub mod process;
pub mod setup;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::Mutex;

use crate::api::{Api, Reply};
use net::Net;
use process::{NodeProcess, NodeSpec};
pub use setup::{default_member_bin, default_raftlock_bin, ClusterTiming};

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Members (3 or 5 make sense).
    pub nodes: usize,
    /// The `raftlock` binary.
    pub bin: PathBuf,
    /// `Some(raftlock-jepsen)`: members are `raftlock-jepsen member`
    /// processes whose clients are embedded (each also gets a control
    /// port); `None`: `raftlock serve`.
    pub embedded: Option<PathBuf>,
    /// Where node logs and the cluster TOML are kept (the run directory).
    pub log_dir: PathBuf,
    /// Raft timing.
    pub timing: ClusterTiming,
}

/// A running cluster. Dropping it kills every node (kill_on_drop) and
/// removes the data directories.
#[derive(Debug)]
pub struct Cluster {
    /// Member ids, 1..=n.
    pub ids: Vec<u64>,
    /// The proxies between the members.
    pub net: Net,
    /// An API client for every member.
    pub api: Api,
    /// With embedded clients: a client for every member's control
    /// endpoint (the same paths as the API, see [`crate::member`]).
    pub control: Option<Api>,
    /// The member processes; a tokio mutex because kill/stop await.
    procs: Mutex<BTreeMap<u64, NodeProcess>>,
    /// Data directories, removed when the cluster is dropped.
    _scratch: tempfile::TempDir,
}

impl Cluster {
    /// Writes the config, starts the proxies and every member. Does not
    /// wait for a leader: see [`Cluster::wait_healthy`].
    pub async fn start(opts: &ClusterOptions) -> anyhow::Result<Cluster> {
        let bin = opts.embedded.as_ref().unwrap_or(&opts.bin);
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
        let ids: Vec<u64> = (1..=opts.nodes as u64).collect();
        let ports = if opts.embedded.is_some() { 3 } else { 2 };
        let addrs = setup::free_addrs(ports * opts.nodes).context("finding free ports")?;
        let controls: Option<Vec<SocketAddr>> = opts
            .embedded
            .is_some()
            .then(|| addrs[2 * opts.nodes..].to_vec());
        let members: BTreeMap<u64, (SocketAddr, SocketAddr)> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, (addrs[i], addrs[opts.nodes + i])))
            .collect();
        let config_text = setup::cluster_toml(&members, ".", &opts.timing);
        let config = scratch.path().join("cluster.toml");
        std::fs::write(&config, &config_text).context("writing the cluster config")?;
        // A copy for the report (its data_dir is relative to the scratch dir).
        let _ = std::fs::write(opts.log_dir.join("cluster.toml"), &config_text);

        let raft_addrs: BTreeMap<u64, SocketAddr> =
            members.iter().map(|(&id, &(_, raft))| (id, raft)).collect();
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
            let spec = NodeSpec {
                id,
                bin: bin.clone(),
                control: controls.as_ref().map(|c| c[(id - 1) as usize]),
                config: config.clone(),
                peers,
                log: opts.log_dir.join(format!("node-{id}.log")),
            };
            let mut node = NodeProcess::new(spec);
            node.start()
                .with_context(|| format!("starting node {id} ({})", bin.display()))?;
            procs.insert(id, node);
        }
        let timeout = Duration::from_millis(opts.timing.leader_wait_ms + 3_000);
        let api = Api::new(
            members
                .values()
                .map(|(a, _)| format!("http://{a}"))
                .collect(),
            timeout,
        );
        let control = controls.map(|c| {
            let urls = c.iter().map(|a| format!("http://{a}")).collect();
            Api::new(urls, timeout)
        });
        Ok(Cluster {
            ids,
            net,
            api,
            control,
            procs: Mutex::new(procs),
            _scratch: scratch,
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
        {
            let mut procs = self.procs.lock().await;
            for (id, p) in procs.iter_mut() {
                if !p.is_running() {
                    return Err(format!("node {id} is not running"));
                }
            }
        }
        let mut leaders = Vec::new();
        for &id in &self.ids {
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
        for &id in &self.ids {
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
    /// killed ones (links are healed with [`Net::heal`]).
    pub async fn heal_processes(&self) -> std::io::Result<()> {
        let mut procs = self.procs.lock().await;
        for p in procs.values_mut() {
            if p.is_paused() {
                let _ = p.resume();
            }
            if !p.is_running() {
                p.start()?;
            }
        }
        Ok(())
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

/// The last `lines` lines of a node's log, for error messages.
pub fn log_tail(log_dir: &Path, id: u64, lines: usize) -> String {
    let text = std::fs::read_to_string(log_dir.join(format!("node-{id}.log"))).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
