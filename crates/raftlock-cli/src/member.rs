//! `raftlock member list|add|remove`: membership changes through any
//! member's API (the member takes them to the leader), sent as a joining
//! member's own request is (`raftlock_node::join`).

use std::time::Duration;

use crate::table::{Align, TextTable};
use anyhow::bail;
use clap::{Args, Subcommand};
use raftlock_node::join::{send_membership_request, MembershipRequest};
use serde_json::Value;

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
            let view = send(&http, &urls, MembershipRequest::List).await?;
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
        } => {
            let request = MembershipRequest::Add {
                id,
                api_addr,
                raft_addr,
            };
            send(&http, &urls, request).await?
        }
        MemberCommand::Remove { id, .. } => {
            send(&http, &urls, MembershipRequest::Remove(id)).await?
        }
    };
    print_view(&view)
}

/// Sends a membership request through the first endpoint that answers,
/// retrying while the cluster has no leader or another change is under
/// way ([`raftlock_node::join::send_membership_request`], which a joining
/// member's own request goes through too).
async fn send(
    http: &reqwest::Client,
    endpoints: &[String],
    request: MembershipRequest,
) -> anyhow::Result<Value> {
    Ok(send_membership_request(http, endpoints, &request).await?)
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
