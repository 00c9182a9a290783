//! `raftlock lock-info NAME` (holder and waiters in queue order; with
//! `--rwlock` or `--semaphore` the holders of a read-write lock or
//! semaphore) and `raftlock fencing-check NAME TOKEN`.

use clap::Args;
use reqwest::Method;
use serde_json::json;

use crate::api::{cell, print_json, Api, Output};
use crate::inspect::Endpoints;

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
    let api = Api::new(&args.endpoints)?;
    if args.rwlock || args.semaphore {
        return shared_info(&api, &args).await;
    }
    let body = api.get(&format!("/v1/locks/{}", args.name)).await?;
    if args.output.json {
        return print_json(&body);
    }
    println!("lock: {}", args.name);
    if let Some(ms) = body["lock_delay_ms"].as_u64() {
        println!("lock delay: {ms} ms");
    }
    let holder = &body["holder"];
    if body["held_off"].as_bool() == Some(true) {
        // The holder's session ended; the next in line waits out the delay.
        println!("holder: none (held off: the lock-delay after its holder's session ended)");
    } else if holder.is_null() {
        println!("holder: none");
    } else {
        println!(
            "holder: session {}  owner {}  principal {}  fencing token {}  since revision {}",
            cell(&holder["session_id"]),
            cell(&holder["owner"]),
            cell(&holder["principal"]),
            cell(&holder["fencing_token"]),
            cell(&holder["since_revision"])
        );
        println!(
            "  (to break it: raftlock session close {})",
            cell(&holder["session_id"])
        );
    }
    let waiters = body["waiters"].as_array().cloned().unwrap_or_default();
    println!("waiters: {}", waiters.len());
    for (i, w) in waiters.iter().enumerate() {
        println!(
            "  {:>3}. session {}  owner {}  principal {}",
            i + 1,
            cell(&w["session_id"]),
            cell(&w["owner"]),
            cell(&w["principal"])
        );
    }
    Ok(())
}

/// A read-write lock or semaphore: every holder (several may hold), then
/// the waiters in queue order.
async fn shared_info(api: &Api, args: &LockInfoArgs) -> anyhow::Result<()> {
    let (route, what) = if args.rwlock {
        ("rwlocks", "rwlock")
    } else {
        ("semaphores", "semaphore")
    };
    let body = api.get(&format!("/v1/{route}/{}", args.name)).await?;
    if args.output.json {
        return print_json(&body);
    }
    println!("{what}: {}", args.name);
    if args.semaphore {
        println!("permits: {}", cell(&body["permits"]));
    }
    // A semaphore's entries have no mode.
    let mode = |e: &serde_json::Value| match e["mode"].as_str() {
        Some(mode) => format!("{mode:<5} "),
        None => String::new(),
    };
    let holders = body["holders"].as_array().cloned().unwrap_or_default();
    println!("holders: {}", holders.len());
    for (i, h) in holders.iter().enumerate() {
        println!(
            "  {:>3}. {}session {}  owner {}  principal {}  fencing token {}  since revision {}",
            i + 1,
            mode(h),
            cell(&h["session_id"]),
            cell(&h["owner"]),
            cell(&h["principal"]),
            cell(&h["fencing_token"]),
            cell(&h["since_revision"])
        );
    }
    let waiters = body["waiters"].as_array().cloned().unwrap_or_default();
    println!("waiters: {}", waiters.len());
    for (i, w) in waiters.iter().enumerate() {
        println!(
            "  {:>3}. {}session {}  owner {}  principal {}",
            i + 1,
            mode(w),
            cell(&w["session_id"]),
            cell(&w["owner"]),
            cell(&w["principal"])
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
    let api = Api::new(&args.endpoints)?;
    let request = json!({"lock": args.name, "fencing_token": args.fencing_token});
    let body = api
        .call(Method::POST, "/v1/fencing/check", Some(&request))
        .await?;
    let valid = body["valid"] == true;
    if args.output.json {
        print_json(&body)?;
    } else if valid {
        println!(
            "valid: {} is the current token of {}",
            args.fencing_token, args.name
        );
    } else {
        println!(
            "stale: the current token of {} is {}",
            args.name,
            cell(&body["current_token"])
        );
    }
    Ok(if valid { 0 } else { EXIT_STALE })
}
