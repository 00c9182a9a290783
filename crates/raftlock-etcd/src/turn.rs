//! The queue the Lock and Election services wait in, as clientv3's
//! `concurrency` recipes build it over the key space: a key
//! `prefix<lease hex>` attached to the caller's lease, put unless the
//! lease already has it, and a turn that comes when no key under the
//! prefix has an older create revision.
//!
//! Unlike etcd it refuses lease 0 and an expired lease (no orphaned key),
//! and it answers only while the caller's key still exists, read
//! linearizably at the end: a lease that expired while its caller waited
//! is refused, never granted (etcd#11456). A caller that goes away while
//! it waits (the call canceled) has its key deleted, as etcd's recipes
//! delete it when their wait fails.

use raftlock_core::kv::{
    prefix_end, DeleteRangeRequest, KvCompare, KvCompareResult, KvCompareTarget, KvOp, KvRequest,
    KvResponseOp, PutRequest, RangeRequest, TxnRequest,
};
use raftlock_core::SessionId;
use raftlock_node::{AtRevision, Consistency};
use tonic::Status;

use crate::convert::lease;
use crate::errors;
use crate::Etcd;

/// A turn that came: the caller's key is the oldest under its prefix.
pub(crate) struct Turn {
    /// `prefix<lease hex>`.
    pub key: Vec<u8>,
    /// The key's create revision (an election's leader revision).
    pub create_revision: u64,
    /// The revision of the final, linearizable read (the answer's header).
    pub revision: u64,
}

/// How to treat a key the lease already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Keep it as it is (a lock's key holds no value).
    Keep,
    /// Give it the new value if it differs (a campaign again with the
    /// same lease proclaims its new value, as clientv3's does).
    Update,
}

fn unexpected() -> Status {
    Status::internal("etcdserver: unexpected answer")
}

/// `create_revision(key) == revision`: the key is still the one put.
fn still(key: &[u8], revision: u64) -> KvCompare {
    KvCompare {
        result: KvCompareResult::Equal,
        target: KvCompareTarget::Create(revision),
        key: key.to_vec(),
        range_end: Vec::new(),
    }
}

/// `still`, and, with `lease`, the key attached to that lease.
fn still_with(key: &[u8], revision: u64, lease: Option<Option<SessionId>>) -> Vec<KvCompare> {
    let mut compare = vec![still(key, revision)];
    if let Some(lease) = lease {
        compare.push(KvCompare {
            result: KvCompareResult::Equal,
            target: KvCompareTarget::Lease(lease),
            key: key.to_vec(),
            range_end: Vec::new(),
        });
    }
    compare
}

/// Deletes a waiter's key if its call is dropped before its turn came.
struct Abandoned {
    etcd: Option<Etcd>,
    key: Vec<u8>,
    create_revision: u64,
}

impl Abandoned {
    fn disarm(&mut self) {
        self.etcd = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(etcd) = self.etcd.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let key = std::mem::take(&mut self.key);
        let revision = self.create_revision;
        runtime.spawn(async move {
            if let Err(e) = etcd.delete_if_still(&key, revision, None).await {
                tracing::debug!(error = %e, "etcd door: an abandoned waiter's key stays until its lease ends");
            }
        });
    }
}

impl Etcd {
    /// Runs `txn` through the log: its outcome and the revision it wrote.
    pub(crate) async fn write_txn(
        &self,
        txn: TxnRequest,
    ) -> Result<AtRevision<KvResponseOp>, Status> {
        self.node
            .kv_write(KvOp::Txn(txn))
            .await
            .map_err(errors::status)
    }

    /// Deletes `key` if its create revision is still `revision` (and,
    /// with `lease`, it is attached to that lease); returns the revision
    /// of the write.
    pub(crate) async fn delete_if_still(
        &self,
        key: &[u8],
        revision: u64,
        lease: Option<Option<SessionId>>,
    ) -> Result<u64, Status> {
        let txn = TxnRequest {
            compare: still_with(key, revision, lease),
            success: vec![KvRequest::DeleteRange(DeleteRangeRequest {
                key: key.to_vec(),
                ..DeleteRangeRequest::default()
            })],
            failure: Vec::new(),
        };
        let done = self.write_txn(txn).await?;
        Ok(done.revision)
    }

    /// Puts `value` at `key` with `lease` if the key's create revision is
    /// still `revision` and the key is that lease's (and, with
    /// `oldest_under`, no key under that prefix is older: the key holds
    /// the turn); `false` if it is not (the key went, was put again, is
    /// another lease's, or waits). Returns the revision of the write too.
    pub(crate) async fn put_if_still(
        &self,
        key: &[u8],
        revision: u64,
        value: Vec<u8>,
        lease: SessionId,
        oldest_under: Option<&[u8]>,
    ) -> Result<(bool, u64), Status> {
        let mut compare = still_with(key, revision, Some(Some(lease)));
        if let Some(prefix) = oldest_under {
            compare.push(KvCompare {
                result: KvCompareResult::Greater,
                target: KvCompareTarget::Create(revision.saturating_sub(1)),
                key: prefix.to_vec(),
                range_end: prefix_end(prefix),
            });
        }
        let txn = TxnRequest {
            compare,
            success: vec![KvRequest::Put(PutRequest {
                key: key.to_vec(),
                value,
                lease: Some(lease),
                ..PutRequest::default()
            })],
            failure: Vec::new(),
        };
        let done = self.write_txn(txn).await?;
        match done.value {
            KvResponseOp::Txn { succeeded, .. } => Ok((succeeded, done.revision)),
            _ => Err(unexpected()),
        }
    }

