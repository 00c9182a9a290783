//! `raftlock node get|put|ls`: the generic tree (docs/api.md, Nodes).

use anyhow::Context;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::{Args, Subcommand};
use raftlock_client::NodeWrite;
use std::io::Write;

use crate::inspect::Endpoints;
use crate::output::{failure, print_body, text, Output};

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

/// `/a/b` or `a/b` → `/a/b`; nothing → the root.
fn tree_path(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    let client = args.endpoints.client()?;
    match args.command {
        NodeCommand::Get { path, output } => {
            let answer = client.node(&tree_path(&path)).await.map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            let data = BASE64
                .decode(&answer.value.data)
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
            let how = NodeWrite {
                sequential,
                expected_version,
            };
            let answer = client
                .write_node(&tree_path(&path), data.as_bytes(), how)
                .await
                .map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            println!(
                "{} version {}",
                text(Some(&answer.value.path)),
                answer.value.version
            );
            Ok(())
        }
        NodeCommand::Ls { path, output } => {
            let path = tree_path(&path.unwrap_or_default());
            let answer = client.children(&path).await.map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            for child in &answer.value.children {
                println!("{}", text(Some(child)));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_or_without_a_leading_slash_name_the_same_node() {
        assert_eq!(tree_path("config/db"), "/config/db");
        assert_eq!(tree_path("/config/db"), "/config/db");
        assert_eq!(tree_path(""), "/");
        assert_eq!(tree_path("/"), "/");
    }
}
