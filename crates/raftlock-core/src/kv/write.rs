//! Writes to the key space (`Command::Kv`): put, delete range,
//! transaction and compact, with etcd's meaning. A transaction first
//! takes its path through the compares (nested ones included) on the
//! state before it, then checks every request on that path against that
//! same state (leases exist, `ignore_value`'s key exists, revisions are
//! readable), and only then writes: so it either applies whole or fails
//! without a change, as etcd's does. All writes of one command share the
//! state's next revision.

use serde::{Deserialize, Serialize};

use super::range::{RangeRequest, RangeResult};
use super::{in_range, Entry, KeyValue, KvStore};
use crate::error::CoreError;
use crate::state::{Outcome, StateMachine};
use crate::types::SessionId;
use crate::Response;

/// etcd's `PutRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutRequest {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The session (lease) to attach the key to; `None`: no lease.
    pub lease: Option<SessionId>,
    /// Answer the key as it was before.
    pub prev_kv: bool,
    /// Keep the current value (the key must exist).
    pub ignore_value: bool,
    /// Keep the current lease (the key must exist).
    pub ignore_lease: bool,
}

/// etcd's `DeleteRangeRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRangeRequest {
    /// First key.
    pub key: Vec<u8>,
    /// End of the range, as in `RangeRequest`.
    pub range_end: Vec<u8>,
    /// Answer the deleted keys.
    pub prev_kv: bool,
}

/// What a compare looks at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvCompareTarget {
    /// The version (0: absent).
    Version(u64),
    /// The create revision (0: absent).
    Create(u64),
    /// The mod revision (0: absent).
    Mod(u64),
    /// The value (an absent key fails every value compare).
    Value(Vec<u8>),
    /// The lease (`None`: no lease, or absent).
    Lease(Option<SessionId>),
}

/// How a compare compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvCompareResult {
    /// Equal.
    Equal,
    /// The key's is greater.
    Greater,
    /// The key's is less.
    Less,
    /// Not equal.
    NotEqual,
}

/// etcd's `Compare`: over one key, or every key of a range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCompare {
    /// How.
    pub result: KvCompareResult,
    /// What, and the value compared with.
    pub target: KvCompareTarget,
    /// The key.
    pub key: Vec<u8>,
    /// End of a range, as in `RangeRequest` (empty: `key` alone).
    pub range_end: Vec<u8>,
}

/// One request of a transaction's branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvRequest {
    /// A read.
    Range(RangeRequest),
    /// A put.
    Put(PutRequest),
    /// A delete.
    DeleteRange(DeleteRangeRequest),
    /// A nested transaction.
    Txn(TxnRequest),
}

/// etcd's `TxnRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRequest {
    /// All must hold for `success`.
    pub compare: Vec<KvCompare>,
    /// Requests when they do.
    pub success: Vec<KvRequest>,
    /// Requests otherwise.
    pub failure: Vec<KvRequest>,
}

/// A write to the key space, as stored in the log (`Command::Kv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvOp {
    /// Put one key.
    Put(PutRequest),
    /// Delete a range.
    DeleteRange(DeleteRangeRequest),
    /// A transaction.
    Txn(TxnRequest),
    /// Drop history below `revision` (etcd's `Compact`).
    Compact {
        /// The new compact revision.
        revision: u64,
    },
}

/// One request's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvResponseOp {
    /// A read's.
    Range(RangeResult),
    /// A put's: the key before, if asked and it existed.
    Put {
        /// The key before the put.
        prev_kv: Option<KeyValue>,
    },
    /// A delete's.
    DeleteRange {
        /// How many keys went.
        deleted: u64,
        /// Them, if asked.
        prev_kvs: Vec<KeyValue>,
    },
    /// A transaction's.
    Txn {
        /// True when the compares held.
        succeeded: bool,
        /// One answer per request of the branch taken.
        responses: Vec<KvResponseOp>,
    },
    /// Compacted.
    Compact,
}

/// The answer to a `KvOp` (`Response::Kv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvResponse {
    /// The op's answer.
    pub op: KvResponseOp,
}

/// The path a transaction takes: its branch, and the paths of the nested
/// transactions in that branch, decided on the state before it.
struct Path {
    succeeded: bool,
    nested: Vec<Path>,
}

