//! The day-2 commands' one way to call the HTTP API: JSON in, JSON out,
//! over the configured endpoints in order. A member that cannot answer
//! (unreachable, no leader, shutting down, a failed disk) is skipped for
//! the next; any other error is the answer. `--json` prints the body the
//! server sent, so scripts get exactly the shape docs/api.md and
//! `GET /v1/openapi.json` describe.

use std::time::Duration;

use anyhow::Context;
use reqwest::Method;
use serde_json::Value;

use crate::inspect::Endpoints;

/// An error answer of the API (`{"error": code, "message": …}`).
#[derive(Debug, thiserror::Error)]
#[error("{code} ({status}): {message}")]
pub struct ApiFailure {
    pub status: u16,
    pub code: String,
    pub message: String,
}

/// Codes that say "ask another member" (docs/api.md, Errors): no leader
/// is known here, or this member cannot serve.
fn try_another(code: &str) -> bool {
    raftlock_client::ErrorCode::parse(code)
        .is_some_and(|c| c == raftlock_client::ErrorCode::NoLeader || c.retry_elsewhere())
}

pub struct Api {
    http: reqwest::Client,
    urls: Vec<String>,
}

impl Api {
    /// A client for `endpoints` (their TLS flags and token).
    pub fn new(endpoints: &Endpoints) -> anyhow::Result<Api> {
        Ok(Api {
            http: endpoints.http(Duration::from_secs(30))?,
            urls: endpoints.urls(),
        })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// Sends the request to each endpoint in turn until one answers for
    /// the cluster; returns the body (`null` for an empty one).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut last: Option<anyhow::Error> = None;
        for url in &self.urls {
            let mut request = self.http.request(method.clone(), format!("{url}{path}"));
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    last = Some(anyhow::Error::new(e).context(format!("{url} did not answer")));
                    continue;
                }
            };
            let status = response.status();
            let text = response
                .text()
                .await
                .with_context(|| format!("reading {url}{path}"))?;
            let value: Value = if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).with_context(|| format!("{url}{path} sent no JSON"))?
            };
            if status.is_success() {
                return Ok(value);
            }
            let failure = ApiFailure {
                status: status.as_u16(),
                code: value["error"].as_str().unwrap_or("unknown").to_string(),
                message: value["message"].as_str().unwrap_or("").to_string(),
            };
            if try_another(&failure.code) {
                last = Some(anyhow::Error::new(failure).context(url.clone()));
                continue;
            }
            return Err(failure.into());
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no endpoints given")))
    }
}

/// Prints `value` as indented JSON.
pub fn print_json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A JSON value as a table cell: strings bare, `null` as `-`.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `--json` on a read command.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Output {
    /// Print the API's JSON answer instead of a table.
    #[arg(long)]
    pub json: bool,
}
