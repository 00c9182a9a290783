//! `raftlock lock NAME -- CMD…`: run a command while holding a lock (or,
//! with `--read`/`--write`, a read-write lock; with `--permits N`, a
//! place in a semaphore: `lock_kind.rs`).
//!
//! The command gets `RAFTLOCK_FENCING_TOKEN` (pass it to anything the
//! command writes, so a store can refuse a stale holder), signals sent to
//! `raftlock` are forwarded to it, and the lock is released on every exit
//! path. If the session is lost (keepalives failing for long enough that
//! the cluster may grant the lock to someone else) the command is stopped:
//! SIGTERM, then SIGKILL after a grace period.
//!
//! The command runs in its own process group and signals go to the whole
//! group, so a shell script's children stop with it (a `sleep` left behind
//! would go on working without the lock). The price: a command that reads
//! the terminal interactively is not supported (it is not in the
//! terminal's foreground group).

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use raftlock_client::{ClientError, HttpClient, LockClient, Session};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

/// Exit code when the lock could not be acquired in time (EX_TEMPFAIL).
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// Exit code when the lock was lost while the command ran.
pub const EXIT_LOCK_LOST: u8 = 74;

#[derive(Args)]
#[command(
    after_help = "Exit status: the command's own (128+N if it died of signal N); \
75 if the lock was not acquired within --wait; 74 if the lock was lost while the \
command ran (the command was stopped); 1 for other errors.\n\n\
Example: raftlock lock nightly-report --wait 600s -- ./report.sh --date today\n\
         raftlock lock --read reports -- ./read-report.sh\n\
         raftlock lock --permits 4 gpu -- ./train.sh\n\
         raftlock lock --lock-delay 5s ledger -- ./post-entries.sh"
)]
pub struct LockArgs {
    /// Lock name, e.g. `orders/42` ([A-Za-z0-9._:-] and '/').
    name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
    /// How long to wait for the lock (e.g. 30s, 500ms, 10m; 0 = try once).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    wait: Duration,
    /// Session TTL: how long the cluster keeps the lock if this process
    /// dies without releasing it.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    ttl: Duration,
    /// How long the command gets to exit after SIGTERM when the lock is lost.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    grace: Duration,
    /// Re-enter a lock this command already runs under: inside `raftlock
    /// lock NAME` (whose command sees RAFTLOCK_LOCK=NAME and its token),
    /// a nested `raftlock lock --reentrant NAME` whose token still holds
    /// runs its command at once, under the outer hold, instead of queueing
    /// behind it (a deadlock). The outer `raftlock lock` still releases,
    /// and still stops the whole process group if the lock is lost.
    #[arg(long)]
    reentrant: bool,
    #[command(flatten)]
    kind: crate::lock_kind::KindArgs,
    #[command(flatten)]
    endpoints: crate::inspect::Endpoints,
}

/// Parses `250ms`, `30s`, `10m`, `1h30m` (humantime's syntax), or bare
/// milliseconds (`1500`, `0`) as earlier versions accepted.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("{text:?} is too long"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration like 30s, 500ms or 10m: {e}"))
}

/// How long a command whose lock was lost waits to release and close the
/// session before exiting.
const LOST_CLEAN_UP: Duration = Duration::from_millis(500);

