//! Each opcode dispatched (docs/zookeeper.md has the table), the session
//! opcodes (ping, closeSession), and the writes: the core's strict tree
//! operations (`TreeOps`), so a create needs its parent, a multi is all or
//! nothing, and a failed multi names the operation that failed. The reads
//! are in `reads.rs`, watch events in `events.rs`; the helpers they share
//! (ZooKeeper's subtree, stats from nodes) are here.

use raftlock_core::{CoreError, NodeAcl, NodeMeta, NodeStat, SessionId, TreeOp, TreeOpResult};
use raftlock_node::{Consistency, NodeError, NodeView};

use super::acl;
use super::conn::{renewal_failed, Conn, Step};
use super::errors::{core_code, failure, Failure, OpKind};
use super::session::zk_session_id;
use crate::wire::{
    xid, CreateRequest, ErrorCode, MultiOp, MultiRequest, MultiResponse, OpRequest, OpResult,
    ReplyBody, Request, Stat,
};

/// ZooKeeper's own subtree, served read-only and empty (ZooKeeper's
/// standalone answers): `/zookeeper`, its `config` and `quota`.
pub(super) const ZK_ROOT: &str = "/zookeeper";

pub(super) fn in_zk_subtree(path: &str) -> bool {
    path == ZK_ROOT
        || path
            .strip_prefix(ZK_ROOT)
            .is_some_and(|r| r.starts_with('/'))
}

/// A node as a ZooKeeper read sees it.
pub(super) struct Seen {
    pub stat: Stat,
    pub data: Vec<u8>,
    pub children: Vec<String>,
    /// Its stored ACL (`None`: the open one).
    pub acl: Option<Box<NodeAcl>>,
}

fn zk_version(version: u64) -> i32 {
    i32::try_from(version.saturating_sub(1)).unwrap_or(i32::MAX)
}

/// A ZooKeeper version condition (-1: any) as a raftlock one (1 higher;
/// a negative one matches nothing).
fn expected_version(version: i32) -> Option<u64> {
    (version != -1).then(|| u64::try_from(version).map_or(u64::MAX, |v| v + 1))
}

fn owner_id(owner: Option<SessionId>) -> i64 {
    owner.map_or(0, zk_session_id)
}

fn zxid(revision: u64) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

/// `Stat` from a node (docs/zookeeper.md, "What maps to what").
pub(super) fn stat_of(view: &NodeView) -> Stat {
    zk_stat(
        view.create_revision,
        view.mod_revision,
        view.version,
        view.ephemeral_owner,
        view.data.len() as u64,
        view.num_children,
        &view.meta,
    )
}

fn stat_of_core(stat: &NodeStat) -> Stat {
    zk_stat(
        stat.create_revision,
        stat.mod_revision,
        stat.version,
        stat.ephemeral_owner,
        stat.data_len,
        stat.num_children,
        &stat.meta,
    )
}

fn zk_stat(
    create_revision: u64,
    mod_revision: u64,
    version: u64,
    owner: Option<SessionId>,
    data_len: u64,
    num_children: u64,
    meta: &NodeMeta,
) -> Stat {
    let millis = |ms: u64| i64::try_from(ms).unwrap_or(i64::MAX);
    // ZooKeeper's counters are Java ints that wrap; ours wrap as u32.
    let counter = |n: u32| n as i32;
    Stat {
        czxid: zxid(create_revision),
        mzxid: zxid(mod_revision),
        ctime: millis(meta.created_ms),
        mtime: millis(meta.modified_ms),
        version: zk_version(version),
        cversion: counter(meta.child_version),
        aversion: counter(meta.acl_version),
        ephemeral_owner: owner_id(owner),
        data_length: i32::try_from(data_len).unwrap_or(i32::MAX),
        num_children: i32::try_from(num_children).unwrap_or(i32::MAX),
        pzxid: zxid(meta.child_revision),
    }
}

