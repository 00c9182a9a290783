//! `raftlock member list|add|remove`, and the request `raftlock serve
//! --join` sends: membership changes through any member's API (the member
//! takes them to the leader).

use std::time::Duration;

use crate::table::{Align, TextTable};
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::inspect::Endpoints;

#[derive(Args)]
pub struct MemberArgs {
    #[command(subcommand)]
    command: MemberCommand,
}

#[derive(Subcommand)]
enum MemberCommand {
    /// Show the Raft membership: voters and learners with their addresses.
    List {
        #[command(flatten)]
        output: crate::api::Output,
        #[command(flatten)]
        endpoints: Endpoints,
    },
    /// Add a member (learner until caught up, then voter). Start it first
    /// (`raftlock serve --join`, which also sends this request).
    Add {
        /// The new member's id: a new one, or the id of a member removed
        /// because its data was wiped (it comes back as a new incarnation).
        id: u64,
        /// Its client API address (host:port).
        #[arg(long)]
        api_addr: String,
        /// Its Raft address (host:port), which the leader dials.
        #[arg(long)]
        raft_addr: String,
        #[command(flatten)]
        endpoints: Endpoints,
    },
    /// Remove a member (the leader too: it hands over). To replace a
    /// member, add the new one first, then remove the old one. A member
    /// whose data was wiped is refused by the cluster until it is removed
    /// and added again.
    Remove {
        id: u64,
        #[command(flatten)]
        endpoints: Endpoints,
    },
}

pub async fn run(args: MemberArgs) -> anyhow::Result<()> {
    let endpoints = match &args.command {
        MemberCommand::List { endpoints, .. }
        | MemberCommand::Add { endpoints, .. }
        | MemberCommand::Remove { endpoints, .. } => endpoints,
    };
    // An add waits for the new member to catch up (bounded at the leader
    // by about a minute).
    let http = endpoints.http(Duration::from_secs(120))?;
    let urls = endpoints.urls();
    let view = match args.command {
        MemberCommand::List { output, .. } => {
            let view = send(&http, &urls, Request::List).await?;
            if output.json {
                return crate::api::print_json(&view);
            }
            view
        }
        MemberCommand::Add {
            id,
            api_addr,
            raft_addr,
            ..
        } => add(&http, &urls, id, &api_addr, &raft_addr).await?,
        MemberCommand::Remove { id, .. } => send(&http, &urls, Request::Remove(id)).await?,
    };
    print_view(&view)
}

/// Adds member `id` through the first endpoint that answers, retrying
/// while the cluster has no leader or another change is under way.
pub(crate) async fn add(
    http: &reqwest::Client,
    endpoints: &[String],
    id: u64,
    api_addr: &str,
    raft_addr: &str,
) -> anyhow::Result<Value> {
    let body = json!({"id": id, "api_addr": api_addr, "raft_addr": raft_addr});
    send(http, endpoints, Request::Add(body)).await
}

enum Request {
    List,
    Add(Value),
    Remove(u64),
}

/// Codes worth retrying: the cause passes (`member_unreachable`: the
/// leader could not reach the new member yet, it may still be starting),
/// or another member can serve.
fn transient(code: &str) -> bool {
    raftlock_client::ErrorCode::parse(code).is_some_and(|c| c.retry_later() || c.retry_elsewhere())
}

/// Sends `request` to each endpoint in turn until one answers for good;
/// transient refusals and unreachable endpoints are retried for up to a
/// minute.
async fn send(
    http: &reqwest::Client,
    endpoints: &[String],
    request: Request,
) -> anyhow::Result<Value> {
    if endpoints.is_empty() {
        bail!("no endpoints given");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut last_error = anyhow!("no endpoint answered");
        for endpoint in endpoints {
            let base = endpoint.trim_end_matches('/');
            let builder = match &request {
                Request::List => http.get(format!("{base}/v1/cluster/members")),
                Request::Add(body) => http.post(format!("{base}/v1/cluster/members")).json(body),
                Request::Remove(id) => http.delete(format!("{base}/v1/cluster/members/{id}")),
            };
            let response = match builder.send().await {
                Ok(response) => response,
                Err(e) => {
                    last_error = anyhow!("{base}: {e}");
                    continue;
                }
            };
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status.is_success() {
                return Ok(body);
            }
            let code = body["error"].as_str().unwrap_or("").to_string();
            let message = body["message"].as_str().unwrap_or("").to_string();
            let error = anyhow!("{base}: {status} {code}: {message}");
            if !transient(&code) {
                return Err(error);
            }
            last_error = error;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(last_error);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn print_view(view: &Value) -> anyhow::Result<()> {
    let Some(members) = view["members"].as_array() else {
        bail!("unexpected answer: {view}");
    };
    println!(
        "membership at log index {}{}",
        view["log_index"],
        if view["joint"].as_bool() == Some(true) {
            " (joint: a change is being committed)"
        } else {
            ""
        }
    );
    let mut table = TextTable::new(&[
        ("ID", Align::Left),
        ("KIND", Align::Left),
        ("API", Align::Left),
        ("RAFT", Align::Left),
        ("INCARNATION", Align::Left),
        ("STATE", Align::Left),
    ]);
    for m in members {
        let kind = if m["voter"].as_bool() == Some(true) {
            "voter"
        } else {
            "learner"
        };
        table.row(vec![
            m["id"]
                .as_u64()
                .map_or("-".to_string(), |id| id.to_string()),
            kind.to_string(),
            m["api_addr"].as_str().unwrap_or("-").to_string(),
            m["raft_addr"].as_str().unwrap_or("-").to_string(),
            m["incarnation"].as_str().unwrap_or("-").to_string(),
            m["state"].as_str().unwrap_or("-").to_string(),
        ]);
    }
    table.print();
    Ok(())
}
