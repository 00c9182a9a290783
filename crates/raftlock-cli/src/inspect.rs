//! `raftlock status` and `raftlock locks`: read-only views of a cluster.

use std::time::Duration;

use crate::table::{Align, TextTable};
use clap::Args;
use raftlock_client::{HttpClient, HttpConfig};

#[derive(Args)]
pub struct Endpoints {
    /// Cluster API endpoints, comma-separated; the first that answers is used.
    #[arg(
        long,
        env = "RAFTLOCK_ENDPOINTS",
        default_value = crate::LOCAL_ENDPOINTS,
        value_delimiter = ','
    )]
    pub endpoints: Vec<String>,
    /// The bearer token to send, when the cluster defines tokens.
    #[command(flatten)]
    pub token: crate::token::TokenArgs,
    #[command(flatten)]
    pub tls: crate::client_tls::ClientTls,
}

impl Endpoints {
    /// The endpoints with the scheme the TLS flags ask for.
    pub fn urls(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| self.tls.url(e)).collect()
    }

    /// An HTTP client for these endpoints: the TLS flags, the token.
    pub fn http(&self, timeout: Duration) -> anyhow::Result<reqwest::Client> {
        Ok(self
            .tls
            .http()?
            .timeout(timeout)
            .default_headers(self.token.headers()?)
            .build()?)
    }

    /// The typed client's settings for these endpoints: the token, the
    /// TLS flags.
    pub fn client_config(&self) -> anyhow::Result<HttpConfig> {
        Ok(HttpConfig {
            tls: self.tls.files(),
            ..self.token.http_config()?
        })
    }

    /// The typed client for these endpoints.
    pub(crate) fn client(&self) -> anyhow::Result<HttpClient> {
        Ok(HttpClient::with_config(self.urls(), self.client_config()?)?)
    }
}

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    output: crate::output::Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