/// A create request as a strict create, or the code ZooKeeper answers
/// before looking at the tree. `auth_ids` are the connection's digest
/// ids, for the ACL's `auth` entries.
fn create_op(
    request: &CreateRequest,
    session: SessionId,
    auth_ids: &[String],
) -> Result<TreeOp, ErrorCode> {
    if request.mode.is_ttl() {
        return Err(ErrorCode::Unimplemented);
    }
    let acl = acl::fixup(&request.acl, auth_ids)?;
    if in_zk_subtree(&request.path) {
        return Err(if request.path == ZK_ROOT {
            ErrorCode::NodeExists
        } else {
            ErrorCode::BadArguments
        });
    }
    // A container is served as a persistent node (docs/zookeeper.md).
    let ephemeral = request.mode.is_ephemeral();
    let (path, data) = (
        request.path.clone(),
        request.data.clone().unwrap_or_default(),
    );
    let (session, sequential) = (ephemeral.then_some(session), request.mode.is_sequential());
    // The open ACL goes as the older `Create`, which every member in a
    // rolling upgrade decodes; another one needs `CreateWithAcl`.
    Ok(if NodeAcl::stored(&acl).is_none() {
        TreeOp::Create {
            path,
            data,
            session,
            sequential,
        }
    } else {
        TreeOp::CreateWithAcl {
            path,
            data,
            session,
            sequential,
            acl,
        }
    })
}

fn write_target(path: &str) -> Result<(), ErrorCode> {
    if in_zk_subtree(path) {
        return Err(ErrorCode::BadArguments);
    }
    Ok(())
}

/// A multi's operation as a strict one, with what kind of failure a
/// version mismatch means for it.
fn multi_op(
    op: &MultiOp,
    session: SessionId,
    auth_ids: &[String],
) -> Result<(TreeOp, OpKind), ErrorCode> {
    Ok(match op {
        MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
            (create_op(c, session, auth_ids)?, OpKind::Create)
        }
        MultiOp::CreateTtl(_) => return Err(ErrorCode::Unimplemented),
        MultiOp::Delete(d) => {
            write_target(&d.path)?;
            (
                TreeOp::Delete {
                    path: d.path.clone(),
                    expected_version: expected_version(d.version),
                },
                OpKind::Other,
            )
        }
        MultiOp::SetData(s) => {
            write_target(&s.path)?;
            (
                TreeOp::SetData {
                    path: s.path.clone(),
                    data: s.data.clone().unwrap_or_default(),
                    expected_version: expected_version(s.version),
                },
                OpKind::Other,
            )
        }
        MultiOp::Check(c) => {
            write_target(&c.path)?;
            (
                TreeOp::Check {
                    path: c.path.clone(),
                    expected_version: expected_version(c.version),
                },
                OpKind::Other,
            )
        }
        MultiOp::GetChildren(_) | MultiOp::GetData(_) => return Err(ErrorCode::BadArguments),
    })
}

/// ZooKeeper's answer to a multi whose operation `index` failed with
/// `err`: those before it read 0, those after it RUNTIMEINCONSISTENCY.
pub(super) fn failed_multi(len: usize, index: usize, err: ErrorCode) -> ReplyBody {
    let results = (0..len)
        .map(|i| OpResult::Error {
            err: match i.cmp(&index) {
                std::cmp::Ordering::Less => ErrorCode::Ok,
                std::cmp::Ordering::Equal => err,
                std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
            },
        })
        .collect();
    ReplyBody::Multi(MultiResponse { results })
}