fn compare_holds(kv: &KvStore, c: &KvCompare) -> bool {
    let range_end = &c.range_end;
    let found: Vec<&Entry> = if range_end.is_empty() {
        kv.keys.get(c.key.as_slice()).into_iter().collect()
    } else {
        kv.keys
            .range::<[u8], _>(super::from_key(&c.key))
            .take_while(|(k, _)| in_range(k, &c.key, range_end))
            .map(|(_, e)| e)
            .collect()
    };
    let absent = Entry {
        value: Box::default(),
        create_revision: 0,
        mod_revision: 0,
        version: 0,
        lease: None,
    };
    if found.is_empty() {
        if matches!(c.target, KvCompareTarget::Value(_)) {
            return false;
        }
        return compare_one(&absent, c);
    }
    found.iter().all(|e| compare_one(e, c))
}

fn compare_one(e: &Entry, c: &KvCompare) -> bool {
    use std::cmp::Ordering;
    let ord: Ordering = match &c.target {
        KvCompareTarget::Version(v) => e.version.cmp(v),
        KvCompareTarget::Create(v) => e.create_revision.cmp(v),
        KvCompareTarget::Mod(v) => e.mod_revision.cmp(v),
        KvCompareTarget::Value(v) => e.value.as_ref().cmp(v.as_slice()),
        KvCompareTarget::Lease(l) => lease_number(e.lease).cmp(&lease_number(*l)),
    };
    match c.result {
        KvCompareResult::Equal => ord == Ordering::Equal,
        KvCompareResult::Greater => ord == Ordering::Greater,
        KvCompareResult::Less => ord == Ordering::Less,
        KvCompareResult::NotEqual => ord != Ordering::Equal,
    }
}

fn lease_number(l: Option<SessionId>) -> u128 {
    l.map_or(0, |s| s.0)
}

fn path_of(kv: &KvStore, txn: &TxnRequest) -> Path {
    let succeeded = txn.compare.iter().all(|c| compare_holds(kv, c));
    let branch = if succeeded {
        &txn.success
    } else {
        &txn.failure
    };
    let nested = branch
        .iter()
        .filter_map(|r| match r {
            KvRequest::Txn(t) => Some(path_of(kv, t)),
            _ => None,
        })
        .collect();
    Path { succeeded, nested }
}

/// Refuses a branch that writes one key twice (etcd's "duplicate key
/// given in txn request"), nested branches included.
fn check_duplicates(txn: &TxnRequest) -> Result<(), CoreError> {
    fn writes<'a>(
        reqs: &'a [KvRequest],
        puts: &mut Vec<&'a [u8]>,
        dels: &mut Vec<(&'a [u8], &'a [u8])>,
    ) {
        for r in reqs {
            match r {
                KvRequest::Put(p) => puts.push(&p.key),
                KvRequest::DeleteRange(d) => dels.push((&d.key, &d.range_end)),
                KvRequest::Txn(t) => {
                    // Either nested branch may run: both count.
                    writes(&t.success, puts, dels);
                    writes(&t.failure, puts, dels);
                }
                KvRequest::Range(_) => {}
            }
        }
    }
    for branch in [&txn.success, &txn.failure] {
        let (mut puts, mut dels) = (Vec::new(), Vec::new());
        writes(branch, &mut puts, &mut dels);
        let mut sorted = puts.clone();
        sorted.sort();
        let twice = sorted.windows(2).any(|w| w[0] == w[1]);
        let deleted = puts
            .iter()
            .any(|p| dels.iter().any(|(k, end)| in_range(p, k, end)));
        if twice || deleted {
            return Err(CoreError::Invalid(
                "duplicate key given in txn request".into(),
            ));
        }
    }
    Ok(())
}

