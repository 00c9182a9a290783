//! The read opcodes: exists, getData, getChildren(2), getAllChildrenNumber
//! and multiRead, over
//! a linearizable read of the member, with ZooKeeper's own read-only
//! `/zookeeper` subtree. A read first fires the watches of every change up
//! to the revision it saw, then leaves its own watch.

use raftlock_core::path::validate_node_path;
use raftlock_node::Consistency;

use super::conn::Conn;
use super::errors::{failure, Failure, OpKind};
use super::ops::{in_zk_subtree, stat_of, Seen, ZK_ROOT};
use super::watches::Kind;
use crate::wire::{
    ErrorCode, MultiOp, MultiRequest, MultiResponse, OpResult, PathRequest, PathWatchRequest,
    ReplyBody, Stat,
};

/// `/zookeeper`'s nodes below it: `config` and `quota`.
const ZK_SUBTREE_BELOW_ROOT: u64 = 2;

impl Conn {
    /// The node at `path` as ZooKeeper shows it, and the revision read.
    pub(super) async fn seen(&mut self, path: &str) -> Result<(u64, Option<Seen>), Failure> {
        if validate_node_path(path).is_err() {
            return Err(Failure::Code(ErrorCode::BadArguments));
        }
        if in_zk_subtree(path) {
            let revision = self
                .node
                .revision(Consistency::Linearizable)
                .await
                .map_err(|e| failure(&e, OpKind::Other))?;
            let children: Vec<String> = match path {
                ZK_ROOT => vec!["config".into(), "quota".into()],
                "/zookeeper/config" | "/zookeeper/quota" => vec![],
                _ => return Ok((revision, None)),
            };
            let stat = Stat {
                num_children: children.len() as i32,
                ..Stat::default()
            };
            return Ok((
                revision,
                Some(Seen {
                    stat,
                    data: Vec::new(),
                    children,
                    acl: None,
                }),
            ));
        }
        let read = self
            .node
            .get_node_and_children(path, Consistency::Linearizable)
            .await
            .map_err(|e| failure(&e, OpKind::Other))?;
        let (node, children) = (read.value.node, read.value.children);
        let seen = match (node, children) {
            (None, None) => None,
            (node, children) => {
                let mut children = children.unwrap_or_default();
                let mut stat = node.as_ref().map(stat_of).unwrap_or_default();
                if path == "/" {
                    // ZooKeeper's own subtree hangs under the root.
                    if let Err(at) = children.binary_search_by(|c| c.as_str().cmp("zookeeper")) {
                        children.insert(at, "zookeeper".into());
                    }
                }
                // A path that only holds queue nodes (`/locks`) has no node
                // of its own; it shows as an empty persistent one.
                stat.num_children = i32::try_from(children.len()).unwrap_or(i32::MAX);
                let (data, acl) = node.map_or_else(Default::default, |n| (n.data, n.acl));
                Some(Seen {
                    stat,
                    data,
                    children,
                    acl,
                })
            }
        };
        Ok((read.revision, seen))
    }

    /// A path read that may leave a one-shot watch: `found`'s kind on a
    /// node that exists, `missing`'s (exists only) on one that does not.
    async fn watched_read(
        &mut self,
        r: PathWatchRequest,
        (found, missing): (Kind, Option<Kind>),
        answer: impl FnOnce(Seen) -> ReplyBody,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let (revision, seen) = self.seen(&r.path).await?;
        self.advance(revision).await;
        let watch = if seen.is_some() { Some(found) } else { missing };
        if let (true, Some(kind)) = (r.watch, watch) {
            self.watches.add(kind, &r.path);
        }
        Ok((revision, seen.map(answer).ok_or(ErrorCode::NoNode)))
    }

    pub(super) async fn exists(
        &mut self,
        r: PathWatchRequest,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let watches = (Kind::Data, Some(Kind::Exist));
        self.watched_read(r, watches, |s| ReplyBody::Stat(s.stat))
            .await
    }

