//! `raftlock session list|show|close`. Closing a session releases every
//! lock it holds and withdraws its waits: the way to break a stuck lock
//! (`raftlock lock-info NAME` names the holder's session).

use crate::table::{Align, TextTable};
use clap::{Args, Subcommand};
use raftlock_client::{LockClient, SessionId};

use crate::inspect::Endpoints;
use crate::output::{failure, print_body, text, Output};

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

/// A session id as typed on the command line. What is not one names no
/// session: refused with the code the server would answer, before it goes
/// into a URL.
fn session_id(id: &str) -> anyhow::Result<SessionId> {
    id.parse().map_err(|_| {
        anyhow::anyhow!("session_not_found: {id:?} is not a session id (32 hex digits)")
    })
}

pub async fn run(args: SessionArgs) -> anyhow::Result<()> {
    let client = args.endpoints.client()?;
    match args.command {
        SessionCommand::List { limit, output } => {
            let answer = client.sessions(limit).await.map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            let list = answer.value;
            if list.sessions.is_empty() {
                println!("no sessions");
                return Ok(());
            }
            let mut table = TextTable::new(&[
                ("SESSION", Align::Left),
                ("OWNER", Align::Left),
                ("PRINCIPAL", Align::Left),
                ("TTL_MS", Align::Right),
                ("NODES", Align::Right),
            ]);
            for s in &list.sessions {
                table.row(vec![
                    text(Some(&s.session_id)),
                    text(Some(&s.owner)),
                    text(s.principal.as_deref()),
                    s.ttl_ms.to_string(),
                    s.nodes.len().to_string(),
                ]);
            }
            table.print();
            if list.truncated {
                println!("(more sessions exist than --limit {limit})");
            }
            Ok(())
        }
        SessionCommand::Show { id, output } => {
            let answer = client.session(session_id(&id)?).await.map_err(failure)?;
            if output.json {
                return print_body(&answer.body);
            }
            let session = answer.value;
            println!("session:   {}", text(Some(&session.session_id)));
            println!("owner:     {}", text(Some(&session.owner)));
            println!("principal: {}", text(session.principal.as_deref()));
            println!("ttl_ms:    {}", session.ttl_ms);
            println!("nodes:     {}", session.nodes.len());
            for n in &session.nodes {
                println!("  {}", text(Some(n)));
            }
            Ok(())
        }
        SessionCommand::Close { id } => {
            client
                .close_session(session_id(&id)?)
                .await
                .map_err(failure)?;
            println!("closed session {id}: its locks are released");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_session_id_is_refused_with_the_servers_code() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(session_id(id).expect("an id").to_string(), id);
        let e = session_id("../cluster").expect_err("not an id");
        assert!(e.to_string().starts_with("session_not_found:"), "{e}");
    }
}
