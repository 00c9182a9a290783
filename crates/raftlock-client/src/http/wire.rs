//! JSON bodies of the HTTP API, exactly as `docs/api.md` spells them. Requests
//! carry only documented fields (the server rejects unknown ones);
//! answers tolerate additions.

use serde::{Deserialize, Serialize};

use raftlock_api::{election, lock};

use crate::error::{ClientError, Result};
use crate::types::{FencingCheck, Holder, Leader, LockState, Poll, SessionId, Waiter};

/// Parses a JSON answer; a shape we do not understand is a protocol error.
pub(crate) fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
        ClientError::Protocol(format!("{e} in {text:?}"))
    })
}

/// Session ids travel as 32 hex digits.
pub(crate) fn session_id(text: &str) -> Result<SessionId> {
    text.parse()
        .map_err(|_| ClientError::Protocol(format!("bad session id {text:?}")))
}

pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Serialize)]
pub(crate) struct OpenSession<'a> {
    pub ttl_ms: u64,
    pub owner: &'a str,
}

impl<'a> OpenSession<'a> {
    pub fn new(owner: &'a str, ttl: std::time::Duration) -> Self {
        OpenSession {
            ttl_ms: millis(ttl),
            owner,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct SessionOpened {
    pub session_id: String,
    pub ttl_ms: u64,
}

#[derive(Deserialize)]
pub(crate) struct Ttl {
    pub ttl_ms: u64,
}

#[derive(Serialize)]
pub(crate) struct SessionOnly {
    pub session_id: String,
}

#[derive(Serialize)]
pub(crate) struct Acquire {
    pub session_id: String,
    pub wait_ms: u64,
    /// Sent only when set, so older servers keep accepting plain acquires.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keep_queued: bool,
    /// Sent only when set, as `keep_queued`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_delay_ms: Option<u64>,
}

impl Acquire {
    pub fn new(session: SessionId, poll: Poll) -> Self {
        Acquire {
            session_id: session.to_string(),
            wait_ms: millis(poll.wait),
            keep_queued: poll.keep_queued,
            lock_delay_ms: poll.lock_delay.map(millis),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Acquired {
    pub lock: String,
    pub node: String,
    pub fencing_token: u64,
    pub session_id: String,
}

/// A holder of the contract's views as the client shows it.
pub(crate) fn holder(h: lock::Holder) -> Result<Holder> {
    Ok(Holder {
        session: h.session_id.as_deref().map(session_id).transpose()?,
        owner: h.owner,
        principal: h.principal,
        node: h.node,
        fencing_token: h.fencing_token,
        since_revision: h.since_revision,
    })
}

/// A lock of the contract's views (`GET /v1/locks/{name}`, or the
/// embedded node's typed read) as the client shows it.
pub(crate) fn lock_state(lock: lock::LockBody) -> Result<LockState> {
    let holder = lock.holder.map(holder).transpose()?;
    let waiters = lock
        .waiters
        .into_iter()
        .map(|w| {
            Ok(Waiter {
                session: w.session_id.as_deref().map(session_id).transpose()?,
                owner: w.owner,
                principal: w.principal,
                node: w.node,
            })
        })
        .collect::<Result<_>>()?;
    Ok(LockState {
        name: lock.lock,
        holder,
        waiters,
        lock_delay: lock.lock_delay_ms.map(std::time::Duration::from_millis),
        held_off: lock.held_off,
    })
}

/// A fencing check's answer as the client shows it.
pub(crate) fn fencing(a: lock::FencingAnswer) -> FencingCheck {
    FencingCheck {
        valid: a.valid,
        current_token: a.current_token,
    }
}

#[derive(Serialize)]
pub(crate) struct Campaign<'a> {
    pub session_id: String,
    pub value: &'a str,
    pub wait_ms: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keep_queued: bool,
}

impl<'a> Campaign<'a> {
    pub fn new(session: SessionId, value: &'a str, poll: Poll) -> Self {
        Campaign {
            session_id: session.to_string(),
            value,
            wait_ms: millis(poll.wait),
            keep_queued: poll.keep_queued,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Elected {
    pub node: String,
    pub fencing_token: u64,
}

#[derive(Serialize)]
pub(crate) struct Proclaim<'a> {
    pub session_id: String,
    pub value: &'a str,
}

/// Percent-encodes `text` for a URL's path or query, keeping `/` and the
/// characters that need no escape: tree paths may hold any Unicode but
/// control characters (ZooKeeper's rules), `?`, `#`, `%` and spaces
/// included.
pub(crate) fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b':' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An election of the contract's views (`GET /v1/elections/{name}`, each
/// observe event, or the embedded node's typed read) as the client shows
/// its leader.
pub(crate) fn leader(election: election::ElectionView) -> Result<Option<Leader>> {
    election
        .leader
        .map(|l| {
            Ok(Leader {
                session: l.session_id.as_deref().map(session_id).transpose()?,
                principal: l.principal,
                value: l.value,
                node: l.node,
                fencing_token: l.fencing_token,
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_body_parses_the_documented_shape() {
        let id = "0123456789abcdef0123456789abcdef";
        let text = format!(
            r#"{{"lock":"a/b","holder":{{"session_id":"{id}","owner":"w","node":"/locks/a/b/lock-0000000001","fencing_token":7,"since_revision":7}},"waiters":[{{"session_id":"{id}","owner":"w","node":"n"}}],"extra":1}}"#
        );
        let state = parse::<lock::LockBody>(text.as_bytes())
            .and_then(lock_state)
            .expect("parses");
        assert_eq!(state.name, "a/b");
        assert_eq!(state.holder.map(|h| h.fencing_token), Some(7));
        assert_eq!(state.waiters.len(), 1);
        assert!(parse::<lock::LockBody>(b"{}").is_err());
        let bad = br#"{"lock":"a","holder":{"session_id":"zz","node":"n","fencing_token":1}}"#;
        assert!(parse::<lock::LockBody>(bad).and_then(lock_state).is_err());
    }
}
