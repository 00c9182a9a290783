//! `raftlock member list|add|remove`: the membership, read through the
//! client; changes through any member's API (the member takes them to the
//! leader), sent as a joining member's own request is
//! (`raftlock_node::join`).

use std::time::Duration;

use crate::table::{Align, TextTable};
use anyhow::Context;
use clap::{Args, Subcommand};
use raftlock_api::cluster::Membership;
use raftlock_node::join::{send_membership_request, MembershipRequest};

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
        output: crate::output::Output,
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
    let view = match args.command {
        MemberCommand::List { output, endpoints } => {
            let answer = endpoints
                .client()?
                .membership()
                .await
                .map_err(crate::output::failure)?;
            if output.json {
                return crate::output::print_body(&answer.body);
            }
            answer.value
        }
        MemberCommand::Add {
            id,
            api_addr,
            raft_addr,
            endpoints,
        } => {
            let request = MembershipRequest::Add {
                id,
                api_addr,
                raft_addr,
            };
            send(&endpoints, request).await?
        }
        MemberCommand::Remove { id, endpoints } => {
            send(&endpoints, MembershipRequest::Remove(id)).await?
        }
    };
    print_view(&view);
    Ok(())
}

/// Sends a membership change through the first endpoint that answers,
/// retrying while the cluster has no leader or another change is under
/// way, for up to a minute: the path a joining member's own request
/// takes too ([`raftlock_node::join::send_membership_request`]).
async fn send(endpoints: &Endpoints, request: MembershipRequest) -> anyhow::Result<Membership> {
    // An add waits for the new member to catch up (bounded at the leader
    // by about a minute).
    let http = endpoints.http(Duration::from_secs(120))?;
    let view = send_membership_request(&http, &endpoints.urls(), &request).await?;
    serde_json::from_value(view.clone()).with_context(|| format!("unexpected answer: {view}"))
}

fn print_view(view: &Membership) {
    println!(
        "membership at log index {}{}",
        view.log_index,
        if view.joint {
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
    for m in &view.members {
        let kind = if m.voter { "voter" } else { "learner" };
        table.row(vec![
            m.id.to_string(),
            kind.to_string(),
            m.api_addr.clone(),
            m.raft_addr.clone(),
            m.incarnation.as_deref().unwrap_or("-").to_string(),
            m.state.as_deref().unwrap_or("-").to_string(),
        ]);
    }
    table.print();
}