pub async fn run(args: LockArgs) -> anyhow::Result<u8> {
    crate::init_logging("warn");
    let config = args.endpoints.client_config()?;
    let client: Arc<dyn LockClient> =
        Arc::new(HttpClient::with_config(args.endpoints.urls(), config)?);
    if args.reentrant {
        if let Some(token) = outer_hold(&args.name, client.as_ref()).await? {
            tracing::info!(lock = %args.name, token, "re-entered the outer hold");
            return reenter(&args);
        }
    }
    let owner = format!("raftlock-lock pid {}", std::process::id());
    let session = Session::open(client, &owner, args.ttl)
        .await
        .context("cannot open a session")?;
    let acquired = args.kind.acquire(&session, &args.name, args.wait).await;
    let guard = match acquired {
        Ok(guard) => guard,
        Err(ClientError::LockHeld(_) | ClientError::Timeout(_)) => {
            eprintln!(
                "raftlock: lock {:?} not acquired within {:?}",
                args.name, args.wait
            );
            let _ = session.close().await;
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(e) => {
            let _ = session.close().await;
            return Err(e).context(format!("cannot acquire lock {:?}", args.name));
        }
    };
    let token = guard.fencing_token();
    tracing::info!(lock = %args.name, token, "lock acquired");

    let outcome = run_command(&args, &session, token).await;
    let lost = session.lost_reason().is_some();
    // Release on every path: the command ended, failed to start, or was
    // stopped because the lock was lost.
    let clean_up = async move {
        if let Err(e) = guard.unlock().await {
            tracing::warn!("release failed (the session close below releases it too): {e}");
        }
        if let Err(e) = session.close().await {
            tracing::warn!("session close failed (it expires after its TTL): {e}");
        }
    };
    if !lost {
        clean_up.await;
    } else if tokio::time::timeout(LOST_CLEAN_UP, clean_up).await.is_err() {
        // Lost usually means the cluster is unreachable; retrying there
        // would only delay the exit status a caller is waiting for.
        tracing::warn!(
            "lost session not closed within {LOST_CLEAN_UP:?}; it expires after its TTL"
        );
    }
    outcome
}

/// The token of the `raftlock lock` this process runs under, if that one
/// holds `name` and its token is still the lock's holder.
async fn outer_hold(name: &str, client: &dyn LockClient) -> anyhow::Result<Option<u64>> {
    if std::env::var("RAFTLOCK_LOCK").ok().as_deref() != Some(name) {
        return Ok(None);
    }
    let Some(token) = std::env::var("RAFTLOCK_FENCING_TOKEN")
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return Ok(None);
    };
    let check = client
        .fencing_check(name, token)
        .await
        .context("cannot check the outer hold's fencing token")?;
    Ok(check.valid.then_some(token))
}

/// Runs the command in place of this process (same pid and process
/// group), so the outer `raftlock lock`'s signals and its stop on a lost
/// lock reach it; it inherits the outer hold's environment.
fn reenter(args: &LockArgs) -> anyhow::Result<u8> {
    use std::os::unix::process::CommandExt;
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given after --")?;
    let error = std::process::Command::new(program).args(rest).exec();
    Err(error).with_context(|| format!("cannot start {program:?}"))
}

async fn run_command(args: &LockArgs, session: &Session, token: u64) -> anyhow::Result<u8> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given after --")?;
    let mut child = Command::new(program)
        .args(rest)
        .env("RAFTLOCK_FENCING_TOKEN", token.to_string())
        .env("RAFTLOCK_LOCK", &args.name)
        .env("RAFTLOCK_LOCK_KIND", args.kind.describe())
        .env("RAFTLOCK_SESSION_ID", session.id().to_string())
        .stdin(Stdio::inherit())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {program:?}"))?;
    // The child leads its own process group: a negative pid signals it all.
    let group = child.id().map(|p| Pid::from_raw(-(p as i32)));
    let forward = |sig: Signal| {
        if let Some(group) = group {
            let _ = kill(group, sig);
        }
    };
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let lost = session.lost();
    tokio::pin!(lost);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(exit_code(status?)),
            _ = term.recv() => forward(Signal::SIGTERM),
            _ = int.recv() => forward(Signal::SIGINT),
            _ = hup.recv() => forward(Signal::SIGHUP),
            reason = &mut lost => {
                eprintln!("raftlock: lock {:?} lost ({reason:?}); stopping the command", args.name);
                forward(Signal::SIGTERM);
                if tokio::time::timeout(args.grace, child.wait()).await.is_err() {
                    forward(Signal::SIGKILL);
                    let _ = child.wait().await;
                }
                return Ok(EXIT_LOCK_LOST);
            }
        }
    }
}

/// The command's exit code, or 128 + signal as a shell reports it.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1500"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("ten").is_err());
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("99999999999999999h").is_err());
    }
}
