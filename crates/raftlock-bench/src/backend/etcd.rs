//! etcd 3.4 through its v3 JSON gateway (the secondary `etcd-gateway`
//! row; `etcd_grpc` is etcd's fastest client): a lease per session, the server
//! side lock service (`/v3/lock/lock` waits on the predecessor key only,
//! like `concurrency.Mutex`), base64 keys, 64-bit ids as strings.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use super::http::{error_text, Http, Transport};
use super::{retry, Acquired, Backend, Step};
use crate::cluster::etcd::as_id;
use crate::cluster::System;

const CALL_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct Etcd {
    http: Http,
    admin: Arc<AtomicUsize>,
}

pub struct Session {
    /// Lease id, decimal, as the gateway wants it.
    lease: String,
    /// Lease id in hex: the lock service names a lock's key `{name}/{hex}`.
    lease_hex: String,
    member: AtomicUsize,
    /// Lock name → the key the lock service created (needed to unlock).
    keys: Mutex<HashMap<String, String>>,
}

fn b64(s: &str) -> String {
    B64.encode(s.as_bytes())
}

/// The range end covering every key with this prefix.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Counts the keys under `{lock}/` (holder plus waiters).
fn range_body(lock: &str) -> Value {
    let prefix = format!("{lock}/");
    json!({
        "key": b64(&prefix),
        "range_end": B64.encode(prefix_end(&prefix)),
        "count_only": true,
    })
}

fn count_of(v: &Value) -> usize {
    // Omitted when zero (proto3 JSON).
    v.get("count").and_then(as_id).unwrap_or(0) as usize
}

impl Etcd {
    pub fn new(addrs: &[String]) -> anyhow::Result<Self> {
        Ok(Self {
            http: Http::new(addrs)?,
            admin: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// POST with retries: 5xx (no leader, leader changed, timeout) again,
    /// unreachable member rotate; `Ok(None)` when the client-side timeout
    /// passed and `timeout_is_answer`.
    async fn post(
        &self,
        member: &AtomicUsize,
        path: &str,
        body: Value,
        timeout: Duration,
        timeout_is_answer: bool,
    ) -> anyhow::Result<Option<Value>> {
        let http = &self.http;
        let body = &body;
        retry(member, http.members(), |m, _| async move {
            match http.call(m, Method::POST, path, Some(body), timeout).await {
                Ok((200, v)) => Step::Done(Some(v)),
                Ok((s, v)) if s >= 500 => Step::Again(format!("{path}: {s} {}", error_text(&v))),
                Ok((s, v)) => Step::Fail(anyhow!("{path}: {s} {}", error_text(&v))),
                Err(Transport::TimedOut) if timeout_is_answer => Step::Done(None),
                Err(Transport::TimedOut) => Step::Again(format!("{path}: timed out")),
                Err(Transport::Failed(e)) => Step::Rotate(e),
            }
        })
        .await
    }
}

impl Backend for Etcd {
    type Session = Session;

    fn system(&self) -> System {
        System::EtcdGateway
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let m = AtomicUsize::new(member);
        let body = json!({"TTL": ttl.as_secs().max(1)});
        let v = self
            .post(&m, "/v3/lease/grant", body, CALL_TIMEOUT, false)
            .await?
            .unwrap_or_default();
        let id = v
            .get("ID")
            .and_then(as_id)
            .ok_or_else(|| anyhow!("lease grant: no ID in {v}"))?;
        Ok(Session {
            lease: id.to_string(),
            lease_hex: format!("{id:x}"),
            member: m,
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// The lock service has no try-lock and no server-side wait limit: the
    /// wait is the HTTP timeout, after which the gateway cancels the call
    /// and the server withdraws the key.
    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        if wait.is_zero() {
            return Err(anyhow!("etcd's lock service has no try-lock"));
        }
        let body = json!({"name": b64(lock), "lease": s.lease});
        match self
            .post(&s.member, "/v3/lock/lock", body, wait, true)
            .await?
        {
            None => Ok(Acquired::TimedOut),
            Some(v) => {
                let key = v
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| anyhow!("lock: no key in {v}"))?;
                if let Ok(mut keys) = s.keys.lock() {
                    keys.insert(lock.to_string(), key.to_string());
                }
                Ok(Acquired::Granted { token: None })
            }
        }
    }

    async fn release(&self, s: &Session, lock: &str) -> anyhow::Result<()> {
        let key = s
            .keys
            .lock()
            .ok()
            .and_then(|mut k| k.remove(lock))
            .ok_or_else(|| anyhow!("unlock {lock}: not held by this session"))?;
        self.post(
            &s.member,
            "/v3/lock/unlock",
            json!({"key": key}),
            CALL_TIMEOUT,
            false,
        )
        .await?;
        Ok(())
    }

    async fn put(&self, s: &Session, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let body = json!({"key": b64(&format!("bench-put/{key}")), "value": B64.encode(value)});
        self.post(&s.member, "/v3/kv/put", body, CALL_TIMEOUT, false)
            .await?;
        Ok(())
    }

    async fn keepalive(&self, s: &Session) -> anyhow::Result<()> {
        let v = self
            .post(
                &s.member,
                "/v3/lease/keepalive",
                json!({"ID": s.lease}),
                CALL_TIMEOUT,
                false,
            )
            .await?
            .unwrap_or_default();
        match v.pointer("/result/TTL").and_then(as_id) {
            Some(ttl) if ttl > 0 => Ok(()),
            _ => Err(anyhow!("keepalive: lease expired ({v})")),
        }
    }

    fn self_keepalive(&self) -> bool {
        false
    }

    async fn close(&self, s: Session) -> anyhow::Result<()> {
        let body = json!({"ID": s.lease});
        match self
            .post(&s.member, "/v3/lease/revoke", body, CALL_TIMEOUT, false)
            .await
        {
            Ok(_) => Ok(()),
            // Already expired.
            Err(e) if e.to_string().contains("not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn queue_len(&self, lock: &str) -> anyhow::Result<usize> {
        let v = self
            .post(
                &self.admin,
                "/v3/kv/range",
                range_body(lock),
                CALL_TIMEOUT,
                false,
            )
            .await?
            .unwrap_or_default();
        Ok(count_of(&v))
    }

    /// `--max-txn-ops` defaults to 128.
    fn bulk_chunk(&self) -> usize {
        128
    }

    /// One txn putting, for each lock, the key the lock service would have
    /// created for this lease.
    async fn bulk_hold(&self, s: &Session, locks: &[String]) -> anyhow::Result<()> {
        let ops: Vec<Value> = locks
            .iter()
            .map(|l| {
                json!({"request_put": {
                    "key": b64(&format!("{l}/{}", s.lease_hex)),
                    "value": "",
                    "lease": s.lease,
                }})
            })
            .collect();
        self.post(
            &s.member,
            "/v3/kv/txn",
            json!({"success": ops}),
            CALL_TIMEOUT,
            false,
        )
        .await?;
        Ok(())
    }

    async fn serves_on(&self, member: usize, lock: &str) -> bool {
        let body = range_body(lock);
        match self
            .http
            .call(
                member,
                Method::POST,
                "/v3/kv/range",
                Some(&body),
                Duration::from_secs(2),
            )
            .await
        {
            Ok((200, v)) => count_of(&v) > 0,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end("a/"), b"a0".to_vec());
        assert_eq!(count_of(&json!({"count": "3"})), 3);
        assert_eq!(count_of(&json!({})), 0);
    }
}