impl Conn {
    /// Answers one request; whether the connection goes on.
    pub async fn handle(&mut self, request: Request) -> Step {
        let xid = request.xid;
        let outcome = match request.op {
            OpRequest::Ping => return self.ping().await,
            OpRequest::CloseSession => return self.close_session(xid).await,
            // Without tokens credentials are accepted unchecked (a
            // `digest` one still gives the ACLs' `auth` its id); with
            // them `auth` never gets here (access.rs).
            OpRequest::Auth(packet) => {
                if packet.scheme == "digest" {
                    self.remember_digest(&packet.auth);
                }
                self.push_ok(xid);
                return Step::Continue;
            }
            OpRequest::SetWatches(w) => return self.set_watches(xid, w).await,
            OpRequest::SetWatches2(w) => return self.set_watches2(xid, w).await,
            OpRequest::AddWatch(r) => return self.add_watch(xid, r).await,
            OpRequest::CheckWatches(r) => {
                self.check_or_remove_watches(xid, r, false);
                return Step::Continue;
            }
            OpRequest::RemoveWatches(r) => {
                self.check_or_remove_watches(xid, r, true);
                return Step::Continue;
            }
            OpRequest::GetEphemerals(r) => self.ephemerals(r.path).await,
            OpRequest::GetAllChildrenNumber(r) => self.all_children_number(r).await,
            OpRequest::Exists(r) => self.exists(r).await,
            OpRequest::GetData(r) => self.get_data(r).await,
            OpRequest::GetChildren(r) => self.get_children(r, false).await,
            OpRequest::GetChildren2(r) => self.get_children(r, true).await,
            OpRequest::GetAcl(r) => self.seen(&r.path).await.map(|(revision, seen)| {
                (
                    revision,
                    seen.map(|s| ReplyBody::GetAcl {
                        acl: acl::to_wire(s.acl.as_deref()),
                        stat: s.stat,
                    })
                    .ok_or(ErrorCode::NoNode),
                )
            }),
            OpRequest::SetAcl(r) => {
                // Stored and counted, not enforced (docs/zookeeper.md).
                // ZooKeeper's order: the path, then the ACL, then the node.
                let op = raftlock_core::path::validate_node_path(&r.path)
                    .map_err(|_| ErrorCode::BadArguments)
                    .and_then(|()| acl::fixup(&r.acl, &self.auth_ids))
                    .and_then(|acl| {
                        write_target(&r.path).map(|()| TreeOp::ReplaceAcl {
                            path: r.path.clone(),
                            expected_acl_version: (r.version != -1)
                                .then(|| u32::try_from(r.version).unwrap_or(u32::MAX)),
                            acl,
                        })
                    });
                self.write_one(op, OpKind::Other, |r| match r {
                    TreeOpResult::AclSet { stat: Some(stat) } => {
                        ReplyBody::Stat(stat_of_core(&stat))
                    }
                    _ => ReplyBody::Empty,
                })
                .await
            }
            OpRequest::Sync(r) => match self.node.revision(Consistency::Linearizable).await {
                Ok(revision) => Ok((revision, Ok(ReplyBody::Sync { path: r.path }))),
                Err(e) => Err(failure(&e, OpKind::Other)),
            },
            OpRequest::Create(c) => self.create(c, false).await,
            OpRequest::Create2(c) | OpRequest::CreateContainer(c) => self.create(c, true).await,
            OpRequest::Delete(d) => {
                let op = write_target(&d.path).map(|()| TreeOp::Delete {
                    path: d.path.clone(),
                    expected_version: expected_version(d.version),
                });
                self.write_one(op, OpKind::Other, |_| ReplyBody::Empty)
                    .await
            }
            OpRequest::SetData(s) => {
                let op = write_target(&s.path).map(|()| TreeOp::SetData {
                    path: s.path.clone(),
                    data: s.data.clone().unwrap_or_default(),
                    expected_version: expected_version(s.version),
                });
                self.write_one(op, OpKind::Other, |r| match r {
                    TreeOpResult::Set { stat: Some(stat) } => ReplyBody::Stat(stat_of_core(&stat)),
                    _ => ReplyBody::Empty,
                })
                .await
            }
            OpRequest::Check(c) => {
                let op = write_target(&c.path).map(|()| TreeOp::Check {
                    path: c.path.clone(),
                    expected_version: expected_version(c.version),
                });
                self.write_one(op, OpKind::Other, |_| ReplyBody::Empty)
                    .await
            }
            OpRequest::Multi(m) => self.multi(m).await,
            OpRequest::MultiRead(m) => self.multi_read(m).await,
            _ => {
                self.fail(xid, ErrorCode::Unimplemented);
                return Step::Continue;
            }
        };
        match outcome {
            Ok((revision, Ok(body))) => self.reply(xid, revision, body).await,
            Ok((_, Err(code))) => self.fail(xid, code),
            Err(Failure::Code(code)) => self.fail(xid, code),
            Err(Failure::Close(reason)) => {
                tracing::info!(session = %self.session, %reason,
                    "zookeeper door: this member cannot serve, closing the connection");
                return Step::Close(reason);
            }
        }
        Step::Continue
    }

    /// Remembers the digest id `addauth digest <credentials>` gives.
    pub(super) fn remember_digest(&mut self, credentials: &[u8]) {
        let id = acl::digest_id(credentials);
        if !self.auth_ids.contains(&id) {
            self.auth_ids.push(id);
        }
    }

    pub(super) fn push_ok(&mut self, xid: i32) {
        self.fail(xid, ErrorCode::Ok);
    }

    async fn ping(&mut self) -> Step {
        // Renewed through the leader, quorum-confirmed (docs/design.md).
        self.renewed = tokio::time::Instant::now();
        match self.node.keepalive(self.session).await {
            Ok(_) => {
                self.push_ok(xid::PING);
                Step::Continue
            }
            Err(error) => renewal_failed(self.session, &error),
        }
    }

