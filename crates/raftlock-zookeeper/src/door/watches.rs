//! One connection's watches, as ZooKeeper's server keeps them.
//!
//! One-shot watches: data watches (set by getData, or exists on an
//! existing node) fire on a change or delete of the node; exist watches
//! (exists on a missing node) fire when it is created; child watches
//! (getChildren) fire when a child is created or deleted, or the node
//! itself is deleted. Each fires once and is gone.
//!
//! Persistent watches (addWatch): a persistent one on a path fires as a
//! data and a child watch of it would, every time; a persistent recursive
//! one fires `NodeCreated`, `NodeDataChanged` and `NodeDeleted` for the
//! path and every node below it, never `NodeChildrenChanged`. Both stay
//! until removeWatches removes them.
//!
//! A connection receives one event per node and change even when several
//! of its watches match (ZooKeeper's client fans it out to its watchers).
//! Events come from the member's change history (`Node::node_changes_since`),
//! in revision order, up to a cursor the connection advances before each
//! answer, so an event always precedes the answer that shows its change.

use std::collections::BTreeSet;

use raftlock_core::path::parent_of;
use raftlock_node::Change;

use crate::wire::{EventType, WatcherType};

/// The watches of one connection.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    data: BTreeSet<String>,
    exist: BTreeSet<String>,
    child: BTreeSet<String>,
    persistent: BTreeSet<String>,
    recursive: BTreeSet<String>,
}

/// Which watch a read or an addWatch leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    Exist,
    Child,
    Persistent,
    PersistentRecursive,
}

/// The path and its ancestors up to the root, nearest first.
fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = (current != "/").then(|| parent_of(current));
        Some(current)
    })
}

/// Collects one change's events, each (type, path) once.
#[derive(Default)]
struct Fired(Vec<(EventType, String)>);

impl Fired {
    fn push(&mut self, event: EventType, path: &str) {
        if !self.0.iter().any(|(e, p)| *e == event && p == path) {
            self.0.push((event, path.to_string()));
        }
    }
}

impl Watches {
    fn set_mut(&mut self, kind: Kind) -> &mut BTreeSet<String> {
        match kind {
            Kind::Data => &mut self.data,
            Kind::Exist => &mut self.exist,
            Kind::Child => &mut self.child,
            Kind::Persistent => &mut self.persistent,
            Kind::PersistentRecursive => &mut self.recursive,
        }
    }

    pub fn add(&mut self, kind: Kind, path: &str) {
        self.set_mut(kind).insert(path.to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.exist.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }

    /// The kinds of watch a checkWatches or removeWatches of `watcher_type`
    /// addresses. As ZooKeeper's server keeps them, data watches include
    /// exist, persistent and recursive ones; child watches include
    /// persistent ones.
    fn kinds_of(watcher_type: WatcherType) -> &'static [Kind] {
        match watcher_type {
            WatcherType::Data => &[
                Kind::Data,
                Kind::Exist,
                Kind::Persistent,
                Kind::PersistentRecursive,
            ],
            WatcherType::Children => &[Kind::Child, Kind::Persistent],
            WatcherType::Any => &[
                Kind::Data,
                Kind::Exist,
                Kind::Child,
                Kind::Persistent,
                Kind::PersistentRecursive,
            ],
        }
    }

    /// Whether any watch of `watcher_type` is set on `path` (checkWatches).
    pub fn has(&mut self, watcher_type: WatcherType, path: &str) -> bool {
        Self::kinds_of(watcher_type)
            .iter()
            .any(|kind| self.set_mut(*kind).contains(path))
    }

    /// Removes the watches of `watcher_type` on `path` (removeWatches);
    /// whether there was one.
    pub fn remove(&mut self, watcher_type: WatcherType, path: &str) -> bool {
        let mut removed = false;
        for kind in Self::kinds_of(watcher_type) {
            removed |= self.set_mut(*kind).remove(path);
        }
        removed
    }

