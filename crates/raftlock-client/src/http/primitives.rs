//! Read-write locks, semaphores and multi-locks over HTTP (docs/api.md).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::wire::{millis, parse, session_id, SessionOnly};
use super::{Call, HttpClient};
use raftlock_api::{Mode, QueueKind};

use crate::error::Result;
use crate::primitives::{check_shared, shared_kind};
use crate::types::{checked, Grant, Poll, SessionId};

#[derive(Serialize)]
struct SharedAcquire<'a> {
    session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    permits: Option<u64>,
    wait_ms: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    keep_queued: bool,
}

#[derive(Deserialize)]
struct SharedGranted {
    node: String,
    fencing_token: u64,
    session_id: String,
}

#[derive(Serialize)]
struct MultiAcquire<'a> {
    session_id: String,
    locks: &'a [String],
    wait_ms: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    keep_queued: bool,
}

#[derive(Serialize)]
struct MultiRelease<'a> {
    session_id: String,
    locks: &'a [String],
}

#[derive(Deserialize)]
struct MultiGranted {
    session_id: String,
    locks: Vec<LockGranted>,
}

#[derive(Deserialize)]
struct LockGranted {
    lock: String,
    node: String,
    fencing_token: u64,
}

/// `/v1/rwlocks` or `/v1/semaphores`.
fn base(kind: QueueKind) -> String {
    format!("/v1/{}", kind.segment())
}

pub(super) async fn acquire_shared(
    client: &HttpClient,
    name: &str,
    mode: Mode,
    session: SessionId,
    poll: Poll,
) -> Result<Grant> {
    let kind = shared_kind(mode)?;
    let permits = match mode {
        Mode::Permits(n) => Some(n),
        _ => None,
    };
    let mode = mode.rw_name();
    let path = format!("{}/{}/acquire", base(kind), checked(name)?);
    let call = Call::new(Method::POST, path)
        .json(&SharedAcquire {
            session_id: session.to_string(),
            mode,
            permits,
            wait_ms: millis(poll.wait),
            keep_queued: poll.keep_queued,
        })
        .wait(poll.wait);
    let granted: SharedGranted = parse(&client.call(call).await?)?;
    Ok(Grant {
        name: name.to_string(),
        node: granted.node,
        fencing_token: granted.fencing_token,
        session: session_id(&granted.session_id)?,
    })
}

pub(super) async fn release_shared(
    client: &HttpClient,
    name: &str,
    kind: QueueKind,
    session: SessionId,
) -> Result<()> {
    check_shared(kind)?;
    let path = format!("{}/{}/release", base(kind), checked(name)?);
    let call = Call::new(Method::POST, path)
        .json(&SessionOnly {
            session_id: session.to_string(),
        })
        .gone_is_done();
    client.call(call).await.map(drop)
}

pub(super) async fn acquire_multi(
    client: &HttpClient,
    locks: &[String],
    session: SessionId,
    poll: Poll,
) -> Result<Vec<Grant>> {
    let call = Call::new(Method::POST, "/v1/multilocks/acquire".into())
        .json(&MultiAcquire {
            session_id: session.to_string(),
            locks,
            wait_ms: millis(poll.wait),
            keep_queued: poll.keep_queued,
        })
        .wait(poll.wait);
    let granted: MultiGranted = parse(&client.call(call).await?)?;
    let session = session_id(&granted.session_id)?;
    Ok(granted
        .locks
        .into_iter()
        .map(|l| Grant {
            name: l.lock,
            node: l.node,
            fencing_token: l.fencing_token,
            session,
        })
        .collect())
}

pub(super) async fn release_multi(
    client: &HttpClient,
    locks: &[String],
    session: SessionId,
) -> Result<()> {
    let call = Call::new(Method::POST, "/v1/multilocks/release".into())
        .json(&MultiRelease {
            session_id: session.to_string(),
            locks,
        })
        .gone_is_done();
    client.call(call).await.map(drop)
}
