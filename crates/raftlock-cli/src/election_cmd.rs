//! `raftlock election show|observe NAME`.

use clap::{Args, Subcommand};
use futures::StreamExt;
use raftlock_client::{Leader, LockClient};
use serde_json::{json, Value};

use crate::api::{cell, print_json, Api, Output};
use crate::inspect::Endpoints;

#[derive(Args)]
pub struct ElectionArgs {
    #[command(subcommand)]
    command: ElectionCommand,
    #[command(flatten)]
    endpoints: Endpoints,
}

#[derive(Subcommand)]
enum ElectionCommand {
    /// Show an election's leader and value.
    Show {
        /// Election name.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Print the leader now and at every change, until interrupted.
    Observe {
        /// Election name.
        name: String,
        /// Stop after this many events (the first is the current state).
        #[arg(long)]
        count: Option<usize>,
        /// One JSON object per line (`{"election", "leader"}`, as the API).
        #[command(flatten)]
        output: Output,
    },
}

fn leader_line(leader: &Value) -> String {
    if leader.is_null() {
        return "no leader".into();
    }
    format!(
        "leader: {}  session {}  principal {}  fencing token {}",
        cell(&leader["value"]),
        cell(&leader["session_id"]),
        cell(&leader["principal"]),
        cell(&leader["fencing_token"])
    )
}

/// A leader as the API's JSON shows it (`GET /v1/elections/{name}`).
fn leader_json(leader: Option<&Leader>) -> Value {
    leader.map_or(Value::Null, |l| {
        json!({
            "session_id": l.session.map(|s| s.to_string()),
            "principal": l.principal,
            "value": l.value,
            "node": l.node,
            "fencing_token": l.fencing_token,
        })
    })
}

pub async fn run(args: ElectionArgs) -> anyhow::Result<()> {
    match args.command {
        ElectionCommand::Show { name, output } => {
            let body = Api::new(&args.endpoints)?
                .get(&format!("/v1/elections/{name}"))
                .await?;
            if output.json {
                return print_json(&body);
            }
            println!("election: {name}");
            println!("{}", leader_line(&body["leader"]));
            Ok(())
        }
        ElectionCommand::Observe {
            name,
            count,
            output,
        } => {
            // The client's observer: reconnects and fails over by itself.
            let client = args.endpoints.client()?;
            let mut events = client.observe(&name);
            let mut seen = 0;
            while count.is_none_or(|c| seen < c) {
                let Some(event) = events.next().await else {
                    break;
                };
                let leader = leader_json(event?.as_ref());
                if output.json {
                    println!("{}", json!({"election": name, "leader": leader}));
                } else {
                    println!("{}", leader_line(&leader));
                }
                seen += 1;
            }
            Ok(())
        }
    }
}