    pub(super) async fn get_data(
        &mut self,
        r: PathWatchRequest,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        self.watched_read(r, (Kind::Data, None), |s| ReplyBody::GetData {
            data: Some(s.data),
            stat: s.stat,
        })
        .await
    }

    pub(super) async fn get_children(
        &mut self,
        r: PathWatchRequest,
        with_stat: bool,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        self.watched_read(r, (Kind::Child, None), |s| {
            if with_stat {
                ReplyBody::GetChildren2 {
                    children: s.children,
                    stat: s.stat,
                }
            } else {
                ReplyBody::GetChildren {
                    children: s.children,
                }
            }
        })
        .await
    }

    /// getAllChildrenNumber: how many nodes are below `path`, at any depth
    /// (ZooKeeper's count, which the cross-check compares: at the root it
    /// includes `/zookeeper` and its two nodes).
    pub(super) async fn all_children_number(
        &mut self,
        r: PathRequest,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        if validate_node_path(&r.path).is_err() {
            return Err(Failure::Code(ErrorCode::BadArguments));
        }
        let path = r.path;
        let (revision, found) = if in_zk_subtree(&path) {
            let revision = self
                .node
                .revision(Consistency::Linearizable)
                .await
                .map_err(|e| failure(&e, OpKind::Other))?;
            let found = match path.as_str() {
                ZK_ROOT => Some(ZK_SUBTREE_BELOW_ROOT),
                "/zookeeper/config" | "/zookeeper/quota" => Some(0),
                _ => None,
            };
            (revision, found)
        } else {
            let counted = self
                .node
                .count_below(&path, Consistency::Linearizable)
                .await
                .map_err(|e| failure(&e, OpKind::Other))?;
            (counted.revision, counted.value)
        };
        let found = match found {
            // The root also holds ZooKeeper's own subtree.
            Some(n) if path == "/" => Some(n + 1 + ZK_SUBTREE_BELOW_ROOT),
            other => other,
        };
        Ok((
            revision,
            found
                .map(|n| ReplyBody::AllChildrenNumber {
                    total_number: i32::try_from(n).unwrap_or(i32::MAX),
                })
                .ok_or(ErrorCode::NoNode),
        ))
    }

    pub(super) async fn multi_read(
        &mut self,
        m: MultiRequest,
    ) -> Result<(u64, Result<ReplyBody, ErrorCode>), Failure> {
        let mut results = Vec::with_capacity(m.ops.len());
        let mut revision = self.cursor;
        for op in m.ops {
            let result = match op {
                MultiOp::GetData(r) => {
                    let watch = r.watch.then_some(Kind::Data);
                    match self.read_in_multi(&r.path, watch, &mut revision).await? {
                        Some(s) => OpResult::GetData {
                            data: Some(s.data),
                            stat: s.stat,
                        },
                        None => OpResult::Error {
                            err: ErrorCode::NoNode,
                        },
                    }
                }
                MultiOp::GetChildren(r) => {
                    let watch = r.watch.then_some(Kind::Child);
                    match self.read_in_multi(&r.path, watch, &mut revision).await? {
                        Some(s) => OpResult::GetChildren {
                            children: s.children,
                        },
                        None => OpResult::Error {
                            err: ErrorCode::NoNode,
                        },
                    }
                }
                _ => return Ok((revision, Err(ErrorCode::BadArguments))),
            };
            results.push(result);
        }
        Ok((revision, Ok(ReplyBody::Multi(MultiResponse { results }))))
    }

    /// One read of a read-only multi: the node at `path` once the session
    /// has caught up with it, `revision` raised to the read's; the watch,
    /// if asked, is set only on a node that exists.
    async fn read_in_multi(
        &mut self,
        path: &str,
        watch: Option<Kind>,
        revision: &mut u64,
    ) -> Result<Option<Seen>, Failure> {
        let (at, seen) = self.seen(path).await?;
        *revision = (*revision).max(at);
        self.advance(at).await;
        if let (Some(kind), Some(_)) = (watch, &seen) {
            self.watches.add(kind, path);
        }
        Ok(seen)
    }
}
