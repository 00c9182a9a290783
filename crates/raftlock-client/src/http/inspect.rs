//! Read-only views for tools (`raftlock status`, `raftlock locks`): the
//! cluster and the lock listing, typed, with the client's failover.

use reqwest::Method;
use serde::Deserialize;

use raftlock_api::lock::{Holder as HolderBody, LockList};

use super::tools::Answered;
use super::wire;
use super::{Call, HttpClient};
use crate::error::{ClientError, Result};
use crate::types::{ClusterInfo, LockSummary, RwHolder, RwLockSummary, SemaphoreSummary};

#[derive(Deserialize)]
struct RwLockList {
    rwlocks: Vec<RwLockLine>,
}

#[derive(Deserialize)]
struct RwLockLine {
    rwlock: String,
    holders: Vec<SharedHolderBody>,
    waiters: u64,
}

#[derive(Deserialize)]
struct SemaphoreList {
    semaphores: Vec<SemaphoreLine>,
}

#[derive(Deserialize)]
struct SemaphoreLine {
    semaphore: String,
    permits: Option<u64>,
    holders: Vec<HolderBody>,
    waiters: u64,
}

/// A read-write lock holder: a lock holder's fields and its `mode`.
#[derive(Deserialize)]
struct SharedHolderBody {
    mode: String,
    #[serde(flatten)]
    holder: HolderBody,
}

impl SharedHolderBody {
    fn into_rw_holder(self) -> Result<RwHolder> {
        let mode = match self.mode.as_str() {
            "read" => raftlock_api::Mode::Read,
            "write" => raftlock_api::Mode::Write,
            other => {
                return Err(ClientError::Protocol(format!(
                    "unknown read-write lock mode {other:?}"
                )))
            }
        };
        Ok(RwHolder {
            mode,
            holder: wire::holder(self.holder)?,
        })
    }
}

impl HttpClient {
    /// The cluster as the first member that answers sees it.
    pub async fn cluster(&self) -> Result<ClusterInfo> {
        Ok(self.cluster_answered().await?.value)
    }

    /// As [`cluster`](Self::cluster), with the body as sent.
    pub async fn cluster_answered(&self) -> Result<Answered<ClusterInfo>> {
        self.answered(Call::new(Method::GET, "/v1/cluster".into()))
            .await
    }

    /// Locks whose name starts with `prefix` (every lock for `""`); with
    /// bearer tokens, only those the token may read.
    pub async fn locks(&self, prefix: &str) -> Result<Vec<LockSummary>> {
        Ok(self.locks_answered(prefix).await?.value)
    }

    /// As [`locks`](Self::locks), with the body as sent.
    pub async fn locks_answered(&self, prefix: &str) -> Result<Answered<Vec<LockSummary>>> {
        let list: Answered<LockList> = self.listing("locks", prefix).await?;
        list.try_map(|list| {
            list.locks
                .into_iter()
                .map(|line| {
                    Ok(LockSummary {
                        name: line.lock,
                        holder: line.holder.map(wire::holder).transpose()?,
                        waiters: line.waiters as u64,
                        lock_delay: line.lock_delay_ms.map(std::time::Duration::from_millis),
                        held_off: line.held_off,
                    })
                })
                .collect()
        })
    }

    /// Read-write locks whose name starts with `prefix` (every one with
    /// holders or waiters for `""`); with bearer tokens, only those the
    /// token may read.
    pub async fn rwlocks(&self, prefix: &str) -> Result<Vec<RwLockSummary>> {
        Ok(self.rwlocks_answered(prefix).await?.value)
    }

    /// As [`rwlocks`](Self::rwlocks), with the body as sent.
    pub async fn rwlocks_answered(&self, prefix: &str) -> Result<Answered<Vec<RwLockSummary>>> {
        let list: Answered<RwLockList> = self.listing("rwlocks", prefix).await?;
        list.try_map(|list| {
            list.rwlocks
                .into_iter()
                .map(|line| {
                    Ok(RwLockSummary {
                        name: line.rwlock,
                        holders: line
                            .holders
                            .into_iter()
                            .map(SharedHolderBody::into_rw_holder)
                            .collect::<Result<_>>()?,
                        waiters: line.waiters,
                    })
                })
                .collect()
        })
    }

    /// Semaphores whose name starts with `prefix`, as
    /// [`rwlocks`](Self::rwlocks) lists read-write locks.
    pub async fn semaphores(&self, prefix: &str) -> Result<Vec<SemaphoreSummary>> {
        Ok(self.semaphores_answered(prefix).await?.value)
    }

    /// As [`semaphores`](Self::semaphores), with the body as sent.
    pub async fn semaphores_answered(
        &self,
        prefix: &str,
    ) -> Result<Answered<Vec<SemaphoreSummary>>> {
        let list: Answered<SemaphoreList> = self.listing("semaphores", prefix).await?;
        list.try_map(|list| {
            list.semaphores
                .into_iter()
                .map(|line| {
                    Ok(SemaphoreSummary {
                        name: line.semaphore,
                        permits: line.permits,
                        holders: line
                            .holders
                            .into_iter()
                            .map(wire::holder)
                            .collect::<Result<_>>()?,
                        waiters: line.waiters,
                    })
                })
                .collect()
        })
    }

    /// `GET /v1/{route}?prefix=…`.
    async fn listing<T: serde::de::DeserializeOwned>(
        &self,
        route: &str,
        prefix: &str,
    ) -> Result<Answered<T>> {
        let path = format!("/v1/{route}?prefix={}", wire::percent_encode(prefix));
        self.answered(Call::new(Method::GET, path)).await
    }
}
