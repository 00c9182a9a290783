//! Watch events: firing the connection's watches from the member's change
//! history up to a revision (before any answer at that revision),
//! re-registering a reconnecting client's watches (`setWatches`,
//! `setWatches2`), and the watch opcodes (`addWatch`, `checkWatches`,
//! `removeWatches`).

use raftlock_node::Consistency;

use super::conn::{Conn, Step};
use super::errors::Failure;
use super::watches::Kind;
use crate::wire::{
    xid, AddWatchMode, AddWatchRequest, ErrorCode, EventType, KeeperState, ReplyBody, SetWatches,
    SetWatches2, WatcherEvent, WatchesRequest,
};

impl Conn {
    /// setWatches2: the one-shot watches as [`Conn::set_watches`], the
    /// persistent ones registered again without firing (ZooKeeper's
    /// server does the same: what changed while the client was away is
    /// for it to read).
    pub(super) async fn set_watches2(&mut self, xid: i32, w: SetWatches2) -> Step {
        for path in &w.persistent_watches {
            self.watches.add(Kind::Persistent, path);
        }
        for path in &w.persistent_recursive_watches {
            self.watches.add(Kind::PersistentRecursive, path);
        }
        let w = SetWatches {
            relative_zxid: w.relative_zxid,
            data_watches: w.data_watches,
            exist_watches: w.exist_watches,
            child_watches: w.child_watches,
        };
        self.set_watches(xid, w).await
    }

    /// Re-registers a reconnecting client's watches: those whose change
    /// came after `relative_zxid` fire at once, as ZooKeeper does.
    pub(super) async fn set_watches(&mut self, xid: i32, w: SetWatches) -> Step {
        let since = u64::try_from(w.relative_zxid).unwrap_or(0);
        let mut revision = self.cursor;
        let mut events = Vec::new();
        for (kind, paths) in [
            (Kind::Data, w.data_watches),
            (Kind::Exist, w.exist_watches),
            (Kind::Child, w.child_watches),
        ] {
            for path in paths {
                let (at, seen) = match self.seen(&path).await {
                    Ok(read) => read,
                    Err(Failure::Code(_)) => continue,
                    Err(Failure::Close(reason)) => return Step::Close(reason),
                };
                revision = revision.max(at);
                let event = match (kind, &seen) {
                    (Kind::Data, None) | (Kind::Child, None) => Some(EventType::NodeDeleted),
                    (Kind::Exist, Some(_)) => Some(EventType::NodeCreated),
                    (Kind::Exist, None) => None,
                    (Kind::Data, Some(s)) => (u64::try_from(s.stat.mzxid).unwrap_or(0) > since)
                        .then_some(EventType::NodeDataChanged),
                    (Kind::Persistent | Kind::PersistentRecursive, _) => None,
                    (Kind::Child, Some(_)) => {
                        let parent = path.clone();
                        let changed = self.node.node_changes_since(since, |p| {
                            p != "/" && raftlock_core::path::parent_of(p) == parent
                        });
                        // Compacted: the changes are unknown, so fire.
                        (changed.map_or(true, |c| c.iter().any(|c| c.revision <= at)))
                            .then_some(EventType::NodeChildrenChanged)
                    }
                };
                match event {
                    Some(event) => events.push((event, path)),
                    None => self.watches.add(kind, &path),
                }
            }
        }
        self.advance(revision).await;
        for (event, path) in events {
            self.notify(event, path);
        }
        self.push_ok(xid);
        Step::Continue
    }

    /// addWatch: a persistent (or persistent recursive) watch from the
    /// revision the member has now, the node there or not.
    pub(super) async fn add_watch(&mut self, xid: i32, r: AddWatchRequest) -> Step {
        if raftlock_core::path::validate_node_path(&r.path).is_err() {
            self.fail(xid, ErrorCode::BadArguments);
            return Step::Continue;
        }
        let revision = match self.node.revision(Consistency::Linearizable).await {
            Ok(revision) => revision,
            Err(error) => match super::errors::failure(&error, super::errors::OpKind::Other) {
                Failure::Code(code) => {
                    self.fail(xid, code);
                    return Step::Continue;
                }
                Failure::Close(reason) => return Step::Close(reason),
            },
        };
        // Changes up to here fire the watches set before; the new one
        // sees only what comes after.
        self.advance(revision).await;
        let kind = match r.mode {
            AddWatchMode::Persistent => Kind::Persistent,
            AddWatchMode::PersistentRecursive => Kind::PersistentRecursive,
        };
        self.watches.add(kind, &r.path);
        self.reply(xid, revision, ReplyBody::AddWatch { err: ErrorCode::Ok })
            .await;
        Step::Continue
    }

    /// checkWatches (`remove` false) and removeWatches: `NOWATCHER` when
    /// the connection has no watch of that type on the path.
    pub(super) fn check_or_remove_watches(&mut self, xid: i32, r: WatchesRequest, remove: bool) {
        let found = if remove {
            self.watches.remove(r.watcher_type, &r.path)
        } else {
            self.watches.has(r.watcher_type, &r.path)
        };
        if found {
            self.push_ok(xid);
        } else {
            self.fail(xid, ErrorCode::NoWatcher);
        }
    }

    /// Fires the watches of every change up to `revision` not yet seen.
    pub async fn advance(&mut self, revision: u64) {
        // Never past what this member has applied: a write answered by
        // the leader can be ahead of it, and a change not yet recorded
        // here must still fire when it is. The history records a change
        // under the same lock that publishes it, so everything up to the
        // local revision is in it.
        let local = self
            .node
            .revision(Consistency::Stale)
            .await
            .unwrap_or(self.cursor);
        let revision = revision.min(local);
        if revision <= self.cursor {
            return;
        }
        let from = self.cursor;
        self.cursor = revision;
        if self.watches.is_empty() {
            return;
        }
        let watches = &self.watches;
        match self.node.node_changes_since(from, |p| watches.concerns(p)) {
            Ok(changes) => {
                let mut events = Vec::new();
                for change in changes.iter().filter(|c| c.revision <= revision) {
                    self.watches.fire(change, &mut events);
                }
                for (event, path) in events {
                    self.notify(event, path);
                }
            }
            Err(_) => {
                // The history no longer holds them: decide from the state.
                let mut present = std::collections::BTreeSet::new();
                let paths: Vec<String> = self
                    .watches
                    .paths()
                    .chain(self.watches.persistent_paths())
                    .collect();
                for path in paths {
                    if let Ok(read) = self.node.get_node(&path, Consistency::Stale).await {
                        if read.value.is_some() {
                            present.insert(path);
                        }
                    }
                }
                for (event, path) in self.watches.drain(|p| present.contains(p)) {
                    self.notify(event, path);
                }
            }
        }
    }

    fn notify(&mut self, event_type: EventType, path: String) {
        self.out
            .push(crate::wire::ServerPacket::Reply(crate::wire::Reply {
                header: crate::wire::ReplyHeader {
                    xid: xid::NOTIFICATION,
                    zxid: -1,
                    err: ErrorCode::Ok,
                },
                body: ReplyBody::Notification(WatcherEvent {
                    event_type,
                    state: KeeperState::SyncConnected,
                    path,
                }),
            }));
    }
}
