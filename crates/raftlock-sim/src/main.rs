//! `raftlock-sim`: run seeds of the deterministic simulation, or replay one.
//!
//! `raftlock-sim run --seeds 20` runs seeds 0..20; `raftlock-sim run --seed 7`
//! replays seed 7 and, with `--history`, prints its history and timeline;
//! `raftlock-sim soak --minutes 10` runs seeds until the time is up.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use raftlock_jepsen::{EventType, Process, Verdict};
use raftlock_sim::{run, Fault, RunConfig, RunReport};

#[derive(Parser)]
#[command(about = "Deterministic simulation of a raftlock cluster")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs seeds and checks each run's history and invariants.
    Run {
        /// Replay this one seed.
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run this many seeds, from `--first` on.
        #[arg(long, default_value_t = 10)]
        seeds: u64,
        /// The first seed of `--seeds`.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Simulated seconds under faults per run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Members of the cluster.
        #[arg(long, default_value_t = 3)]
        members: u64,
        /// Lock clients (sessions, keepalives, one lock); 0 runs the
        /// register clients alone.
        #[arg(long, default_value_t = 3)]
        lock_clients: usize,
        /// Print the history and the fault timeline of each run.
        #[arg(long)]
        history: bool,
        /// Make the committed log id durable only with the next log sync,
        /// as raftlock-storage does (docs/testing.md).
        #[arg(long)]
        committed_with_next_sync: bool,
        /// Read a restarted member's vote back committed, so openraft
        /// restores a leader in its own term at once (raftlock-storage reads
        /// it uncommitted; docs/adr/0022-restart-without-restored-leadership.md).
        #[arg(long)]
        restore_leadership: bool,
        /// The faults to draw from, comma-separated: all, partition,
        /// one-way, isolate-leader, flaky, crash, power-loss, slow-disk,
        /// disk-error, torn-crash,
        /// membership, pause; empty for none.
        #[arg(long, default_value = "all")]
        faults: String,
    },
    /// Runs seeds one after another until a time limit, printing only the
    /// failures (with their replay commands) and a summary.
    Soak {
        /// Stop starting runs after this many minutes of real time.
        #[arg(long)]
        minutes: f64,
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Simulated seconds under faults per run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Members of the cluster.
        #[arg(long, default_value_t = 3)]
        members: u64,
        /// The faults to draw from, as for `run`.
        #[arg(long, default_value = "all")]
        faults: String,
        /// Lock clients, as for `run`.
        #[arg(long, default_value_t = 3)]
        lock_clients: usize,
    },
}

