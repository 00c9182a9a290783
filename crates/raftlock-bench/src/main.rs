//! `raftlock-bench`: the same lock workloads against raftlock, etcd 3.4
//! and ZooKeeper 3.8, each a three-member cluster on 127.0.0.1 started by
//! this program. See docs/benchmarks.md and bench/compare.sh.

mod backend;
mod cluster;
mod compare;
mod crosscheck;
mod disturbance;
mod machine;
mod pin;
mod procfs;
mod progress;
mod report;
mod selfcheck;
mod stats;
mod warmup;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::cluster::{System, Tools};
use crate::compare::{Run, Workload};
use crate::workload::Params;

#[derive(Parser)]
#[command(
    name = "raftlock-bench",
    version,
    about = "Lock-service benchmark: raftlock vs etcd 3.4 vs ZooKeeper 3.8, three members each on 127.0.0.1"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start each system, run the workloads, write results.json, plots and
    /// the Markdown section of the report.
    Compare(Box<CompareArgs>),
    /// Redraw plots and the Markdown section from a results.json.
    Report(ReportArgs),
    /// Hold the bench's ZooKeeper lock rows against kazoo (a client the
    /// bench did not write) on one cluster, interleaved round by round.
    ZkCrosscheck(Box<CrosscheckArgs>),
    /// Describe this machine (cores, CPU, fsync latency) as JSON.
    Machine {
        /// Where to measure fsync.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Args)]
struct CompareArgs {
    /// The raftlock binary (release build).
    #[arg(long, default_value = "target/release/raftlock")]
    raftlock_bin: PathBuf,
    /// Extra line for the `[cluster]` section of raftlock's generated
    /// config, e.g. `election_timeout_min_ms = 120` (repeatable; to try a
    /// tuning; the report records the command line).
    #[arg(long = "raftlock-option", value_name = "KEY = VALUE")]
    raftlock_options: Vec<String>,
    #[arg(long, default_value = "etcd")]
    etcd_bin: PathBuf,
    #[arg(long, default_value = "java")]
    java: PathBuf,
    /// ZooKeeper's classpath (Debian's zkEnv.sh value).
    #[arg(
        long,
        default_value = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
    )]
    zk_classpath: String,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "raftlock,raftlock-zk,raftlock-etcd,etcd,zookeeper"
    )]
    systems: Vec<System>,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "uncontended,put,contended,herd,scale,sessions,failover,restart"
    )]
    workloads: Vec<Workload>,
    /// The workloads the door systems (raftlock-zk, raftlock-etcd) run, of
    /// those `--workloads` names: the latency ones by default; sessions,
    /// failover, restart, herd and scale measure the replicated core the
    /// `raftlock` rows already cover.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "uncontended,put,contended"
    )]
    door_workloads: Vec<Workload>,
    /// Scratch directory for the clusters' data and logs (default: a new
    /// directory under /tmp).
    #[arg(long)]
    scratch: Option<PathBuf>,
    /// Where results.json and the plots go.
    #[arg(long, default_value = "docs/bench")]
    out_dir: PathBuf,
    /// Markdown document whose generated section is (re)written.
    #[arg(long)]
    doc: Option<PathBuf>,
    /// File that gets one "PID DIR" line per server process started.
    #[arg(long)]
    pidfile: Option<PathBuf>,
    /// The command line to record in the report (the calling script's).
    #[arg(long)]
    record_command: Option<String>,
    /// Keep the clusters' data directories.
    #[arg(long)]
    keep_data: bool,
    /// Publish even if the self-check rejects rows (wild run-to-run
    /// spread, server CPU per operation out of line, a stall); for smoke
    /// runs, whose one-second phases mean nothing.
    #[arg(long)]
    no_self_check: bool,
    #[command(flatten)]
    params: Params,
}

