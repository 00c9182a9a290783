//! `raftlock lock-info NAME` (holder and waiters in queue order; with
//! `--rwlock` or `--semaphore` the holders of a read-write lock or
//! semaphore) and `raftlock fencing-check NAME TOKEN`.

use clap::Args;
use raftlock_client::HttpClient;

use crate::inspect::Endpoints;
use crate::output::{failure, number, print_body, text, Output};

#[derive(Args)]
pub struct LockInfoArgs {
    /// Lock name, e.g. `orders/42`.
    name: String,
    /// NAME is a read-write lock: show its holders (with their mode) and
    /// waiters.
    #[arg(long, conflicts_with = "semaphore")]
    rwlock: bool,
    /// NAME is a semaphore: show its permits, holders and waiters.
    #[arg(long)]
    semaphore: bool,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

pub async fn lock_info(args: LockInfoArgs) -> anyhow::Result<()> {
    let client = args.endpoints.client()?;
    if args.rwlock || args.semaphore {
        return shared_info(&client, &args).await;
    }
    let answer = client.lock_view(&args.name).await.map_err(failure)?;
    if args.output.json {
        return print_body(&answer.body);
    }
    let lock = answer.value;
    println!("lock: {}", args.name);
    if let Some(ms) = lock.lock_delay_ms {
        println!("lock delay: {ms} ms");
    }
    if lock.held_off {
        // The holder's session ended; the next in line waits out the delay.
        println!("holder: none (held off: the lock-delay after its holder's session ended)");
    } else if let Some(holder) = &lock.holder {
        println!(
            "holder: session {}  owner {}  principal {}  fencing token {}  since revision {}",
            text(holder.session_id.as_deref()),
            text(Some(&holder.owner)),
            text(holder.principal.as_deref()),
            holder.fencing_token,
            holder.since_revision
        );
        println!(
            "  (to break it: raftlock session close {})",
            text(holder.session_id.as_deref())
        );
    } else {
        println!("holder: none");
    }
    println!("waiters: {}", lock.waiters.len());
    for (i, w) in lock.waiters.iter().enumerate() {
        println!(
            "  {:>3}. session {}  owner {}  principal {}",
            i + 1,
            text(w.session_id.as_deref()),
            text(Some(&w.owner)),
            text(w.principal.as_deref())
        );
    }
    Ok(())
}

/// A read-write lock's entry shows its mode; a semaphore's has none.
fn mode(mode: Option<&str>) -> String {
    mode.map_or_else(String::new, |mode| format!("{mode:<5} "))
}

/// A read-write lock or semaphore: every holder (several may hold), then
/// the waiters in queue order.
async fn shared_info(client: &HttpClient, args: &LockInfoArgs) -> anyhow::Result<()> {
    let (what, permits, holders, waiters) = if args.rwlock {
        let answer = client.rwlock(&args.name).await.map_err(failure)?;
        if args.output.json {
            return print_body(&answer.body);
        }
        let view = answer.value;
        ("rwlock", None, view.holders, view.waiters)
    } else {
        let answer = client.semaphore(&args.name).await.map_err(failure)?;
        if args.output.json {
            return print_body(&answer.body);
        }
        let view = answer.value;
        ("semaphore", Some(view.permits), view.holders, view.waiters)
    };
    println!("{what}: {}", args.name);
    if let Some(permits) = permits {
        println!("permits: {}", number(permits));
    }
    println!("holders: {}", holders.len());
    for (i, h) in holders.iter().enumerate() {
        println!(
            "  {:>3}. {}session {}  owner {}  principal {}  fencing token {}  since revision {}",
            i + 1,
            mode(h.mode.as_deref()),
            text(h.session_id.as_deref()),
            text(Some(&h.owner)),
            text(h.principal.as_deref()),
            h.fencing_token,
            h.since_revision
        );
    }
    println!("waiters: {}", waiters.len());
    for (i, w) in waiters.iter().enumerate() {
        println!(
            "  {:>3}. {}session {}  owner {}  principal {}",
            i + 1,
            mode(w.mode.as_deref()),
            text(w.session_id.as_deref()),
            text(Some(&w.owner)),
            text(w.principal.as_deref())
        );
    }
    Ok(())
}

#[derive(Args)]
#[command(
    after_help = "Exit status: 0 when the token is the lock's current one, \
3 when it is stale (or the lock is free), 1 for other errors."
)]
pub struct FencingCheckArgs {
    /// Lock name.
    name: String,
    /// The fencing token a writer presented.
    #[arg(value_name = "TOKEN")]
    fencing_token: u64,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

/// Exit code of a stale token.
pub const EXIT_STALE: u8 = 3;

pub async fn fencing_check(args: FencingCheckArgs) -> anyhow::Result<u8> {
    let answer = args
        .endpoints
        .client()?
        .fencing(&args.name, args.fencing_token)
        .await
        .map_err(failure)?;
    let valid = answer.value.valid;
    if args.output.json {
        print_body(&answer.body)?;
    } else if valid {
        println!(
            "valid: {} is the current token of {}",
            args.fencing_token, args.name
        );
    } else {
        println!(
            "stale: the current token of {} is {}",
            args.name,
            number(answer.value.current_token)
        );
    }
    Ok(if valid { 0 } else { EXIT_STALE })
}
