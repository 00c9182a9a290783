//! `raftlock session list|show|close`. Closing a session releases every
//! lock it holds and withdraws its waits: the way to break a stuck lock
//! (`raftlock lock-info NAME` names the holder's session).

use clap::{Args, Subcommand};
use reqwest::Method;

use crate::api::{cell, print_json, Api, Output};
use crate::inspect::Endpoints;

#[derive(Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    command: SessionCommand,
    #[command(flatten)]
    endpoints: Endpoints,
}

#[derive(Subcommand)]
enum SessionCommand {
    /// List live sessions (with tokens: those the token may see).
    List {
        /// At most this many (the server allows up to 10000).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        #[command(flatten)]
        output: Output,
    },
    /// Show one session: owner, TTL, the nodes (locks, waits) it holds.
    Show {
        /// Session id (32 hex digits).
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Close a session: releases its locks at once (breaks a stuck lock).
    Close {
        /// Session id (32 hex digits).
        id: String,
    },
}

pub async fn run(args: SessionArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.endpoints)?;
    match args.command {
        SessionCommand::List { limit, output } => {
            let body = api.get(&format!("/v1/sessions?limit={limit}")).await?;
            if output.json {
                return print_json(&body);
            }
            let sessions = body["sessions"].as_array().cloned().unwrap_or_default();
            if sessions.is_empty() {
                println!("no sessions");
                return Ok(());
            }
            println!(
                "{:<32}  {:<20} {:<12} {:>8} {:>5}",
                "SESSION", "OWNER", "PRINCIPAL", "TTL_MS", "NODES"
            );
            for s in &sessions {
                let nodes = s["nodes"].as_array().map_or(0, Vec::len);
                println!(
                    "{:<32}  {:<20} {:<12} {:>8} {:>5}",
                    cell(&s["session_id"]),
                    cell(&s["owner"]),
                    cell(&s["principal"]),
                    cell(&s["ttl_ms"]),
                    nodes
                );
            }
            if body["truncated"] == true {
                println!("(more sessions exist than --limit {limit})");
            }
            Ok(())
        }
        SessionCommand::Show { id, output } => {
            let body = api.get(&format!("/v1/sessions/{id}")).await?;
            if output.json {
                return print_json(&body);
            }
            println!("session:   {}", cell(&body["session_id"]));
            println!("owner:     {}", cell(&body["owner"]));
            println!("principal: {}", cell(&body["principal"]));
            println!("ttl_ms:    {}", cell(&body["ttl_ms"]));
            let nodes = body["nodes"].as_array().cloned().unwrap_or_default();
            println!("nodes:     {}", nodes.len());
            for n in &nodes {
                println!("  {}", cell(n));
            }
            Ok(())
        }
        SessionCommand::Close { id } => {
            api.call(Method::DELETE, &format!("/v1/sessions/{id}"), None)
                .await?;
            println!("closed session {id}: its locks are released");
            Ok(())
        }
    }
}