#[derive(Args)]
struct CrosscheckArgs {
    #[arg(long, default_value = "java")]
    java: PathBuf,
    #[arg(
        long,
        default_value = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
    )]
    zk_classpath: String,
    /// A Python with kazoo installed (bench/zk-crosscheck.sh makes a venv);
    /// without it only the bench's own rows run.
    #[arg(long)]
    python: Option<PathBuf>,
    /// The kazoo lock loop.
    #[arg(long, default_value = "bench/zk_kazoo_lock.py")]
    script: PathBuf,
    /// Processes the kazoo clients are spread over.
    #[arg(long, default_value_t = 2)]
    kazoo_procs: usize,
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    clients: Vec<usize>,
    /// Seconds per phase.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of unreported load before the first round (0: measure the
    /// fresh cluster); by default, load until the cluster has settled, as
    /// `compare` warms every cluster.
    #[arg(long)]
    warm_up_secs: Option<f64>,
    #[arg(long)]
    scratch: Option<PathBuf>,
    #[arg(long)]
    pidfile: Option<PathBuf>,
    /// Also write every phase as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct ReportArgs {
    /// Results to render; with several, each later file's workloads
    /// replace the earlier ones' (re-run one workload, keep the rest),
    /// and the merged results are saved to OUT_DIR/results.json.
    #[arg(long, default_value = "docs/bench/results.json")]
    json: Vec<PathBuf>,
    #[arg(long, default_value = "docs/bench")]
    out_dir: PathBuf,
    #[arg(long)]
    doc: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_fd_limit();
    // Remember the CPUs we may use before any pinned run narrows them.
    let _ = pin::all_cpus();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("raftlock-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        tokio::select! {
            r = run(cli) => r,
            _ = interrupted() => Err(anyhow::anyhow!("interrupted; stopping every server started")),
        }
    });
    // Dropping the runtime drops the clusters (kill_on_drop) if interrupted.
    drop(rt);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raftlock-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Compare(a) => {
            let a = *a;
            let scratch = a.scratch.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("raftlock-bench-{}", std::process::id()))
            });
            std::fs::create_dir_all(&scratch)
                .with_context(|| format!("cannot create {}", scratch.display()))?;
            let raftlock = std::fs::canonicalize(&a.raftlock_bin).with_context(|| {
                format!(
                    "no raftlock binary at {} (cargo build --release -p raftlock-cli)",
                    a.raftlock_bin.display()
                )
            })?;
            let command = a
                .record_command
                .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "));
            let run = Run {
                tools: Tools {
                    raftlock,
                    raftlock_options: a.raftlock_options,
                    etcd: a.etcd_bin,
                    java: a.java,
                    zk_classpath: a.zk_classpath,
                },
                params: a.params,
                systems: a.systems,
                workloads: a.workloads,
                door_workloads: a.door_workloads,
                pidfile: a.pidfile.unwrap_or_else(|| scratch.join("pids")),
                scratch,
                out_dir: a.out_dir.clone(),
                command,
                keep_data: a.keep_data,
            };
            let report = compare::compare(run).await?;
            let problems = selfcheck::check(&report, &selfcheck::Limits::default());
            if !problems.is_empty() && !a.no_self_check {
                let list: Vec<String> = problems.iter().map(|p| format!("  {p}")).collect();
                anyhow::bail!(
                    "self-check failed, nothing published ({} kept for inspection):\n{}",
                    a.out_dir.join(report::JSON_NAME).display(),
                    list.join("\n")
                );
            }
            for p in &problems {
                eprintln!("raftlock-bench: self-check (ignored): {p}");
            }
            let section = report::render(&report, &a.out_dir, a.doc.as_deref())?;
            println!("{section}");
            Ok(())
        }
        Command::Report(a) => {
            let mut report: Option<report::Report> = None;
            for path in &a.json {
                let next = report::load_json(path)?;
                report = Some(match report {
                    Some(base) => report::merge(base, next),
                    None => next,
                });
            }
            let report = report.ok_or_else(|| anyhow::anyhow!("no --json given"))?;
            for p in selfcheck::check(&report, &selfcheck::Limits::default()) {
                eprintln!("raftlock-bench: self-check: {p}");
            }
            if a.json.len() > 1 {
                report::save_json(&report, &a.out_dir)?;
            }
            let section = report::render(&report, &a.out_dir, a.doc.as_deref())?;
            println!("{section}");
            Ok(())
        }
        Command::ZkCrosscheck(a) => {
            let a = *a;
            let scratch = a.scratch.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("raftlock-bench-{}", std::process::id()))
            });
            let phases = crosscheck::run(crosscheck::CrossArgs {
                tools: Tools {
                    raftlock: PathBuf::new(),
                    raftlock_options: Vec::new(),
                    etcd: PathBuf::new(),
                    java: a.java,
                    zk_classpath: a.zk_classpath,
                },
                pidfile: a.pidfile.unwrap_or_else(|| scratch.join("pids")),
                scratch,
                python: a.python,
                script: a.script,
                kazoo_procs: a.kazoo_procs,
                clients: a.clients,
                secs: a.secs,
                rounds: a.rounds,
                warm_up_secs: a.warm_up_secs,
            })
            .await?;
            if let Some(path) = &a.json {
                std::fs::write(path, serde_json::to_string_pretty(&phases)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            println!("{}", crosscheck::summary(&phases));
            Ok(())
        }
        Command::Machine { dir } => {
            let m = machine::describe(&dir);
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
    }
}

/// 10,000 ZooKeeper sessions are 10,000 sockets here and thousands in
/// each server (which inherit the limit).
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