#[derive(Args)]
pub struct LocksArgs {
    /// Only locks whose name starts with this.
    prefix: Option<String>,
    /// List read-write locks (holders with their mode) instead of locks.
    #[arg(long, conflicts_with = "semaphores")]
    rwlocks: bool,
    /// List semaphores (their permits and holders) instead of locks.
    #[arg(long)]
    semaphores: bool,
    #[command(flatten)]
    output: crate::output::Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

/// A value that may be unknown, as a table cell.
fn cell(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let answer = args
        .endpoints
        .client()?
        .cluster_answered()
        .await
        .map_err(crate::output::failure)?;
    if args.output.json {
        return crate::output::print_body(&answer.body);
    }
    let cluster = answer.value;
    println!(
        "leader: {}   term: {}",
        cell(cluster.leader_id),
        cluster.term
    );
    let newest = cluster.members.iter().filter_map(|m| m.applied_index).max();
    let mut table = TextTable::new(&[
        ("ID", Align::Left),
        ("ROLE", Align::Left),
        ("API", Align::Left),
        ("RAFT", Align::Left),
        ("APPLIED", Align::Right),
        ("LAG", Align::Right),
    ]);
    for m in &cluster.members {
        let lag = newest
            .zip(m.applied_index)
            .map(|(n, a)| n.saturating_sub(a));
        table.row(vec![
            m.id.to_string(),
            m.role.to_string(),
            m.api_addr.to_string(),
            m.raft_addr.to_string(),
            cell(m.applied_index),
            cell(lag),
        ]);
    }
    table.print();
    Ok(())
}

pub async fn locks(args: LocksArgs) -> anyhow::Result<()> {
    let prefix = args.prefix.unwrap_or_default();
    let route = match (args.rwlocks, args.semaphores) {
        (true, _) => "rwlocks",
        (_, true) => "semaphores",
        _ => "locks",
    };
    if args.output.json {
        let client = args.endpoints.client()?;
        let body = match route {
            "rwlocks" => client.rwlocks_answered(&prefix).await.map(|a| a.body),
            "semaphores" => client.semaphores_answered(&prefix).await.map(|a| a.body),
            _ => client.locks_answered(&prefix).await.map(|a| a.body),
        };
        return crate::output::print_body(&body.map_err(crate::output::failure)?);
    }
    if route != "locks" {
        return shared(&args.endpoints, &prefix, args.rwlocks).await;
    }
    let locks = args.endpoints.client()?.locks(&prefix).await?;
    if locks.is_empty() {
        println!("{}", nothing_listed("locks", &prefix));
        return Ok(());
    }
    let mut table = TextTable::new(&[
        ("LOCK", Align::Left),
        ("HOLDER", Align::Left),
        ("TOKEN", Align::Right),
        ("WAITERS", Align::Right),
    ]);
    for lock in locks {
        let holder = lock.holder.as_ref();
        // The owner label; else the principal (another principal's
        // session id is not shown to us); else the session id.
        let who = holder.map(|h| {
            [Some(h.owner.clone()), h.principal.clone()]
                .into_iter()
                .flatten()
                .find(|v| !v.is_empty())
                .unwrap_or_else(|| cell(h.session))
        });
        // A lost holder's lock-delay runs: nobody holds it, nobody gets it.
        let who = who.or_else(|| lock.held_off.then(|| "(held off)".to_string()));
        table.row(vec![
            lock.name,
            cell(who),
            cell(holder.map(|h| h.fencing_token)),
            lock.waiters.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

/// Who a holder is in a table: the owner label, else the principal
/// (another principal's session id is not shown to us), else the session.
fn who(h: &raftlock_client::Holder) -> String {
    [Some(h.owner.clone()), h.principal.clone()]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| cell(h.session))
}

/// `raftlock locks --rwlocks|--semaphores`: one row per holder (several
/// may hold), the name and the waiter count on the first.
async fn shared(endpoints: &Endpoints, prefix: &str, rwlocks: bool) -> anyhow::Result<()> {
    let client = endpoints.client()?;
    // (name, permits, holders as (who, mode, token), waiters)
    type Row = (String, Option<u64>, Vec<(String, String, u64)>, u64);
    let rows: Vec<Row> = if rwlocks {
        client
            .rwlocks(prefix)
            .await?
            .into_iter()
            .map(|l| {
                let holders = l.holders.iter().map(|h| {
                    let mode = match h.mode {
                        raftlock_client::Mode::Write => "write",
                        _ => "read",
                    };
                    (who(&h.holder), mode.to_string(), h.holder.fencing_token)
                });
                (l.name, None, holders.collect(), l.waiters)
            })
            .collect()
    } else {
        client
            .semaphores(prefix)
            .await?
            .into_iter()
            .map(|s| {
                let holders = s
                    .holders
                    .iter()
                    .map(|h| (who(h), String::new(), h.fencing_token));
                (s.name, s.permits, holders.collect(), s.waiters)
            })
            .collect()
    };
    let what = if rwlocks {
        "read-write locks"
    } else {
        "semaphores"
    };
    if rows.is_empty() {
        println!("{}", nothing_listed(what, prefix));
        return Ok(());
    }
    let mut table = TextTable::new(&[
        (if rwlocks { "RWLOCK" } else { "SEMAPHORE" }, Align::Left),
        (if rwlocks { "MODE" } else { "PERMITS" }, Align::Left),
        ("HOLDER", Align::Left),
        ("TOKEN", Align::Right),
        ("WAITERS", Align::Right),
    ]);
    for (name, permits, holders, waiters) in rows {
        for (i, (holder, mode, token)) in holders.into_iter().enumerate() {
            let first = i == 0;
            let second = if rwlocks {
                mode
            } else {
                cell(permits.filter(|_| first))
            };
            table.row(vec![
                if first { name.clone() } else { String::new() },
                second,
                holder,
                token.to_string(),
                if first {
                    waiters.to_string()
                } else {
                    String::new()
                },
            ]);
        }
    }
    table.print();
    Ok(())
}

/// What a listing prints when nothing matched: `no locks`, or `no locks
/// under "orders/"` for a prefix.
fn nothing_listed(what: &str, prefix: &str) -> String {
    if prefix.is_empty() {
        format!("no {what}")
    } else {
        format!("no {what} under {prefix:?}")
    }
}
