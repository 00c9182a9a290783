//! Typed operations on the etcd-style key space (core `kv/`) and on
//! sessions as etcd leases: what the etcd door serves, without closures
//! over the state machine or hand-built commands (docs/design.md, "Front
//! doors over one contract"). A lease is a raftlock session whose id fits
//! etcd's positive 63-bit lease ids; its keys go when the session ends.

use std::time::Duration;

use raftlock_core::kv::{KvEvent, KvOp, KvResponseOp, RangeRequest, RangeResult};
use raftlock_core::{Command, CoreError, Response, SessionId};
use tokio::sync::watch;

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::tree_ops::AtRevision;
use crate::ops::{unexpected, Consistency, OpenedSession};

/// A lease as etcd's `LeaseTimeToLive` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// The session's id.
    pub id: SessionId,
    /// Its granted TTL in milliseconds.
    pub ttl_ms: u64,
    /// The keys attached to it, in order.
    pub keys: Vec<Vec<u8>>,
}

/// Events a watch asked for, and the state's revision they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEvents {
    /// Oldest first; `Err(compact_revision)` when some are no longer kept.
    pub events: Result<Vec<KvEvent>, u64>,
    /// The state's revision at the read (every later event is above it).
    pub revision: u64,
}

/// The largest etcd lease id (etcd's ids are positive `int64`s).
pub const MAX_LEASE_ID: u128 = i64::MAX as u128;

impl Node {
    /// A range read of the key space, after a read-index barrier unless
    /// stale.
    pub async fn kv_range(
        &self,
        request: RangeRequest,
        consistency: Consistency,
    ) -> Result<RangeResult, NodeError> {
        self.read(consistency, |s| s.kv().range(&request, s.revision()))
            .await?
            .map_err(NodeError::from)
    }

    /// A key-space write (put, delete range, transaction, compact);
    /// returns its answer and the state's revision after it.
    pub async fn kv_write(&self, op: KvOp) -> Result<AtRevision<KvResponseOp>, NodeError> {
        let (_, applied) = self.replica.write(Command::Kv(op)).await?;
        match applied.result? {
            Response::Kv(answer) => Ok(AtRevision {
                value: answer.op,
                revision: applied.revision,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// This replica's kept key-space events at revision `start` or later
    /// on `[key, range_end)` (etcd's range conventions). No barrier: a
    /// watch follows this replica's applied state.
    pub async fn kv_events_since(
        &self,
        start: u64,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<KvEvents, NodeError> {
        self.read(Consistency::Stale, |s| KvEvents {
            events: s.kv().events_since(start, key, range_end),
            revision: s.revision(),
        })
        .await
    }

    /// Signals after every entry this replica applies (subscribe, then
    /// read: nothing is missed).
    pub fn subscribe_kv(&self) -> watch::Receiver<u64> {
        self.replica.shared.applied_index.subscribe()
    }

    /// Opens a session to serve as an etcd lease: with id `id` if given
    /// (at most [`MAX_LEASE_ID`]), else a random one in range. A TTL below
    /// the cluster's minimum is raised to it, as etcd raises a lease's TTL
    /// to its minimum; one above the maximum is refused. With a
    /// `principal` (the etcd door's authenticated token name) the session
    /// is recorded as that principal's, as [`open_session_as`] records it.
    ///
    /// [`open_session_as`]: Node::open_session_as
    pub async fn open_lease(
        &self,
        id: Option<SessionId>,
        ttl: Duration,
        principal: Option<&str>,
    ) -> Result<OpenedSession, NodeError> {
        let s = &self.replica.config.settings;
        let ttl_ms = u64::try_from(ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(s.session_ttl_min_ms);
        if ttl_ms > s.session_ttl_max_ms {
            return Err(CoreError::Invalid(format!(
                "too large lease TTL (at most {} ms)",
                s.session_ttl_max_ms
            ))
            .into());
        }
        let id = match id {
            Some(id) if id.0 == 0 || id.0 > MAX_LEASE_ID => {
                return Err(CoreError::Invalid("lease id out of range".into()).into())
            }
            Some(id) => {
                if self.session_exists(id, Consistency::Linearizable).await? {
                    return Err(CoreError::SessionConflict(id).into());
                }
                id
            }
            None => SessionId(rand::random_range(1..=MAX_LEASE_ID)),
        };
        self.open_checked(id, principal, "etcd lease".to_string(), ttl_ms)
            .await
    }

    /// A lease's TTL and keys; `None` if the session is not open.
    pub async fn lease(
        &self,
        id: SessionId,
        consistency: Consistency,
    ) -> Result<Option<LeaseView>, NodeError> {
        self.read(consistency, |s| {
            s.session_lease(id).map(|l| LeaseView {
                id,
                ttl_ms: l.ttl_ms,
                keys: s.kv().lease_keys(id),
            })
        })
        .await
    }

    /// The open sessions whose ids are etcd lease ids, in order.
    pub async fn leases(&self, consistency: Consistency) -> Result<Vec<SessionId>, NodeError> {
        self.leases_visible(consistency, |_| true).await
    }

    /// As [`leases`](Self::leases), only those whose principal (`None`:
    /// opened without one) `visible` lets through.
    pub async fn leases_visible(
        &self,
        consistency: Consistency,
        visible: impl Fn(Option<&str>) -> bool,
    ) -> Result<Vec<SessionId>, NodeError> {
        self.read(consistency, |s| {
            s.session_leases()
                .map(|l| l.id)
                .filter(|id| id.0 != 0 && id.0 <= MAX_LEASE_ID)
                .filter(|id| visible(s.session_principal(*id).flatten()))
                .collect()
        })
        .await
    }
}

/// Sizes of the key space, for etcd's `Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvStats {
    /// Live keys.
    pub keys: usize,
    /// Approximate bytes of keys, values and kept history.
    pub approximate_bytes: usize,
    /// The compact revision.
    pub compact_revision: u64,
    /// The state's revision.
    pub revision: u64,
}

impl Node {
    /// The key space's sizes and floor.
    pub async fn kv_stats(&self, consistency: Consistency) -> Result<KvStats, NodeError> {
        self.read(consistency, |s| KvStats {
            keys: s.kv().len(),
            approximate_bytes: s.kv().approximate_bytes(),
            compact_revision: s.kv().compact_revision(),
            revision: s.revision(),
        })
        .await
    }
}