fn main() -> ExitCode {
    let cmd = Cli::parse().command;
    if let Cmd::Soak {
        minutes,
        first,
        seconds,
        members,
        faults,
        lock_clients,
    } = cmd
    {
        return soak(minutes, first, seconds, members, &faults, lock_clients);
    }
    let Cmd::Run {
        seed,
        seeds,
        first,
        seconds,
        members,
        lock_clients,
        history,
        committed_with_next_sync,
        restore_leadership,
        faults,
    } = cmd
    else {
        return ExitCode::FAILURE;
    };
    let faults = match Fault::parse_list(&faults) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--faults: {e}");
            return ExitCode::FAILURE;
        }
    };
    let list: Vec<u64> = match seed {
        Some(s) => vec![s],
        None => (first..first + seeds).collect(),
    };
    let started = Instant::now();
    let (mut simulated, mut injected, mut failed) = (Duration::ZERO, 0u64, Vec::new());
    for s in &list {
        let config = RunConfig {
            duration: Duration::from_secs(seconds),
            members,
            committed_synced: !committed_with_next_sync,
            restore_leadership,
            faults: faults.clone(),
            lock_clients,
            ..RunConfig::new(*s)
        };
        let report = match run(config) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("seed {s}: the run itself failed: {e:#}");
                failed.push(*s);
                continue;
            }
        };
        simulated += report.simulated;
        injected += report.faults;
        summary(&report);
        if history || (!report.passed() && seed.is_some()) {
            timeline(&report);
        }
        if !report.passed() {
            let mut extra = String::new();
            if committed_with_next_sync {
                extra.push_str(" --committed-with-next-sync");
            }
            if restore_leadership {
                extra.push_str(" --restore-leadership");
            }
            if lock_clients != 3 {
                extra.push_str(&format!(" --lock-clients {lock_clients}"));
            }
            if faults != Fault::ALL {
                let names: Vec<_> = faults.iter().map(|f| f.name()).collect();
                extra.push_str(&format!(" --faults '{}'", names.join(",")));
            }
            explain(&report, members, seconds, &extra);
            failed.push(*s);
        }
    }
    let real = started.elapsed();
    println!(
        "{} run(s), {} failed, {injected} faults, {:.1} s simulated in {:.1} s real ({:.1} simulated s per real s, {:.0} runs/min)",
        list.len(),
        failed.len(),
        simulated.as_secs_f64(),
        real.as_secs_f64(),
        simulated.as_secs_f64() / real.as_secs_f64().max(1e-9),
        list.len() as f64 * 60.0 / real.as_secs_f64().max(1e-9),
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `soak`: seeds from `first` on until `minutes` of real time are spent.
fn soak(
    minutes: f64,
    first: u64,
    seconds: u64,
    members: u64,
    faults: &str,
    lock_clients: usize,
) -> ExitCode {
    let faults = match Fault::parse_list(faults) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--faults: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut extra = if faults == Fault::ALL {
        String::new()
    } else {
        let names: Vec<_> = faults.iter().map(|f| f.name()).collect();
        format!(" --faults '{}'", names.join(","))
    };
    if lock_clients != 3 {
        extra.push_str(&format!(" --lock-clients {lock_clients}"));
    }
    let limit = Duration::from_secs_f64(minutes.max(0.0) * 60.0);
    let started = Instant::now();
    let (mut runs, mut injected, mut simulated, mut failed) = (0u64, 0u64, Duration::ZERO, 0u64);
    let mut seed = first;
    while started.elapsed() < limit {
        let config = RunConfig {
            duration: Duration::from_secs(seconds),
            members,
            faults: faults.clone(),
            lock_clients,
            ..RunConfig::new(seed)
        };
        runs += 1;
        match run(config) {
            Ok(report) => {
                simulated += report.simulated;
                injected += report.faults;
                if !report.passed() {
                    failed += 1;
                    summary(&report);
                    explain(&report, members, seconds, &extra);
                }
            }
            Err(e) => {
                failed += 1;
                println!("seed {seed}: the run itself failed: {e:#}");
            }
        }
        seed += 1;
    }
    let real = started.elapsed();
    println!(
        "soak: {runs} run(s) (seeds {first}..{seed}), {failed} failed, {injected} faults ({:.1} per run), {:.1} s simulated in {:.1} s real ({:.1} simulated s per real s, {:.0} runs/min)",
        injected as f64 / runs.max(1) as f64,
        simulated.as_secs_f64(),
        real.as_secs_f64(),
        simulated.as_secs_f64() / real.as_secs_f64().max(1e-9),
        runs as f64 * 60.0 / real.as_secs_f64().max(1e-9),
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn summary(r: &RunReport) {
    println!(
        "seed {:>5}: {} | {} ops ok, {} grants, {} keepalives, {} expiries, {} faults, {} leader ids ({} shared terms), {} unsynced writes lost, {} torn, {} failed syncs | {:.1} s simulated in {:.2} s | {}",
        r.config.seed,
        if r.passed() { "pass" } else { "FAIL" },
        r.ok_ops(),
        r.grants(),
        r.keepalives,
        r.expiries,
        r.faults,
        r.terms,
        r.shared_terms,
        r.lost_writes,
        r.torn_writes,
        r.failed_syncs,
        r.simulated.as_secs_f64(),
        r.real.as_secs_f64(),
        &r.hash[..16],
    );
}

fn explain(r: &RunReport, members: u64, seconds: u64, extra: &str) {
    for v in &r.violations {
        println!("  invariant: {v}");
    }
    for c in r.checks.iter().filter(|c| c.verdict == Verdict::Invalid) {
        println!("  {}: {} ({})", c.checker, c.verdict, c.summary);
        if let Some(e) = &c.explanation {
            for line in e.lines().take(20) {
                println!("    {line}");
            }
        }
    }
    let features = enabled_features();
    println!(
        "  replay: cargo run -p raftlock-sim{features} -- run --seed {} --seconds {seconds} --members {members}{extra} --history",
        r.config.seed
    );
}

/// The `--features` flag this binary was built with, for the replay line.
fn enabled_features() -> String {
    let mut f = Vec::new();
    if cfg!(feature = "inject-ack-before-sync") {
        f.push("inject-ack-before-sync");
    }
    if cfg!(feature = "inject-stale-read") {
        f.push("inject-stale-read");
    }
    if cfg!(feature = "inject-keepalive-quorum-off-by-one") {
        f.push("inject-keepalive-quorum-off-by-one");
    }
    if cfg!(feature = "inject-follower-ack-before-sync") {
        f.push("inject-follower-ack-before-sync");
    }
    if f.is_empty() {
        String::new()
    } else {
        format!(" --features {}", f.join(","))
    }
}

/// The histories, one line per event, faults marked: the register
/// clients', then the lock clients'.
fn timeline(r: &RunReport) {
    print_events(&r.history);
    if !r.lock_history.is_empty() {
        println!("  lock clients:");
        print_events(&r.lock_history);
    }
}

fn print_events(history: &raftlock_jepsen::History) {
    for e in history.events() {
        let t = raftlock_jepsen::history::fmt_ns(e.time);
        match e.process {
            Process::Nemesis => println!("{t:>14} ---- nemesis {} {}", e.f, e.value),
            Process::Client(p) => {
                let kind = match e.kind {
                    EventType::Invoke => "invoke",
                    EventType::Ok => "ok",
                    EventType::Fail => "fail",
                    EventType::Info => "info",
                };
                let key = e.key.as_deref().unwrap_or("");
                let err = e
                    .error
                    .as_deref()
                    .map(|x| format!(" ({x})"))
                    .unwrap_or_default();
                let token = e.token.map(|t| format!(" token {t}")).unwrap_or_default();
                println!(
                    "{t:>14} p{p:<4} {kind:<6} {} {key} {}{token}{err}",
                    e.f, e.value
                );
            }
        }
    }
}
