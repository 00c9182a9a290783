//! One member process (`raftlock serve`, or `raftlock-jepsen member` with
//! embedded clients): start, kill -9, pause, resume, stop; optionally
//! confined to one CPU.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Everything needed to (re)start one member with the same arguments.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Member id (1-based).
    pub id: u64,
    /// The `raftlock` binary (or `raftlock-jepsen` for a member with
    /// embedded clients).
    pub bin: PathBuf,
    /// `Some(addr)`: run `raftlock-jepsen member` with its control endpoint
    /// on `addr` instead of `raftlock serve`.
    pub control: Option<SocketAddr>,
    /// The cluster TOML.
    pub config: PathBuf,
    /// `--peer ID=ADDR` overrides: every peer is dialled through a proxy.
    pub peers: Vec<(u64, String)>,
    /// More arguments of `raftlock serve`: `--join …` for a member added
    /// at run time (harmless on its restarts: a voter does not ask again).
    pub extra: Vec<String>,
    /// stdout and stderr of every incarnation are appended here.
    pub log: PathBuf,
    /// `Some(cpu)`: every incarnation runs on that CPU only (measurements
    /// that keep the members off the load generator's core).
    pub cpu: Option<usize>,
}

/// A member and its current incarnation, if it runs.
#[derive(Debug)]
pub struct NodeProcess {
    /// How to start it.
    pub spec: NodeSpec,
    /// The running child; `None` while killed.
    child: Option<Child>,
    /// True between SIGSTOP and SIGCONT.
    paused: bool,
    /// Incarnations started so far (1 after the first start).
    pub starts: u32,
    /// Exits the harness did not cause (a crash is a finding).
    pub crashes: Vec<String>,
}

impl NodeSpec {
    /// The arguments after the binary: `serve` (or `member --control
    /// ADDR`), `--config`, `--id`, the `--peer` overrides, then `extra`.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = match self.control {
            None => vec!["serve".into()],
            Some(addr) => vec!["member".into(), "--control".into(), addr.to_string().into()],
        };
        args.extend([
            "--config".into(),
            self.config.clone().into_os_string(),
            "--id".into(),
            self.id.to_string().into(),
        ]);
        for (peer, addr) in &self.peers {
            args.push("--peer".into());
            args.push(format!("{peer}={addr}").into());
        }
        args.extend(self.extra.iter().map(OsString::from));
        args
    }

    /// The command of one incarnation: [`args`](Self::args), `RUST_LOG`
    /// from `RAFTLOCK_LOG` (default `info,openraft=warn`), no stdin, and
    /// stdout and stderr appended to `log` (a restarted member's earlier
    /// output stays readable). A `std` command, for callers without a
    /// runtime; [`NodeProcess`] runs it under tokio.
    pub fn command(&self) -> std::io::Result<std::process::Command> {
        let log = open_append(&self.log)?;
        let mut cmd = std::process::Command::new(&self.bin);
        cmd.args(self.args())
            .env(
                "RUST_LOG",
                std::env::var("RAFTLOCK_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        Ok(cmd)
    }
}

impl NodeProcess {
    /// A member that has not been started yet.
    pub fn new(spec: NodeSpec) -> Self {
        NodeProcess {
            spec,
            child: None,
            paused: false,
            starts: 0,
            crashes: Vec::new(),
        }
    }

    /// Starts a new incarnation (no-op when one is running).
    pub fn start(&mut self) -> std::io::Result<()> {
        self.note_crash();
        if self.child.is_some() {
            return Ok(());
        }
        let mut cmd = Command::from(self.spec.command()?);
        // A harness that panics must not leave nodes behind.
        cmd.kill_on_drop(true);
        let child = spawn_pinned(self.spec.cpu, || cmd.spawn())?;
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok(())
    }

    /// The process id of the running incarnation.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// True while an incarnation runs (paused or not).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// True between [`Self::pause`] and [`Self::resume`].
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// If the incarnation exited on its own, records it in `crashes` and
    /// forgets it (so it can be started again).
    pub fn note_crash(&mut self) {
        let exited = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            self.crashes
                .push(format!("incarnation {} exited: {status}", self.starts));
            self.child = None;
            self.paused = false;
        }
    }

    /// kill -9 and reap: no shutdown code runs, nothing is flushed.
    pub async fn kill9(&mut self) {
        self.note_crash();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
        self.paused = false;
    }

    /// SIGSTOP: the process freezes with its sockets open.
    pub fn pause(&mut self) -> nix::Result<()> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> nix::Result<()> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// Graceful stop (SIGCONT, SIGTERM), then kill -9 after `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        if self.child.is_none() {
            return;
        }
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGTERM);
        if let Some(child) = self.child.as_mut() {
            if tokio::time::timeout(grace, child.wait()).await.is_ok() {
                self.child = None;
            }
        }
        self.kill9().await;
    }

    fn signal(&self, signal: Signal) -> nix::Result<()> {
        let pid = self
            .child
            .as_ref()
            .and_then(Child::id)
            .ok_or(nix::errno::Errno::ESRCH)?;
        let pid = i32::try_from(pid).map_err(|_| nix::errno::Errno::ESRCH)?;
        kill(Pid::from_raw(pid), signal)
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Runs `spawn`; with `Some(cpu)`, with the calling thread confined to
/// `cpu`, so the process it starts inherits that set (no `unsafe`
/// pre-exec hook), then gives the thread its set back. Fails if `cpu` is
/// not one this process may use.
pub fn spawn_pinned<T>(
    cpu: Option<usize>,
    spawn: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let Some(cpu) = cpu else {
        return spawn();
    };
    let mut set = CpuSet::new();
    set.set(cpu).map_err(std::io::Error::from)?;
    let before = sched_getaffinity(Pid::from_raw(0)).map_err(std::io::Error::from)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)?;
    let out = spawn();
    sched_setaffinity(Pid::from_raw(0), &before).map_err(std::io::Error::from)?;
    out
}