    /// Queues lease `lease_id` under `prefix` with `value` and waits for
    /// its turn (module doc).
    pub(crate) async fn wait_turn(
        &self,
        prefix: &[u8],
        lease_id: i64,
        value: Vec<u8>,
        existing: Existing,
    ) -> Result<Turn, Status> {
        let session = lease(lease_id).ok_or_else(errors::lease_not_found)?;
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!("{lease_id:x}").as_bytes());
        let txn = TxnRequest {
            compare: vec![still(&key, 0)],
            success: vec![KvRequest::Put(PutRequest {
                key: key.clone(),
                value: value.clone(),
                lease: Some(session),
                ..PutRequest::default()
            })],
            failure: vec![KvRequest::Range(RangeRequest {
                key: key.clone(),
                ..RangeRequest::default()
            })],
        };
        let done = self.write_txn(txn).await?;
        // This member's state must include the put before it decides
        // anything from its own (stale) reads: a follower may lag.
        let mut written = done.revision;
        let mine = match done.value {
            KvResponseOp::Txn {
                succeeded: true, ..
            } => done.revision,
            KvResponseOp::Txn { responses, .. } => match responses.first() {
                Some(KvResponseOp::Range(r)) => {
                    let found = r.kvs.first().ok_or_else(errors::lease_not_found)?;
                    if existing == Existing::Update && found.value != value {
                        let (updated, at) = self
                            .put_if_still(&key, found.create_revision, value, session, None)
                            .await?;
                        if !updated {
                            return Err(errors::lease_not_found());
                        }
                        written = at;
                    }
                    found.create_revision
                }
                _ => return Err(unexpected()),
            },
            _ => return Err(unexpected()),
        };
        let mut abandoned = Abandoned {
            etcd: Some(self.clone()),
            key: key.clone(),
            create_revision: mine,
        };
        let revision = self.wait_oldest(prefix, &key, mine, written).await?;
        abandoned.disarm();
        Ok(Turn {
            key,
            create_revision: mine,
            revision,
        })
    }

    /// Waits until this member has applied `written`, no key under
    /// `prefix` is older than `mine`, and `key` still exists; then reads
    /// `key` linearizably and answers that read's revision.
    async fn wait_oldest(
        &self,
        prefix: &[u8],
        key: &[u8],
        mine: u64,
        written: u64,
    ) -> Result<u64, Status> {
        let mut applied = self.node.subscribe_kv();
        let older = RangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            max_create_revision: mine.saturating_sub(1),
            count_only: true,
            ..RangeRequest::default()
        };
        let exists = RangeRequest {
            key: key.to_vec(),
            count_only: true,
            ..RangeRequest::default()
        };
        loop {
            applied.borrow_and_update();
            let local = self
                .node
                .revision(Consistency::Stale)
                .await
                .map_err(errors::status)?;
            if local < written {
                if applied.changed().await.is_err() {
                    return Err(Status::unavailable("etcdserver: server stopped"));
                }
                continue;
            }
            let found = self
                .node
                .kv_range(older.clone(), Consistency::Stale)
                .await
                .map_err(errors::status)?;
            // Count is before filters (etcd's); the filtered keys are
            // what counts here, so ask again without count_only when
            // any key lies under the prefix at all.
            let waiting_on = if found.count == 0 {
                0
            } else {
                let listed = self
                    .node
                    .kv_range(
                        RangeRequest {
                            count_only: false,
                            keys_only: true,
                            ..older.clone()
                        },
                        Consistency::Stale,
                    )
                    .await
                    .map_err(errors::status)?;
                listed.kvs.len()
            };
            let still = self
                .node
                .kv_range(exists.clone(), Consistency::Stale)
                .await
                .map_err(errors::status)?;
            if still.count == 0 {
                return Err(errors::lease_not_found());
            }
            if waiting_on == 0 {
                break;
            }
            if applied.changed().await.is_err() {
                return Err(Status::unavailable("etcdserver: server stopped"));
            }
        }
        // Granted only while the key (and so the lease) still exists.
        let held = self
            .node
            .kv_range(exists, Consistency::Linearizable)
            .await
            .map_err(errors::status)?;
        if held.count == 0 {
            return Err(errors::lease_not_found());
        }
        Ok(held.revision)
    }
}
