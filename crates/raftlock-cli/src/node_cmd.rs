//! `raftlock node get|put|ls`: the generic tree (docs/api.md, Nodes).

use anyhow::Context;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;
use std::io::Write;

use crate::api::{cell, print_json, Api, Output};
use crate::inspect::Endpoints;

#[derive(Args)]
pub struct NodeArgs {
    #[command(subcommand)]
    command: NodeCommand,
    #[command(flatten)]
    endpoints: Endpoints,
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Print a node's data (raw bytes); --json for the node with its versions.
    Get {
        /// Node path, e.g. `config/db` or `/config/db`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Create or update a persistent node.
    Put {
        /// Node path.
        path: String,
        /// The data (UTF-8 text).
        data: String,
        /// Append a zero-padded counter to the name (`queue/item-` →
        /// `queue/item-0000000001`).
        #[arg(long)]
        sequential: bool,
        /// Write only if the node is at this version (0: must not exist).
        #[arg(long)]
        expected_version: Option<u64>,
        #[command(flatten)]
        output: Output,
    },
    /// List a node's children (the top level without a path).
    Ls {
        /// Node path; the root when absent.
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// `/a/b` or `a/b` → `/v1/nodes/a/b`; the root → `/v1/nodes`.
fn route(path: &str) -> String {
    match path.trim_start_matches('/') {
        "" => "/v1/nodes".into(),
        rest => format!("/v1/nodes/{rest}"),
    }
}

pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.endpoints)?;
    match args.command {
        NodeCommand::Get { path, output } => {
            let body = api.get(&route(&path)).await?;
            if output.json {
                return print_json(&body);
            }
            let data = BASE64
                .decode(body["data"].as_str().unwrap_or(""))
                .context("the server sent data that is not base64")?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&data)?;
            stdout.flush()?;
            Ok(())
        }
        NodeCommand::Put {
            path,
            data,
            sequential,
            expected_version,
            output,
        } => {
            let request = json!({
                "data": BASE64.encode(data.as_bytes()),
                "sequential": sequential,
                "expected_version": expected_version,
            });
            let body = api.call(Method::PUT, &route(&path), Some(&request)).await?;
            if output.json {
                return print_json(&body);
            }
            println!("{} version {}", cell(&body["path"]), cell(&body["version"]));
            Ok(())
        }
        NodeCommand::Ls { path, output } => {
            let path = path.unwrap_or_default();
            let body = api.get(&format!("{}?children=true", route(&path))).await?;
            if output.json {
                return print_json(&body);
            }
            for child in body["children"].as_array().into_iter().flatten() {
                println!("{}", cell(child));
            }
            Ok(())
        }
    }
}
