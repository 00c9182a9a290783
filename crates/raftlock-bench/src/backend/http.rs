//! JSON over HTTP/1.1 for the raftlock and etcd clients: one pooled
//! reqwest client (keep-alive, TCP_NODELAY) shared by all sessions.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use reqwest::Method;
use serde_json::Value;

#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    /// "http://127.0.0.1:PORT" per member.
    bases: Arc<Vec<String>>,
}

/// A request that got no HTTP answer.
pub enum Transport {
    /// The per-request timeout passed.
    TimedOut,
    /// Connection refused/reset and the like: the member is not there.
    Failed(String),
}

impl Http {
    pub fn new(addrs: &[String]) -> anyhow::Result<Self> {
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(4096)
            .pool_idle_timeout(Duration::from_secs(90))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            client,
            bases: Arc::new(addrs.iter().map(|a| format!("http://{a}")).collect()),
        })
    }

    pub fn members(&self) -> usize {
        self.bases.len()
    }

    /// One request to member `member`; any status is an answer. The body
    /// is `Null` when empty or not JSON.
    pub async fn call(
        &self,
        member: usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(u16, Value), Transport> {
        let base = &self.bases[member % self.bases.len()];
        let mut req = self
            .client
            .request(method, format!("{base}{path}"))
            .timeout(timeout);
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(classify)?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(classify)?;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            parse_body(&bytes)
        };
        Ok((status, value))
    }
}

/// One JSON value, or the first line of a stream of them (etcd's gateway
/// streams `{"result": …}` lines for streaming RPCs such as keepalive).
fn parse_body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| {
        bytes
            .split(|&b| b == b'\n')
            .next()
            .and_then(|line| serde_json::from_slice(line).ok())
            .unwrap_or(Value::Null)
    })
}

fn classify(e: reqwest::Error) -> Transport {
    if e.is_timeout() {
        Transport::TimedOut
    } else {
        Transport::Failed(e.to_string())
    }
}

/// The `error` code of a raftlock error body, or the gateway's `error` text.
pub fn error_text(v: &Value) -> String {
    match v.get("error") {
        Some(Value::String(s)) => {
            let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
            format!("{s} {msg}").trim().to_string()
        }
        _ => v.to_string(),
    }
}
