//! `raftlock-jepsen`: run the harness, or re-check a saved history.
//!
//! Exit codes: 0 every checker says valid; 1 some checker says invalid;
//! 3 no violation found but some checker could not decide; 2 usage or I/O
//! error (and the not-yet-implemented `test`).

use clap::{Parser, Subcommand};
use raftlock_jepsen::checker::linear::LinearConfig;
use raftlock_jepsen::report::{results::overall, RunResults};
use raftlock_jepsen::{check_history, write_run_report, CheckOptions, History, Verdict, Workload};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
        /// Workload the history comes from: register, mutex or fenced.
        /// Detected from the functions in the history when omitted.
        #[arg(long)]
        workload: Option<Workload>,
        /// Linearizability search steps per partition before `unknown`.
        #[arg(long, default_value_t = LinearConfig::default().max_steps)]
        max_steps: u64,
        /// Wall-clock limit for the linearizability search, in seconds.
        #[arg(long, default_value_t = 120)]
        time_limit_secs: u64,
        /// Also write the full report (results.json, timeline.html, plots)
        /// into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a workload against a real cluster with faults. Not yet
    /// implemented: the cluster driver, clients and nemesis come next.
    Test,
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
        Command::Test => {
            eprintln!(
                "raftlock-jepsen test: not yet implemented (the run driver is still to come)"
            );
            ExitCode::from(2)
        }
    }
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
