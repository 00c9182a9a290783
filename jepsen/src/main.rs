//! `raftlock-jepsen`: run the harness, or re-check a saved history.
//!
//! Exit codes: 0 every checker says valid; 1 some checker says invalid;
//! 3 no violation found but some checker could not decide; 2 usage or I/O
//! error, or a cluster that could not be started.

use clap::{Parser, Subcommand};
use raftlock_jepsen::checker::linear::LinearConfig;
use raftlock_jepsen::nemesis::Fault;
use raftlock_jepsen::report::{results::overall, RunResults};
use raftlock_jepsen::runner::{self, TestOptions};
use raftlock_jepsen::workload::route::Routing;
use raftlock_jepsen::{check_history, write_run_report, CheckOptions, History, Verdict, Workload};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Parser)]
#[command(
    name = "raftlock-jepsen",
    version,
    about = "Jepsen-style testing for raftlock"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Re-check a saved history (JSON lines) and print a summary.
    Check {
        /// The history file (`history.jsonl`).
        file: PathBuf,
        /// Workload the history comes from: register, mutex, fenced, rwlock, semaphore,
        /// lock-delay or multilock.
        /// Detected from the functions in the history when omitted.
        #[arg(long)]
        workload: Option<Workload>,
        /// Linearizability search steps per partition before `unknown`.
        #[arg(long, default_value_t = LinearConfig::default().max_steps)]
        max_steps: u64,
        /// Wall-clock limit for the linearizability search, in seconds.
        #[arg(long, default_value_t = 300)]
        time_limit_secs: u64,
        /// Also write the full report (results.json, timeline.html, plots)
        /// into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a workload against a real cluster with faults, check the
    /// history, and write the report under the store directory.
    Test(TestArgs),
    /// Run one cluster member with a control port for embedded clients
    /// and disk faults (started by `test` with `--clients embedded` or a
    /// disk nemesis, not by hand); `--join` joins a running cluster as
    /// `raftlock serve --join` does.
    Member(raftlock_jepsen::member::MemberArgs),
}

#[derive(clap::Args)]
struct TestArgs {
    /// mutex, fenced, register, rwlock, semaphore, lock-delay, multilock,
    /// zk-mutex (fenced through the members' ZooKeeper doors) or
    /// etcd-mutex (fenced through the members' etcd doors).
    #[arg(long)]
    workload: Workload,
    /// How clients reach the cluster: sticky (each client stays on one
    /// member until it does not answer), random (every request to a
    /// random member), embedded (clients live in the members' processes;
    /// every workload but register).
    #[arg(long, default_value = "sticky")]
    clients: Routing,
    /// Faults, comma separated: partition (= partition-one,
    /// partition-leader, partition-halves, partition-bridge), kill (=
    /// kill, kill-leader), pause (= pause, pause-leader), client-pause,
    /// delay, isolate-leader, membership, all (= every one of these),
    /// disk (= disk-full, slow-fsync: through member fault hooks),
    /// disk-fill (a real full tmpfs per member; root), none.
    #[arg(long, default_value = "partition,kill,pause")]
    nemesis: String,
    /// Seconds of workload and faults (the quiet phase and the check come
    /// after).
    #[arg(long, default_value_t = 60)]
    time_limit: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Seed of the op mix and the fault schedule; random when omitted
    /// (always printed, so a run can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// Cluster members (1 to 7; 3 and 5 make sense).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The raftlock binary [default: target/debug/raftlock next to this
    /// executable, or $RAFTLOCK_BIN].
    #[arg(long)]
    raftlock_bin: Option<PathBuf>,
    /// Where runs are written [default: jepsen/store of this workspace].
    #[arg(long)]
    store: Option<PathBuf>,
    /// Session TTL of the lock clients, in milliseconds.
    #[arg(long, default_value_t = 3000)]
    ttl_ms: u64,
    /// zk-mutex's self-test: clients with an injected bug (a waiter takes
    /// its predecessor's deletion for the lock without listing again),
    /// which the checkers must catch (exit code 1).
    #[arg(long)]
    inject_zk_no_relist: bool,
    /// etcd-mutex's self-test: clients with an injected bug (a waiter
    /// takes its predecessor's deletion for the lock without reading
    /// again), which the checkers must catch (exit code 1).
    #[arg(long)]
    inject_etcd_no_requery: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check {
            file,
            workload,
            max_steps,
            time_limit_secs,
            out,
        } => match check(file, workload, max_steps, time_limit_secs, out) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Test(args) => match test(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Member(args) => match member(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("raftlock-jepsen member: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let faults = Fault::parse_list(&args.nemesis).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        (1..=7).contains(&args.nodes),
        "--nodes must be between 1 and 7"
    );
    anyhow::ensure!(
        args.ttl_ms >= 1000,
        "--ttl-ms must be at least 1000 (the cluster's session_ttl_min_ms)"
    );
    // A default seed, not a deadline (docs/design.md, Time).
    #[allow(clippy::disallowed_methods)]
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 % 1_000_000)
    });
    let mut opts = TestOptions::new(args.workload);
    opts.faults = faults;
    opts.time_limit = Duration::from_secs(args.time_limit);
    opts.concurrency = args.concurrency;
    opts.seed = seed;
    opts.nodes = args.nodes;
    opts.clients = args.clients;
    opts.settings.ttl_ms = args.ttl_ms;
    opts.settings.inject_zk_no_relist = args.inject_zk_no_relist;
    opts.settings.inject_etcd_no_requery = args.inject_etcd_no_requery;
    if let Some(bin) = args.raftlock_bin {
        opts.raftlock_bin = bin;
    }
    if let Some(store) = args.store {
        opts.store = store;
    }
    let members = if opts.clients == Routing::Embedded {
        format!("{} member", opts.member_bin.display())
    } else {
        opts.raftlock_bin.display().to_string()
    };
    println!(
        "seed {seed}: {} against {members} ({} nodes, {} s)",
        opts.replay_command(),
        opts.nodes,
        args.time_limit
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = runner::run(&opts) => outcome.map(Some),
            // Dropping the run (and then the runtime) kills every node.
            _ = tokio::signal::ctrl_c() => Ok(None),
        }
    })?;
    drop(runtime);
    let Some(outcome) = outcome else {
        eprintln!("interrupted: the cluster was killed and no verdict was reached");
        return Ok(ExitCode::from(130));
    };
    println!("{}", outcome.summary);
    Ok(match outcome.verdict {
        Verdict::Valid => ExitCode::SUCCESS,
        Verdict::Invalid => ExitCode::from(1),
        Verdict::Unknown => ExitCode::from(3),
    })
}

fn member(args: raftlock_jepsen::member::MemberArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(raftlock_jepsen::member::run(args))
}

fn check(
    file: PathBuf,
    workload: Option<Workload>,
    max_steps: u64,
    time_limit_secs: u64,
    out: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let history = History::load_jsonl(&file)?;
    let opts = CheckOptions {
        workload,
        linear: LinearConfig {
            max_steps,
            time_limit: Some(Duration::from_secs(time_limit_secs)),
        },
    };
    let results = check_history(&history, &opts)?;
    let ops = history.operations()?;
    let run = RunResults::new(&history, &ops, &results);
    println!("{}: {}", file.display(), run.summary());
    if let Some(dir) = out {
        let files = write_run_report(&dir, &history, &results)?;
        println!("report: {}", files.timeline.display());
    }
    Ok(match overall(&results) {
        Verdict::Valid => ExitCode::SUCCESS,
        Verdict::Invalid => ExitCode::from(1),
        Verdict::Unknown => ExitCode::from(3),
    })
}