    /// Every one-shot watch's path (a path watched twice comes twice).
    pub fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.data
            .iter()
            .chain(&self.exist)
            .chain(&self.child)
            .cloned()
    }

    /// Every persistent watch's path, recursive ones too.
    pub fn persistent_paths(&self) -> impl Iterator<Item = String> + '_ {
        self.persistent.iter().chain(&self.recursive).cloned()
    }

    /// Whether a change of `path` can fire any watch.
    pub fn concerns(&self, path: &str) -> bool {
        let parent = (path != "/").then(|| parent_of(path));
        self.data.contains(path)
            || self.exist.contains(path)
            || self.child.contains(path)
            || self.persistent.contains(path)
            || parent.is_some_and(|p| self.child.contains(p) || self.persistent.contains(p))
            || (!self.recursive.is_empty()
                && self_and_ancestors(path).any(|p| self.recursive.contains(p)))
    }

    /// The events of the node's own watches for a change of type `event`,
    /// removing the one-shot ones it fires. `exist` says whether exist
    /// watches fire too (a creation), `child` whether child watches do (a
    /// deletion).
    fn fire_node(
        &mut self,
        event: EventType,
        path: &str,
        exist: bool,
        child: bool,
        out: &mut Fired,
    ) {
        let mut fired = self.data.remove(path) | self.persistent.contains(path);
        if exist {
            fired |= self.exist.remove(path);
        }
        if child {
            fired |= self.child.remove(path);
        }
        if !self.recursive.is_empty()
            && self_and_ancestors(path).any(|p| self.recursive.contains(p))
        {
            fired = true;
        }
        if fired {
            out.push(event, path);
        }
    }

    /// The events one recorded change fires, removing the one-shot
    /// watches it fires.
    pub fn fire(&mut self, change: &Change, events: &mut Vec<(EventType, String)>) {
        let path = change.path.as_str();
        let mut fired = Fired::default();
        let parent_changed = match &change.node {
            None => {
                self.fire_node(EventType::NodeDeleted, path, false, true, &mut fired);
                true
            }
            Some(node) if node.create_revision == change.revision => {
                self.fire_node(EventType::NodeCreated, path, true, false, &mut fired);
                true
            }
            Some(_) => {
                // An exist watch set on a node that exists is a data
                // watch (ZooKeeper keeps both in one list).
                self.fire_node(EventType::NodeDataChanged, path, true, false, &mut fired);
                false
            }
        };
        if parent_changed && path != "/" {
            let parent = parent_of(path);
            // Recursive watches never see NodeChildrenChanged.
            if self.child.remove(parent) | self.persistent.contains(parent) {
                fired.push(EventType::NodeChildrenChanged, parent);
            }
        }
        events.extend(fired.0);
    }

    /// Every watch, removed: for when the history no longer holds the
    /// changes since the cursor. The caller decides each one's event from
    /// the current state (`exists`), so a watch may fire without a change
    /// (documented in docs/zookeeper.md), never miss one.
    pub fn drain(&mut self, exists: impl Fn(&str) -> bool) -> Vec<(EventType, String)> {
        let mut events = Vec::new();
        for path in std::mem::take(&mut self.data) {
            let event = if exists(&path) {
                EventType::NodeDataChanged
            } else {
                EventType::NodeDeleted
            };
            events.push((event, path));
        }
        for path in std::mem::take(&mut self.exist) {
            if exists(&path) {
                events.push((EventType::NodeCreated, path));
            } else {
                // Still missing: keep waiting for its creation.
                self.exist.insert(path);
            }
        }
        for path in std::mem::take(&mut self.child) {
            let event = if exists(&path) {
                EventType::NodeChildrenChanged
            } else {
                EventType::NodeDeleted
            };
            events.push((event, path));
        }
        // Persistent watches stay; a recursive one reports its own path
        // only, not the nodes below it that changed in the gap.
        for path in &self.persistent {
            if exists(path) {
                events.push((EventType::NodeDataChanged, path.clone()));
                events.push((EventType::NodeChildrenChanged, path.clone()));
            } else {
                events.push((EventType::NodeDeleted, path.clone()));
            }
        }
        for path in &self.recursive {
            let event = if exists(path) {
                EventType::NodeDataChanged
            } else {
                EventType::NodeDeleted
            };
            if !events.iter().any(|(e, p)| *e == event && p == path) {
                events.push((event, path.clone()));
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use raftlock_core::Node;

    use super::*;

    fn change(revision: u64, path: &str, created: Option<u64>) -> Change {
        Change {
            revision,
            path: path.into(),
            node: created.map(|create_revision| Node {
                data: Box::default(),
                version: 1,
                create_revision,
                mod_revision: revision,
                ephemeral_owner: None,
                next_child_sequence: 0,
                meta: raftlock_core::NodeMeta::default(),
                acl: None,
            }),
        }
    }

    #[test]
    fn watches_fire_once_with_zookeepers_event_types() {
        let mut w = Watches::default();
        w.add(Kind::Exist, "/a");
        w.add(Kind::Child, "/");
        w.add(Kind::Data, "/b");
        w.add(Kind::Child, "/b");
        let mut events = Vec::new();
        w.fire(&change(5, "/a", Some(5)), &mut events);
        assert_eq!(
            events,
            [
                (EventType::NodeCreated, "/a".to_string()),
                (EventType::NodeChildrenChanged, "/".to_string())
            ]
        );
        events.clear();
        // Fired watches are gone: a second create fires nothing.
        w.fire(&change(6, "/c", Some(6)), &mut events);
        assert!(events.is_empty());
        w.fire(&change(7, "/b", Some(1)), &mut events);
        assert_eq!(events, [(EventType::NodeDataChanged, "/b".to_string())]);
        events.clear();
        // The child watch on /b is still set; its deletion fires it once.
        w.fire(&change(8, "/b", None), &mut events);
        assert_eq!(events, [(EventType::NodeDeleted, "/b".to_string())]);
        assert!(w.is_empty());
    }

    #[test]
    fn draining_decides_from_the_current_state() {
        let mut w = Watches::default();
        w.add(Kind::Data, "/gone");
        w.add(Kind::Exist, "/new");
        w.add(Kind::Exist, "/still-missing");
        w.add(Kind::Child, "/p");
        let events = w.drain(|p| p == "/new" || p == "/p");
        assert_eq!(
            events,
            [
                (EventType::NodeDeleted, "/gone".to_string()),
                (EventType::NodeCreated, "/new".to_string()),
                (EventType::NodeChildrenChanged, "/p".to_string())
            ]
        );
        assert!(w.concerns("/still-missing"));
    }

    #[test]
    fn persistent_watches_stay_and_recursive_ones_see_descendants() {
        let mut w = Watches::default();
        w.add(Kind::Persistent, "/p");
        w.add(Kind::PersistentRecursive, "/r");
        let mut events = Vec::new();
        for rev in [3, 4] {
            w.fire(&change(rev, "/p/c", Some(rev)), &mut events);
        }
        w.fire(&change(5, "/p", Some(1)), &mut events);
        w.fire(&change(6, "/p/c/d", Some(6)), &mut events);
        assert_eq!(
            events,
            [
                (EventType::NodeChildrenChanged, "/p".to_string()),
                (EventType::NodeChildrenChanged, "/p".to_string()),
                (EventType::NodeDataChanged, "/p".to_string()),
            ]
        );
        events.clear();
        w.fire(&change(7, "/r", Some(7)), &mut events);
        w.fire(&change(8, "/r/a", Some(8)), &mut events);
        w.fire(&change(9, "/r/a/b", Some(9)), &mut events);
        w.fire(&change(10, "/r/a/b", Some(9)), &mut events);
        w.fire(&change(11, "/r/a/b", None), &mut events);
        w.fire(&change(12, "/rx", Some(12)), &mut events);
        assert_eq!(
            events,
            [
                (EventType::NodeCreated, "/r".to_string()),
                (EventType::NodeCreated, "/r/a".to_string()),
                (EventType::NodeCreated, "/r/a/b".to_string()),
                (EventType::NodeDataChanged, "/r/a/b".to_string()),
                (EventType::NodeDeleted, "/r/a/b".to_string()),
            ]
        );
        events.clear();
        // One event per change even when one-shot and persistent watches
        // both match; the one-shot one is gone after it.
        w.add(Kind::Data, "/r/x");
        w.fire(&change(13, "/r/x", Some(2)), &mut events);
        assert_eq!(events, [(EventType::NodeDataChanged, "/r/x".to_string())]);
        assert!(!w.has(WatcherType::Data, "/r/x"));
        assert!(w.has(WatcherType::Data, "/r"));
        assert!(!w.has(WatcherType::Children, "/r"));
        assert!(w.has(WatcherType::Children, "/p"));
        assert!(w.remove(WatcherType::Any, "/p"));
        assert!(!w.remove(WatcherType::Any, "/p"));
        assert!(w.remove(WatcherType::Data, "/r"));
        assert!(w.is_empty());
    }
}
