//! Read-only views for tools (`raftlock status`, `raftlock locks`): the
//! cluster and the lock listing, typed, with the client's failover.

use reqwest::Method;
use serde::Deserialize;

use super::wire::{parse, HolderBody};
use super::{Call, HttpClient};
use crate::error::Result;
use crate::types::{ClusterInfo, LockSummary};

#[derive(Deserialize)]
struct LockList {
    locks: Vec<LockLine>,
}

#[derive(Deserialize)]
struct LockLine {
    lock: String,
    holder: Option<HolderBody>,
    waiters: u64,
}

impl HttpClient {
    /// The cluster as the first member that answers sees it.
    pub async fn cluster(&self) -> Result<ClusterInfo> {
        parse(
            &self
                .call(Call::new(Method::GET, "/v1/cluster".into()))
                .await?,
        )
    }

    /// Locks whose name starts with `prefix` (every lock for `""`); with
    /// bearer tokens, only those the token may read.
    pub async fn locks(&self, prefix: &str) -> Result<Vec<LockSummary>> {
        let path = format!("/v1/locks?prefix={}", query_value(prefix));
        let list: LockList = parse(&self.call(Call::new(Method::GET, path)).await?)?;
        list.locks
            .into_iter()
            .map(|line| {
                Ok(LockSummary {
                    name: line.lock,
                    holder: line.holder.map(HolderBody::into_holder).transpose()?,
                    waiters: line.waiters,
                })
            })
            .collect()
    }
}

/// Percent-encodes a query value (lock names use only safe characters and
/// '/', but a caller may pass anything).
fn query_value(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b':' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
