//! One connection's one-shot watches, as ZooKeeper's server keeps them:
//! data watches (set by getData, or exists on an existing node) fire on a
//! change or delete of the node; exist watches (exists on a missing node)
//! fire when it is created; child watches (getChildren) fire when a child
//! is created or deleted, or the node itself is deleted. Each fires once
//! and is gone; a connection receives one event per node and change even
//! when several of its watches match (ZooKeeper's client fans it out).
//!
//! Events come from the member's change history (`Node::node_changes_since`),
//! in revision order, up to a cursor the connection advances before each
//! answer, so an event always precedes the answer that shows its change.

use std::collections::BTreeSet;

use raftlock_core::path::parent_of;
use raftlock_node::Change;

use crate::wire::EventType;

/// The watches of one connection.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    data: BTreeSet<String>,
    exist: BTreeSet<String>,
    child: BTreeSet<String>,
}

/// Which watch a read leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    Exist,
    Child,
}

impl Watches {
    pub fn add(&mut self, kind: Kind, path: &str) {
        let set = match kind {
            Kind::Data => &mut self.data,
            Kind::Exist => &mut self.exist,
            Kind::Child => &mut self.child,
        };
        set.insert(path.to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.exist.is_empty() && self.child.is_empty()
    }

    /// Every watched path (a path watched twice comes twice).
    pub fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.data
            .iter()
            .chain(&self.exist)
            .chain(&self.child)
            .cloned()
    }

    /// Whether a change of `path` can fire any watch.
    pub fn concerns(&self, path: &str) -> bool {
        self.data.contains(path)
            || self.exist.contains(path)
            || self.child.contains(path)
            || (path != "/" && self.child.contains(parent_of(path)))
    }

    /// The events one recorded change fires, removing their watches.
    pub fn fire(&mut self, change: &Change, events: &mut Vec<(EventType, String)>) {
        let path = change.path.as_str();
        let parent_changed = match &change.node {
            None => {
                let data = self.data.remove(path);
                let child = self.child.remove(path);
                if data || child {
                    events.push((EventType::NodeDeleted, path.to_string()));
                }
                true
            }
            Some(node) if node.create_revision == change.revision => {
                if self.exist.remove(path) | self.data.remove(path) {
                    events.push((EventType::NodeCreated, path.to_string()));
                }
                true
            }
            Some(_) => {
                if self.data.remove(path) | self.exist.remove(path) {
                    events.push((EventType::NodeDataChanged, path.to_string()));
                }
                false
            }
        };
        if parent_changed && path != "/" {
            let parent = parent_of(path);
            if self.child.remove(parent) {
                events.push((EventType::NodeChildrenChanged, parent.to_string()));
            }
        }
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
}