    async fn close_session(&mut self, xid: i32) -> Step {
        match self.node.close_session(self.session).await {
            Ok(()) | Err(NodeError::Core(CoreError::SessionNotFound(_))) => {
                // Linearizable: this member may not have applied the close
                // yet, and the answer's zxid must not be older than it.
                let revision = self
                    .node
                    .revision(Consistency::Linearizable)
                    .await
                    .unwrap_or(self.cursor);
                self.reply(xid, revision, ReplyBody::Empty).await;
                Step::Close("the client closed its session".into())
            }
            Err(error) => Step::Close(format!("close failed: {error}")),
        }
    }

    async fn create(
        &mut self,
        c: CreateRequest,
        with_stat: bool,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let op = create_op(&c, self.session, &self.auth_ids);
        self.write_one(op, OpKind::Create, |r| match r {
            TreeOpResult::Created { path, stat } if with_stat => ReplyBody::Create2 {
                path,
                stat: stat.as_ref().map(stat_of_core).unwrap_or_default(),
            },
            TreeOpResult::Created { path, .. } => ReplyBody::Create { path },
            _ => ReplyBody::Empty,
        })
        .await
    }

    /// getEphemerals: the session's ephemeral nodes whose path starts
    /// with `prefix` (a plain string prefix, as ZooKeeper matches it).
    async fn ephemerals(
        &mut self,
        prefix: String,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        if raftlock_core::path::validate_node_path(&prefix).is_err() {
            return Ok((self.cursor, Err(ErrorCode::BadArguments)));
        }
        let revision = self
            .node
            .revision(Consistency::Linearizable)
            .await
            .map_err(|e| failure(&e, OpKind::Other))?;
        // At or after the revision just confirmed: this member has
        // applied it, so the stale read sees at least that much.
        let session = self
            .node
            .session(self.session, Consistency::Stale)
            .await
            .map_err(|e| failure(&e, OpKind::Other))?;
        let mut ephemerals: Vec<String> = session
            .map(|s| s.nodes)
            .unwrap_or_default()
            .into_iter()
            .filter(|path| path.starts_with(&prefix))
            .collect();
        ephemerals.sort();
        Ok((revision, Ok(ReplyBody::Ephemerals { ephemerals })))
    }

    /// One strict write, answered by `answer` from its result.
    async fn write_one(
        &mut self,
        op: Result<TreeOp, ErrorCode>,
        kind: OpKind,
        answer: impl FnOnce(TreeOpResult) -> ReplyBody,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let op = match op {
            Ok(op) => op,
            Err(code) => return Ok((self.cursor, Err(code))),
        };
        match self.node.tree_ops(vec![op]).await {
            Ok(done) => {
                let body = done.value.into_iter().next().map(answer);
                Ok((done.revision, Ok(body.unwrap_or(ReplyBody::Empty))))
            }
            Err(NodeError::Core(error)) => Err(Failure::Code(core_code(&error, kind))),
            Err(error) => Err(failure(&error, kind)),
        }
    }

    /// A multi whose operation `index` is refused with `code` before the
    /// tree is consulted. ZooKeeper reports the first failure in order,
    /// so the operations before it (`ops`) run with a check that always
    /// fails in its place: all or nothing, so nothing applies, and an
    /// earlier failure is reported at its own index.
    async fn refused_multi(
        &mut self,
        mut ops: Vec<TreeOp>,
        kinds: &[OpKind],
        len: usize,
        index: usize,
        code: ErrorCode,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        if ops.is_empty() {
            return Ok((self.cursor, Ok(failed_multi(len, index, code))));
        }
        // The root's version is never 0 (raftlock's versions start at 1).
        ops.push(TreeOp::Check {
            path: "/".into(),
            expected_version: Some(0),
        });
        match self.node.tree_ops(ops).await {
            Err(NodeError::Core(CoreError::TxnOpFailed { index: at, error })) if at < index => {
                let kind = kinds.get(at).copied().unwrap_or(OpKind::Other);
                Ok((
                    self.cursor,
                    Ok(failed_multi(len, at, core_code(&error, kind))),
                ))
            }
            Ok(_) | Err(NodeError::Core(CoreError::TxnOpFailed { .. })) => {
                Ok((self.cursor, Ok(failed_multi(len, index, code))))
            }
            Err(NodeError::Core(error)) => Err(Failure::Code(core_code(&error, OpKind::Other))),
            Err(error) => Err(failure(&error, OpKind::Other)),
        }
    }

