//! raftlock's HTTP API (docs/api.md): sessions, long-poll acquire, release.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use super::http::{error_text, Http, Transport};
use super::{retry, Acquired, Backend, Step};
use crate::cluster::System;

/// Slack on top of `wait_ms` before the client gives up on a long poll.
const SLACK: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct Raftlock {
    http: Http,
    admin: Arc<AtomicUsize>,
}

pub struct Session {
    id: String,
    member: AtomicUsize,
}

impl Raftlock {
    pub fn new(addrs: &[String]) -> anyhow::Result<Self> {
        Ok(Self {
            http: Http::new(addrs)?,
            admin: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// POST with the usual retry rules: 503 (no leader / outcome unknown)
    /// again, unreachable member rotate, anything else is the answer.
    async fn post(
        &self,
        member: &AtomicUsize,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> anyhow::Result<(u32, u16, Value)> {
        let http = &self.http;
        let body = &body;
        retry(member, http.members(), |m, attempt| async move {
            match http
                .call(m, Method::POST, path, body.as_ref(), timeout)
                .await
            {
                Ok((503, v)) => Step::Again(error_text(&v)),
                Ok((status, v)) => Step::Done((attempt, status, v)),
                Err(Transport::TimedOut) => Step::Again(format!("{path}: timed out")),
                Err(Transport::Failed(e)) => Step::Rotate(e),
            }
        })
        .await
    }
}

impl Backend for Raftlock {
    type Session = Session;

    fn system(&self) -> System {
        System::Raftlock
    }

    async fn open(&self, member: usize, ttl: Duration) -> anyhow::Result<Session> {
        let m = AtomicUsize::new(member);
        let body = json!({"ttl_ms": ttl.as_millis() as u64, "owner": "raftlock-bench"});
        let (_, status, v) = self
            .post(&m, "/v1/sessions", Some(body), Duration::from_secs(10))
            .await?;
        let id = v.get("session_id").and_then(Value::as_str);
        match (status, id) {
            (200 | 201, Some(id)) => Ok(Session {
                id: id.to_string(),
                member: m,
            }),
            _ => Err(anyhow!("open session: {status} {}", error_text(&v))),
        }
    }

    async fn acquire(&self, s: &Session, lock: &str, wait: Duration) -> anyhow::Result<Acquired> {
        let body = json!({"session_id": s.id, "wait_ms": wait.as_millis() as u64});
        let path = format!("/v1/locks/{lock}/acquire");
        let (_, status, v) = self
            .post(&s.member, &path, Some(body), wait + SLACK)
            .await?;
        match status {
            200 => Ok(Acquired::Granted {
                token: v.get("fencing_token").and_then(Value::as_u64),
            }),
            408 => Ok(Acquired::TimedOut),
            409 if v.get("error").and_then(Value::as_str) == Some("lock_held") => {
                Ok(Acquired::TimedOut)
            }
            _ => Err(anyhow!("acquire {lock}: {status} {}", error_text(&v))),
        }
    }

    async fn release(&self, s: &Session, lock: &str) -> anyhow::Result<()> {
        let body = json!({"session_id": s.id});
        let path = format!("/v1/locks/{lock}/release");
        let (attempt, status, v) = self.post(&s.member, &path, Some(body), SLACK).await?;
        match status {
            204 | 200 => Ok(()),
            // A retry after an attempt that did apply finds nothing to release.
            403 | 404 if attempt > 0 => Ok(()),
            _ => Err(anyhow!("release {lock}: {status} {}", error_text(&v))),
        }
    }

    /// `PUT /v1/nodes/bench-put/{key}` (docs/api.md, Nodes): 201 on the
    /// first put, 200 after. Not tied to the session, as a plain write.
    async fn put(&self, s: &Session, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let path = format!("/v1/nodes/bench-put/{key}");
        let body = json!({"data": B64.encode(value)});
        let http = &self.http;
        let (path, body) = (&path, &body);
        retry(&s.member, http.members(), |m, _| async move {
            match http.call(m, Method::PUT, path, Some(body), SLACK).await {
                Ok((200 | 201, _)) => Step::Done(()),
                Ok((503, v)) => Step::Again(error_text(&v)),
                Ok((status, v)) => Step::Fail(anyhow!("put {path}: {status} {}", error_text(&v))),
                Err(Transport::TimedOut) => Step::Again(format!("{path}: timed out")),
                Err(Transport::Failed(e)) => Step::Rotate(e),
            }
        })
        .await
    }

    async fn keepalive(&self, s: &Session) -> anyhow::Result<()> {
        let path = format!("/v1/sessions/{}/keepalive", s.id);
        let (_, status, v) = self.post(&s.member, &path, None, SLACK).await?;
        match status {
            200 => Ok(()),
            _ => Err(anyhow!("keepalive: {status} {}", error_text(&v))),
        }
    }

    fn self_keepalive(&self) -> bool {
        false
    }

    async fn close(&self, s: Session) -> anyhow::Result<()> {
        let path = format!("/v1/sessions/{}", s.id);
        let http = &self.http;
        let path = &path;
        retry(&s.member, http.members(), |m, _| async move {
            match http.call(m, Method::DELETE, path, None, SLACK).await {
                Ok((204 | 200 | 404, _)) => Step::Done(()),
                Ok((503, v)) => Step::Again(error_text(&v)),
                Ok((status, v)) => Step::Fail(anyhow!("close: {status} {}", error_text(&v))),
                Err(Transport::TimedOut) => Step::Again("close timed out".into()),
                Err(Transport::Failed(e)) => Step::Rotate(e),
            }
        })
        .await
    }

    async fn queue_len(&self, lock: &str) -> anyhow::Result<usize> {
        let path = format!("/v1/locks/{lock}");
        let http = &self.http;
        let path = &path;
        let v = retry(&self.admin, http.members(), |m, _| async move {
            match http.call(m, Method::GET, path, None, SLACK).await {
                Ok((200, v)) => Step::Done(v),
                Ok((503, v)) => Step::Again(error_text(&v)),
                Ok((status, v)) => Step::Fail(anyhow!("inspect: {status} {}", error_text(&v))),
                Err(Transport::TimedOut) => Step::Again("inspect timed out".into()),
                Err(Transport::Failed(e)) => Step::Rotate(e),
            }
        })
        .await?;
        let holder = usize::from(v.get("holder").is_some_and(|h| !h.is_null()));
        let waiters = v
            .get("waiters")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Ok(holder + waiters)
    }

    fn bulk_chunk(&self) -> usize {
        64
    }

    /// No batch write in the API: one try-lock per lock, all in flight.
    async fn bulk_hold(&self, s: &Session, locks: &[String]) -> anyhow::Result<()> {
        let all = locks.iter().map(|l| self.acquire(s, l, Duration::ZERO));
        for r in futures::future::join_all(all).await {
            match r? {
                Acquired::Granted { .. } => {}
                Acquired::TimedOut => return Err(anyhow!("bulk hold: a fresh lock was held")),
            }
        }
        Ok(())
    }

    async fn serves_on(&self, member: usize, lock: &str) -> bool {
        let path = format!("/v1/locks/{lock}");
        match self
            .http
            .call(member, Method::GET, &path, None, Duration::from_secs(2))
            .await
        {
            Ok((200, v)) => v.get("holder").is_some_and(|h| !h.is_null()),
            _ => false,
        }
    }
}
