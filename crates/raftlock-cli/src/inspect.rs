//! `raftlock status` and `raftlock locks`: read-only views of a cluster.

use std::time::Duration;

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
    output: crate::api::Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

#[derive(Args)]
pub struct LocksArgs {
    /// Only locks whose name starts with this.
    prefix: Option<String>,
    #[command(flatten)]
    output: crate::api::Output,
    #[command(flatten)]
    endpoints: Endpoints,
}

/// A value that may be unknown, as a table cell.
fn cell(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    if args.output.json {
        let body = crate::api::Api::new(&args.endpoints)?
            .get("/v1/cluster")
            .await?;
        return crate::api::print_json(&body);
    }
    let cluster = args.endpoints.client()?.cluster().await?;
    println!(
        "leader: {}   term: {}",
        cell(cluster.leader_id),
        cluster.term
    );
    let newest = cluster.members.iter().filter_map(|m| m.applied_index).max();
    println!(
        "{:<4} {:<10} {:<22} {:<22} {:>9} {:>6}",
        "ID", "ROLE", "API", "RAFT", "APPLIED", "LAG"
    );
    for m in &cluster.members {
        let lag = newest
            .zip(m.applied_index)
            .map(|(n, a)| n.saturating_sub(a));
        println!(
            "{:<4} {:<10} {:<22} {:<22} {:>9} {:>6}",
            m.id,
            m.role,
            m.api_addr,
            m.raft_addr,
            cell(m.applied_index),
            cell(lag)
        );
    }
    Ok(())
}

pub async fn locks(args: LocksArgs) -> anyhow::Result<()> {
    let prefix = args.prefix.unwrap_or_default();
    if args.output.json {
        let api = crate::api::Api::new(&args.endpoints)?;
        // The prefix as a query value: percent-encode what is not a name character.
        let query: String = prefix
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b':' | b'-' | b'/' => {
                    (b as char).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect();
        let body = api.get(&format!("/v1/locks?prefix={query}")).await?;
        return crate::api::print_json(&body);
    }
    let locks = args.endpoints.client()?.locks(&prefix).await?;
    if locks.is_empty() {
        println!(
            "no locks{}",
            if prefix.is_empty() {
                String::new()
            } else {
                format!(" under {prefix:?}")
            }
        );
        return Ok(());
    }
    println!(
        "{:<32} {:<20} {:>10} {:>8}",
        "LOCK", "HOLDER", "TOKEN", "WAITERS"
    );
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
        println!(
            "{:<32} {:<20} {:>10} {:>8}",
            lock.name,
            cell(who),
            cell(holder.map(|h| h.fencing_token)),
            lock.waiters
        );
    }
    Ok(())
}
