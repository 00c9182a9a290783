//! Three-member clusters of each system on 127.0.0.1, as child processes
//! of the bench: start on free ports in a scratch directory, find the
//! leader, kill -9 a member, restart it, stop everything.
//!
//! Every child gets PR_SET_PDEATHSIG=SIGKILL and `kill_on_drop`, and its
//! pid goes to a pid file the calling script's trap reads, so nothing
//! outlives the run however it ends.

pub mod etcd;
pub mod raftlock;
pub mod zookeeper;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

/// How long a fresh cluster gets to elect a leader and answer.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// SIGTERM grace before SIGKILL on stop.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Raftlock,
    /// etcd over native gRPC (its fastest client).
    Etcd,
    /// etcd through its JSON gateway (a secondary row).
    #[value(name = "etcd-gateway")]
    #[serde(rename = "etcd-gateway")]
    EtcdGateway,
    Zookeeper,
    /// raftlock through its ZooKeeper door, with the ZooKeeper rows'
    /// client and recipe.
    #[value(name = "raftlock-zk")]
    #[serde(rename = "raftlock-zk")]
    RaftlockZk,
    /// raftlock through its etcd door, with the etcd row's gRPC client
    /// and recipe.
    #[value(name = "raftlock-etcd")]
    #[serde(rename = "raftlock-etcd")]
    RaftlockEtcd,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Raftlock => "raftlock",
            System::Etcd => "etcd",
            System::EtcdGateway => "etcd-gateway",
            System::Zookeeper => "zookeeper",
            System::RaftlockZk => "raftlock-zk",
            System::RaftlockEtcd => "raftlock-etcd",
        }
    }
}

/// Where each system's programs are.
#[derive(Clone, Debug)]
pub struct Tools {
    pub raftlock: PathBuf,
    /// Extra `[cluster]` lines for raftlock's config ("key = value"), to
    /// try a tuning without editing code; empty = every default.
    pub raftlock_options: Vec<String>,
    pub etcd: PathBuf,
    pub java: PathBuf,
    pub zk_classpath: String,
}

/// How to (re)start one member.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub log: PathBuf,
}

pub struct Member {
    /// 1, 2, 3.
    pub id: u32,
    /// The port clients talk to (HTTP API, etcd client URL, ZooKeeper client port).
    pub client_port: u16,
    /// raftlock's HTTP API port (health, leader), also with clients on
    /// the ZooKeeper door; the client port for the others.
    pub api_port: u16,
    spawn: Spawn,
    child: Option<Child>,
    pid: Option<u32>,
}

impl Member {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }
    pub fn api_addr(&self) -> String {
        format!("127.0.0.1:{}", self.api_port)
    }
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }
}

pub struct Cluster {
    pub system: System,
    pub dir: PathBuf,
    pub members: Vec<Member>,
    http: reqwest::Client,
    pidfile: PathBuf,
    /// CPUs every member (and its restarts) is confined to; empty = any.
    cpus: Vec<usize>,
}

/// Ports are handed out once per run from a rising cursor below the
/// kernel's ephemeral range, each checked free by binding it.
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

pub fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    if NEXT_PORT.load(Ordering::Relaxed) == 0 {
        let base = 20_000 + (std::process::id() % 500) as u16 * 20;
        let _ = NEXT_PORT.compare_exchange(0, base, Ordering::Relaxed, Ordering::Relaxed);
    }
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let p = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        if p >= 32_000 {
            bail!("ran out of free ports below 32000");
        }
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            out.push(p);
        }
    }
    Ok(out)
}