    async fn multi(
        &mut self,
        m: MultiRequest,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let len = m.ops.len();
        let mut ops = Vec::with_capacity(len);
        let mut kinds = Vec::with_capacity(len);
        for (index, op) in m.ops.iter().enumerate() {
            match multi_op(op, self.session, &self.auth_ids) {
                Ok((op, kind)) => {
                    ops.push(op);
                    kinds.push(kind);
                }
                // Refused before the tree is consulted: nothing applies.
                Err(code) => return self.refused_multi(ops, &kinds, len, index, code).await,
            }
        }
        if ops.is_empty() {
            return Ok((self.cursor, Ok(ReplyBody::Multi(MultiResponse::default()))));
        }
        match self.node.tree_ops(ops).await {
            Ok(done) => {
                let results = done
                    .value
                    .into_iter()
                    .map(|r| match r {
                        // ZooKeeper 3.8 answers create2 inside a multi as
                        // a plain create (the codec tests record it).
                        TreeOpResult::Created { path, .. } => OpResult::Create { path },
                        TreeOpResult::Set { stat } => OpResult::SetData {
                            stat: stat.as_ref().map(stat_of_core).unwrap_or_default(),
                        },
                        TreeOpResult::Deleted => OpResult::Delete,
                        // A multi carries no setACL, so no `AclSet` comes back.
                        TreeOpResult::Checked | TreeOpResult::AclSet { .. } => OpResult::Check,
                    })
                    .collect();
                Ok((
                    done.revision,
                    Ok(ReplyBody::Multi(MultiResponse { results })),
                ))
            }
            Err(NodeError::Core(CoreError::TxnOpFailed { index, error })) => {
                let kind = kinds.get(index).copied().unwrap_or(OpKind::Other);
                let code = core_code(&error, kind);
                Ok((self.cursor, Ok(failed_multi(len, index, code))))
            }
            Err(NodeError::Core(error)) => Err(Failure::Code(core_code(&error, OpKind::Other))),
            Err(error) => Err(failure(&error, OpKind::Other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Acl, CreateMode};

    #[test]
    fn versions_map_one_lower_and_minus_one_is_any() {
        assert_eq!(zk_version(1), 0);
        assert_eq!(expected_version(-1), None);
        assert_eq!(expected_version(0), Some(1));
        assert_eq!(expected_version(-5), Some(u64::MAX));
    }

    #[test]
    fn a_failed_multi_reads_as_zookeepers() {
        assert_eq!(
            failed_multi(4, 2, ErrorCode::BadVersion),
            ReplyBody::Multi(MultiResponse {
                results: vec![
                    OpResult::Error { err: ErrorCode::Ok },
                    OpResult::Error { err: ErrorCode::Ok },
                    OpResult::Error {
                        err: ErrorCode::BadVersion
                    },
                    OpResult::Error {
                        err: ErrorCode::RuntimeInconsistency
                    },
                ]
            })
        );
    }

    #[test]
    fn zookeepers_subtree_is_recognised() {
        assert!(in_zk_subtree("/zookeeper"));
        assert!(in_zk_subtree("/zookeeper/config"));
        assert!(!in_zk_subtree("/zookeeperx"));
        let c = CreateRequest {
            path: "/zookeeper".into(),
            data: None,
            acl: vec![Acl::open_unsafe()],
            mode: CreateMode::Persistent,
        };
        assert_eq!(create_op(&c, SessionId(1), &[]), Err(ErrorCode::NodeExists));
        let no_acl = CreateRequest {
            path: "/a".into(),
            acl: vec![],
            ..c.clone()
        };
        assert_eq!(
            create_op(&no_acl, SessionId(1), &[]),
            Err(ErrorCode::InvalidAcl)
        );
        // The open ACL is a plain create; another one carries its ACL.
        let open = CreateRequest {
            path: "/a".into(),
            ..c.clone()
        };
        assert!(matches!(
            create_op(&open, SessionId(1), &[]),
            Ok(TreeOp::Create { .. })
        ));
        let read_only = CreateRequest {
            acl: vec![Acl {
                perms: 1,
                ..Acl::open_unsafe()
            }],
            ..open
        };
        assert!(matches!(
            create_op(&read_only, SessionId(1), &[]),
            Ok(TreeOp::CreateWithAcl { acl, .. }) if acl[0].perms == 1
        ));
    }
}