impl StateMachine {
    /// Applies a key-space write at revision `revision` (the state's next).
    pub(crate) fn kv_apply(&mut self, op: &KvOp, revision: u64) -> Result<Outcome, CoreError> {
        let (answer, changed) = match op {
            KvOp::Put(put) => {
                self.check_put(put)?;
                (self.kv_put(put, revision), true)
            }
            KvOp::DeleteRange(del) => {
                let answer = self.kv.delete_range(del, revision);
                let changed =
                    matches!(answer, KvResponseOp::DeleteRange { deleted, .. } if deleted > 0);
                (answer, changed)
            }
            KvOp::Txn(txn) => {
                check_duplicates(txn)?;
                let path = path_of(&self.kv, txn);
                self.check_txn(txn, &path)?;
                let mut changed = false;
                let answer = self.kv_txn(txn, &path, revision, &mut changed);
                (answer, changed)
            }
            KvOp::Compact { revision: to } => {
                if *to > self.revision {
                    return Err(CoreError::FutureRevision {
                        requested: *to,
                        current: self.revision,
                    });
                }
                if *to <= self.kv.history.compact_revision {
                    return Err(CoreError::Compacted {
                        compact_revision: self.kv.history.compact_revision,
                    });
                }
                self.kv.history.drop_below(*to);
                (KvResponseOp::Compact, true)
            }
        };
        self.kv.history.trim();
        let response = Response::Kv(KvResponse { op: answer });
        Ok(if changed {
            Outcome::changed(response)
        } else {
            Outcome::unchanged(response)
        })
    }

    fn check_put(&self, put: &PutRequest) -> Result<(), CoreError> {
        if put.key.is_empty() {
            return Err(CoreError::Invalid("key is not provided".into()));
        }
        // etcd's order: the key an `ignore_*` put keeps, then the lease.
        if (put.ignore_value || put.ignore_lease) && !self.kv.keys.contains_key(put.key.as_slice())
        {
            return Err(CoreError::KeyNotFound);
        }
        if let Some(lease) = put.lease {
            if !put.ignore_lease {
                self.require_session(lease)?;
            }
        }
        if put.ignore_lease && put.lease.is_some() {
            return Err(CoreError::Invalid(
                "lease ID must be 0 when ignore_lease is set".into(),
            ));
        }
        Ok(())
    }

    fn check_range(&self, r: &RangeRequest) -> Result<(), CoreError> {
        if r.revision > self.revision {
            return Err(CoreError::FutureRevision {
                requested: r.revision,
                current: self.revision,
            });
        }
        if r.revision != 0 && r.revision < self.kv.history.compact_revision {
            return Err(CoreError::Compacted {
                compact_revision: self.kv.history.compact_revision,
            });
        }
        Ok(())
    }

    /// Checks the requests on the transaction's path as etcd does: every
    /// put first (nested ones too), then every range, so a transaction
    /// with a bad put and a bad range fails on the put.
    fn check_txn(&self, txn: &TxnRequest, path: &Path) -> Result<(), CoreError> {
        self.check_path(txn, path, &mut |r| match r {
            KvRequest::Put(put) => self.check_put(put),
            _ => Ok(()),
        })?;
        self.check_path(txn, path, &mut |r| match r {
            KvRequest::Range(range) => self.check_range(range),
            _ => Ok(()),
        })
    }

    /// `check` on every request of the path's branches, nested
    /// transactions' in their place.
    fn check_path(
        &self,
        txn: &TxnRequest,
        path: &Path,
        check: &mut impl FnMut(&KvRequest) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        let branch = if path.succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let mut nested = path.nested.iter();
        for r in branch {
            match r {
                KvRequest::Txn(t) => match nested.next() {
                    Some(p) => self.check_path(t, p, check)?,
                    None => return Err(CoreError::Invalid("transaction path mismatch".into())),
                },
                other => check(other)?,
            }
        }
        Ok(())
    }

    fn kv_txn(
        &mut self,
        txn: &TxnRequest,
        path: &Path,
        revision: u64,
        changed: &mut bool,
    ) -> KvResponseOp {
        let branch = if path.succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let mut nested = path.nested.iter();
        let mut responses = Vec::with_capacity(branch.len());
        for r in branch {
            let answer = match r {
                KvRequest::Range(range) => {
                    // Reads see the transaction's earlier writes, at the
                    // revision it will commit at.
                    let current = if *changed { revision } else { self.revision };
                    let range = RangeRequest {
                        revision: range.revision.min(current),
                        ..range.clone()
                    };
                    let result = self.kv.range(&range, current).unwrap_or_default();
                    KvResponseOp::Range(result)
                }
                KvRequest::Put(put) => {
                    *changed = true;
                    self.kv_put(put, revision)
                }
                KvRequest::DeleteRange(del) => {
                    let answer = self.kv.delete_range(del, revision);
                    if matches!(answer, KvResponseOp::DeleteRange { deleted, .. } if deleted > 0) {
                        *changed = true;
                    }
                    answer
                }
                KvRequest::Txn(t) => match nested.next() {
                    Some(p) => self.kv_txn(t, p, revision, changed),
                    None => KvResponseOp::Txn {
                        succeeded: false,
                        responses: Vec::new(),
                    },
                },
            };
            responses.push(answer);
        }
        KvResponseOp::Txn {
            succeeded: path.succeeded,
            responses,
        }
    }