impl Cluster {
    /// Starts a fresh three-member cluster in `dir` and waits until every
    /// member answers and a leader is known.
    pub async fn start(
        system: System,
        tools: &Tools,
        dir: &Path,
        pidfile: &Path,
        cpus: &[usize],
    ) -> anyhow::Result<Cluster> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let same = |specs: Vec<(u32, u16, Spawn)>| {
            specs
                .into_iter()
                .map(|(id, port, spawn)| (id, port, port, spawn))
                .collect::<Vec<_>>()
        };
        let specs = match system {
            System::Raftlock => raftlock::specs(tools, dir, raftlock::Door::None)?,
            System::RaftlockZk => raftlock::specs(tools, dir, raftlock::Door::Zookeeper)?,
            System::RaftlockEtcd => raftlock::specs(tools, dir, raftlock::Door::Etcd)?,
            System::Etcd | System::EtcdGateway => same(etcd::specs(tools, dir)?),
            System::Zookeeper => same(zookeeper::specs(tools, dir)?),
        };
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .context("http client")?;
        let mut cluster = Cluster {
            system,
            dir: dir.to_path_buf(),
            members: specs
                .into_iter()
                .map(|(id, client_port, api_port, spawn)| Member {
                    id,
                    client_port,
                    api_port,
                    spawn,
                    child: None,
                    pid: None,
                })
                .collect(),
            http,
            pidfile: pidfile.to_path_buf(),
            cpus: cpus.to_vec(),
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i)?;
        }
        cluster.wait_ready(START_TIMEOUT).await?;
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let m = &mut self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.spawn.log)
            .with_context(|| format!("cannot open {}", m.spawn.log.display()))?;
        let err = log.try_clone()?;
        let mut cmd = Command::new(&m.spawn.program);
        cmd.args(&m.spawn.args)
            .current_dir(&m.spawn.cwd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .kill_on_drop(true);
        let cpus = crate::pin::cpu_set(&self.cpus)?;
        // SAFETY: prctl and sched_setaffinity are plain system calls on
        // the child itself; the CPU set was built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
                if let Some(set) = &cpus {
                    nix::sched::sched_setaffinity(Pid::from_raw(0), set)
                        .map_err(std::io::Error::from)?;
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", m.spawn.program.display()))?;
        m.pid = child.id();
        if let Some(pid) = m.pid {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.pidfile)
            {
                let _ = writeln!(f, "{pid} {}", self.dir.display());
            }
        }
        m.child = Some(child);
        Ok(())
    }

    /// Live member pids, in member order.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.pid).collect()
    }

    pub fn addrs(&self) -> Vec<String> {
        self.members.iter().map(Member::addr).collect()
    }

    async fn member_ready(&self, i: usize) -> bool {
        let m = &self.members[i];
        match self.system {
            System::Raftlock | System::RaftlockZk | System::RaftlockEtcd => {
                raftlock::healthy(&self.http, m).await
            }
            System::Etcd | System::EtcdGateway => etcd::healthy(&self.http, m).await,
            System::Zookeeper => zookeeper::healthy(m).await,
        }
    }

    /// Polls until every running member answers and there is a leader.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            for (i, m) in self.members.iter_mut().enumerate() {
                if let Some(child) = m.child.as_mut() {
                    if let Some(status) = child.try_wait()? {
                        bail!(
                            "{} member {} exited during start-up ({status}); see {}",
                            self.system.name(),
                            i + 1,
                            m.spawn.log.display()
                        );
                    }
                }
            }
            let mut ready = true;
            for i in 0..self.members.len() {
                if self.members[i].child.is_some() && !self.member_ready(i).await {
                    ready = false;
                    break;
                }
            }
            if ready && self.leader().await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not become ready within {timeout:?}; logs in {}",
                    self.system.name(),
                    self.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Index of the current leader.
    pub async fn leader(&self) -> anyhow::Result<usize> {
        let found = match self.system {
            System::Raftlock | System::RaftlockZk | System::RaftlockEtcd => {
                raftlock::leader(&self.http, &self.members).await
            }
            System::Etcd | System::EtcdGateway => etcd::leader(&self.http, &self.members).await,
            System::Zookeeper => zookeeper::leader(&self.members).await,
        };
        found.with_context(|| format!("{}: no leader known", self.system.name()))
    }

    /// Waits for a leader other than `not` (after a kill).
    pub async fn wait_leader_change(&self, not: usize, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(l) = self.leader().await {
                if l != not {
                    return Some(l);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// SIGKILL, and reap.
    pub async fn kill9(&mut self, i: usize) {
        let m = &mut self.members[i];
        if let Some(pid) = m.pid.take() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        if let Some(mut child) = m.child.take() {
            let _ = child.wait().await;
        }
    }

    /// Starts member `i` again with the same arguments and data.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.spawn(i)
    }

    /// Bytes on disk under member `i`'s data directory.
    pub fn data_bytes(&self, i: usize) -> u64 {
        let id = self.members[i].id;
        let path = match self.system {
            System::Raftlock | System::RaftlockZk | System::RaftlockEtcd => {
                raftlock::data_dir(&self.dir, id)
            }
            System::Etcd | System::EtcdGateway | System::Zookeeper => {
                self.dir.join(format!("member-{id}"))
            }
        };
        dir_size(&path)
    }

    /// ZooKeeper only: packets received by all members (`srvr`'s
    /// "Received"), to count the client library's own pings.
    pub async fn packets_received(&self) -> Option<u64> {
        match self.system {
            System::Zookeeper => zookeeper::packets_received(&self.members).await,
            _ => None,
        }
    }

    pub async fn version(&self) -> String {
        match self.system {
            System::Raftlock | System::RaftlockZk | System::RaftlockEtcd => {
                raftlock::version(&self.members[0].spawn.program)
            }
            System::Etcd | System::EtcdGateway => etcd::version(&self.members[0].spawn.program),
            System::Zookeeper => zookeeper::version(&self.members).await,
        }
    }

    /// SIGTERM everything, SIGKILL what is left after the grace period.
    pub async fn stop(&mut self) {
        for m in &self.members {
            if let Some(pid) = m.pid {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
        }
        for m in &mut self.members {
            if let Some(mut child) = m.child.take() {
                if tokio::time::timeout(STOP_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
            m.pid = None;
        }
    }
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Absolute form of a path (configs are read by processes with another cwd).
pub fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
