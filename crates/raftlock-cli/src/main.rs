//! `raftlock`: one binary for running and using a raftlock cluster.

mod client_tls;
mod docs_gen;
mod election_cmd;
mod inspect;
mod lock;
mod lock_info;
mod lock_kind;
mod member;
mod node_cmd;
mod output;
mod rerun;
mod serve;
mod session_cmd;
mod snapshot;
mod table;
mod token;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Default endpoints: the local cluster `raftlock up` starts.
const LOCAL_ENDPOINTS: &str = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003";

#[derive(Parser)]
#[command(
    name = "raftlock",
    version,
    about = "A distributed lock service with its own Raft consensus",
    long_about = "raftlock: distributed locks, leader election and a small coordination tree, \
replicated by Raft across three nodes.\n\n\
Start a local three-node cluster:   raftlock up\n\
Run a command under a lock:         raftlock lock nightly-report -- ./report.sh\n\
See the cluster and its locks:      raftlock status; raftlock locks\n\
Who holds a lock, and break it:     raftlock lock-info NAME; raftlock session close ID"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one cluster member (the production way: one per host).
    Serve(serve::ServeArgs),
    /// Start a local three-node cluster in one command; Ctrl-C stops it.
    Up(up::UpArgs),
    /// Hold a lock while a command runs; exits with the command's code.
    Lock(lock::LockArgs),
    /// Show members, leader, term and replication indexes.
    Status(inspect::StatusArgs),
    /// List locks with their holders and waiters.
    Locks(inspect::LocksArgs),
    /// Back up a live cluster, restore a new one from a backup, inspect one.
    Snapshot(snapshot::SnapshotArgs),
    /// List, add or remove cluster members (Raft membership).
    Member(member::MemberArgs),
    /// Make bearer tokens for a cluster with authentication.
    Token(token::TokenCommandArgs),
    /// List, show or close sessions (closing releases their locks).
    Session(session_cmd::SessionArgs),
    /// Show a lock's holder and its waiters in queue order.
    LockInfo(lock_info::LockInfoArgs),
    /// Show or follow an election's leader.
    Election(election_cmd::ElectionArgs),
    /// Read, write and list nodes of the generic tree.
    Node(node_cmd::NodeArgs),
    /// Is a fencing token still the lock's current one?
    FencingCheck(lock_info::FencingCheckArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs_gen::CompletionsArgs),
    /// Write the man pages (raftlock.1, one per subcommand) into a directory.
    #[command(hide = true)]
    Manpages(docs_gen::ManpagesArgs),
}

/// Rust allocations of the server go through mimalloc: see
/// docs/adr/0034-mimalloc-in-the-raftlock-binary.md for the measurement.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // reqwest is built without a default TLS provider (crates/raftlock-tls).
    raftlock_tls::install_default_provider();
    let cli = Cli::parse();
    // The two generators need no runtime, and no network.
    let cli = match cli.command {
        Command::Completions(args) => {
            docs_gen::completions(Cli::command(), args);
            return ExitCode::SUCCESS;
        }
        Command::Manpages(args) => {
            return match docs_gen::manpages(Cli::command(), args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("raftlock: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        command => Cli { command },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("raftlock: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await.map(|()| 0),
            Command::Up(args) => up::run(args).await.map(|()| 0),
            Command::Lock(args) => lock::run(args).await,
            Command::Status(args) => inspect::status(args).await.map(|()| 0),
            Command::Locks(args) => inspect::locks(args).await.map(|()| 0),
            Command::Snapshot(args) => snapshot::run(args).await.map(|()| 0),
            Command::Member(args) => member::run(args).await.map(|()| 0),
            Command::Token(args) => token::run(args).map(|()| 0),
            Command::Session(args) => session_cmd::run(args).await.map(|()| 0),
            Command::LockInfo(args) => lock_info::lock_info(args).await.map(|()| 0),
            Command::Election(args) => election_cmd::run(args).await.map(|()| 0),
            Command::Node(args) => node_cmd::run(args).await.map(|()| 0),
            Command::FencingCheck(args) => lock_info::fencing_check(args).await,
            Command::Completions(_) | Command::Manpages(_) => Ok(0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("raftlock: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr; `RUST_LOG` overrides the default level.
pub(crate) fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // No colour codes in log files (`raftlock up` writes member logs).
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Resolves a config path relative to the current directory, for messages.
pub(crate) fn display_path(path: &std::path::Path) -> PathBuf {
    std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command's definition only when that subcommand is
    /// parsed: check them all at once.
    #[test]
    fn every_subcommand_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
