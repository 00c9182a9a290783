//! `raftlock election show|observe NAME`.

use clap::{Args, Subcommand};
use futures::StreamExt;
use raftlock_api::election::LeaderView;
use raftlock_client::{Leader, LockClient};
use serde_json::json;

use crate::inspect::Endpoints;
use crate::output::{failure, print_body, text, Output};

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

fn leader_line(leader: Option<&LeaderView>) -> String {
    let Some(leader) = leader else {
        return "no leader".into();
    };
    format!(
        "leader: {}  session {}  principal {}  fencing token {}",
        text(Some(&leader.value)),
        text(leader.session_id.as_deref()),
        text(leader.principal.as_deref()),
        leader.fencing_token
    )
}

/// A leader as the API's JSON shows it (`GET /v1/elections/{name}`).
fn leader_view(leader: &Leader) -> LeaderView {
    LeaderView {
        session_id: leader.session.map(|s| s.to_string()),
        principal: leader.principal.clone(),
        value: leader.value.clone(),
        node: leader.node.clone(),
        fencing_token: leader.fencing_token,
    }
}

pub async fn run(args: ElectionArgs) -> anyhow::Result<()> {
    let client = args.endpoints.client()?;
    match args.command {
        ElectionCommand::Show { name, output } => {
            let answer = client.election(&name).await.map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            println!("election: {name}");
            println!("{}", leader_line(answer.value.leader.as_ref()));
            Ok(())
        }
        ElectionCommand::Observe {
            name,
            count,
            output,
        } => {
            // The client's observer: reconnects and fails over by itself.
            let mut events = client.observe(&name);
            let mut seen = 0;
            while count.is_none_or(|c| seen < c) {
                let Some(event) = events.next().await else {
                    break;
                };
                let leader = event?.as_ref().map(leader_view);
                if output.json {
                    let event = json!({"election": name, "leader": leader});
                    println!("{event}");
                } else {
                    println!("{}", leader_line(leader.as_ref()));
                }
                seen += 1;
            }
            Ok(())
        }
    }
}