    /// A checked put.
    fn kv_put(&mut self, put: &PutRequest, revision: u64) -> KvResponseOp {
        let kv = &mut self.kv;
        let prev = kv.keys.get(put.key.as_slice()).cloned();
        let (value, lease) = match &prev {
            Some(p) => (
                if put.ignore_value {
                    p.value.clone()
                } else {
                    put.value.as_slice().into()
                },
                if put.ignore_lease { p.lease } else { put.lease },
            ),
            None => (put.value.as_slice().into(), put.lease),
        };
        let entry = Entry {
            value,
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            lease,
        };
        let key: Box<[u8]> = put.key.as_slice().into();
        if let Some(p) = &prev {
            if p.lease != lease {
                kv.unlease(&key, p.lease);
            }
        }
        if let Some(l) = lease {
            kv.by_lease.entry(l).or_default().insert(key.clone());
        }
        kv.history
            .record(revision, &key, Some(&entry), prev.clone());
        kv.keys.insert(key.clone(), entry);
        KvResponseOp::Put {
            prev_kv: if put.prev_kv {
                prev.map(|p| p.view(&key))
            } else {
                None
            },
        }
    }
}

impl KvStore {
    fn delete_range(&mut self, del: &DeleteRangeRequest, revision: u64) -> KvResponseOp {
        let keys: Vec<Box<[u8]>> = if del.range_end.is_empty() {
            self.keys
                .get_key_value(del.key.as_slice())
                .map(|(k, _)| k.clone())
                .into_iter()
                .collect()
        } else {
            self.keys
                .range::<[u8], _>(super::from_key(&del.key))
                .take_while(|(k, _)| in_range(k, &del.key, &del.range_end))
                .map(|(k, _)| k.clone())
                .collect()
        };
        let mut prev_kvs = Vec::new();
        for key in &keys {
            if let Some(prev) = self.keys.remove(key) {
                self.unlease(key, prev.lease);
                if del.prev_kv {
                    prev_kvs.push(prev.view(key));
                }
                self.history.record(revision, key, None, Some(prev));
            }
        }
        KvResponseOp::DeleteRange {
            deleted: keys.len() as u64,
            prev_kvs,
        }
    }
}

impl KvOp {
    /// Rough encoded size: keys and values, plus an allowance per
    /// request (the proposer's batching budget).
    pub fn weight(&self) -> usize {
        fn request(r: &KvRequest) -> usize {
            match r {
                KvRequest::Range(r) => r.key.len() + r.range_end.len() + 64,
                KvRequest::Put(p) => p.key.len() + p.value.len() + 32,
                KvRequest::DeleteRange(d) => d.key.len() + d.range_end.len() + 32,
                KvRequest::Txn(t) => txn(t),
            }
        }
        fn txn(t: &TxnRequest) -> usize {
            let compares: usize = t
                .compare
                .iter()
                .map(|c| {
                    let value = match &c.target {
                        KvCompareTarget::Value(v) => v.len(),
                        _ => 8,
                    };
                    c.key.len() + c.range_end.len() + value + 16
                })
                .sum();
            compares
                + t.success
                    .iter()
                    .chain(&t.failure)
                    .map(request)
                    .sum::<usize>()
        }
        128 + match self {
            KvOp::Put(p) => p.key.len() + p.value.len(),
            KvOp::DeleteRange(d) => d.key.len() + d.range_end.len(),
            KvOp::Txn(t) => txn(t),
            KvOp::Compact { .. } => 0,
        }
    }
}
