//! `raftlock status` and `raftlock locks`: read-only views of a cluster.

use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Args;
use serde_json::Value;

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
}

#[derive(Args)]
pub struct LocksArgs {
    /// Only locks whose name starts with this.
    prefix: Option<String>,
    #[command(flatten)]
    endpoints: Endpoints,
}

/// GETs `path` from the first endpoint that answers with JSON.
async fn get_json(endpoints: &Endpoints, path: &str) -> anyhow::Result<Value> {
    let http = endpoints.http(Duration::from_secs(5))?;
    let mut last_error = None;
    for endpoint in endpoints.urls() {
        let url = format!("{}{path}", endpoint.trim_end_matches('/'));
        match http.get(&url).send().await {
            Ok(response) if response.status().is_success() => return Ok(response.json().await?),
            Ok(response) => {
                let status = response.status();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                last_error = Some(anyhow!(
                    "{url}: {status} {}",
                    body["message"].as_str().unwrap_or("")
                ));
            }
            Err(e) => last_error = Some(anyhow!("{url}: {e}")),
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow!("no endpoints given")))
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub async fn status(args: Endpoints) -> anyhow::Result<()> {
    let cluster = get_json(&args, "/v1/cluster").await?;
    let Some(members) = cluster["members"].as_array() else {
        bail!("unexpected answer from /v1/cluster: {cluster}");
    };
    println!(
        "leader: {}   term: {}",
        text(&cluster["leader_id"]),
        text(&cluster["term"])
    );
    let newest = members
        .iter()
        .filter_map(|m| m["applied_index"].as_u64())
        .max();
    println!(
        "{:<4} {:<10} {:<22} {:<22} {:>9} {:>6}",
        "ID", "ROLE", "API", "RAFT", "APPLIED", "LAG"
    );
    for m in members {
        let applied = m["applied_index"].as_u64();
        let lag = match (newest, applied) {
            (Some(n), Some(a)) => (n - a).to_string(),
            _ => "-".into(),
        };
        println!(
            "{:<4} {:<10} {:<22} {:<22} {:>9} {:>6}",
            text(&m["id"]),
            text(&m["role"]),
            text(&m["api_addr"]),
            text(&m["raft_addr"]),
            text(&m["applied_index"]),
            lag
        );
    }
    Ok(())
}

pub async fn locks(args: LocksArgs) -> anyhow::Result<()> {
    let prefix = args.prefix.unwrap_or_default();
    let query = format!("/v1/locks?prefix={}", urlencode(&prefix));
    let answer = get_json(&args.endpoints, &query).await?;
    let Some(locks) = answer["locks"].as_array() else {
        bail!("unexpected answer from /v1/locks: {answer}");
    };
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
        let holder = &lock["holder"];
        // The owner label; else the principal (another principal's
        // session id is not shown to us); else the session id.
        let who = ["owner", "principal", "session_id"]
            .iter()
            .find_map(|k| holder[*k].as_str().filter(|v| !v.is_empty()))
            .map_or_else(|| text(&holder["session_id"]), str::to_string);
        println!(
            "{:<32} {:<20} {:>10} {:>8}",
            text(&lock["lock"]),
            who,
            text(&holder["fencing_token"]),
            text(&lock["waiters"])
        );
    }
    Ok(())
}

/// Percent-encodes a query value (lock names use only safe characters and
/// '/', but a user may type anything).
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b':' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
