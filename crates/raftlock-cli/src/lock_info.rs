//! `raftlock lock-info NAME` (holder and waiters in queue order) and
//! `raftlock fencing-check NAME TOKEN`.

use clap::Args;
use reqwest::Method;
use serde_json::json;

use crate::api::{cell, print_json, Api, Output};
use crate::inspect::Endpoints;

#[derive(Args)]
pub struct LockInfoArgs {
    /// Lock name, e.g. `orders/42`.
    name: String,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

pub async fn lock_info(args: LockInfoArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.endpoints)?;
    let body = api.get(&format!("/v1/locks/{}", args.name)).await?;
    if args.output.json {
        return print_json(&body);
    }
    println!("lock: {}", args.name);
    let holder = &body["holder"];
    if holder.is_null() {
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
