//! Predecessor-only wake-ups.
//!
//! A waiting acquire registers under two paths: its immediate predecessor
//! (whose deletion may make it the holder) and its own node (whose deletion
//! means its session ended or the node was withdrawn). The apply loop hands
//! over the deleted paths of each command; each path wakes only what was
//! registered under it, so a release with 10,000 waiters wakes one. Every
//! replica applies the same log, so a client on a follower is woken by that
//! follower's own apply loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The key a read-write lock or semaphore waiter registers under to hear
/// that its own node was granted: there, a grant is not always its
/// predecessor's deletion (a writer's release grants a whole run of
/// readers). The apply loop signals it for each node in
/// `Effects::granted` (`primitives.rs`). Paths never contain a space, so
/// the key cannot collide with a path.
pub fn granted_key(node: &str) -> String {
    format!("granted {node}")
}

/// True for the nodes whose waiters listen for [`granted_key`].
pub fn is_shared_node(node: &str) -> bool {
    [
        raftlock_core::SharedKind::RwLock,
        raftlock_core::SharedKind::Semaphore,
    ]
    .iter()
    .any(|k| {
        node.strip_prefix(k.prefix())
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Registrations by watched path.
#[derive(Default)]
pub struct WaiterRegistry {
    /// std Mutex: held for map operations only, never across an await.
    by_path: Mutex<HashMap<String, Vec<Arc<Notify>>>>,
    /// Total wake-ups delivered, for metrics and the no-herd test.
    wakeups: AtomicU64,
}

/// A registration; dropping it unregisters.
pub struct WaitGuard {
    registry: Arc<WaiterRegistry>,
    notify: Arc<Notify>,
    paths: Vec<String>,
}

impl WaiterRegistry {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Vec<Arc<Notify>>>> {
        // A panic while holding this lock cannot leave the map half-updated
        // in a harmful way (each operation is one insert or removal).
        self.by_path.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers one waiter under each of `paths`.
    pub fn register(self: &Arc<Self>, paths: Vec<String>) -> WaitGuard {
        let notify = Arc::new(Notify::new());
        let mut map = self.map();
        for path in &paths {
            map.entry(path.clone()).or_default().push(notify.clone());
        }
        WaitGuard {
            registry: self.clone(),
            notify,
            paths,
        }
    }

    /// Wakes what waits on each deleted path. O(1) per path.
    pub fn wake_deleted<'a>(&self, paths: impl IntoIterator<Item = &'a str>) {
        let mut woken = 0;
        let mut map = self.map();
        for path in paths {
            for notify in map.remove(path).unwrap_or_default() {
                notify.notify_one();
                woken += 1;
            }
        }
        drop(map);
        self.wakeups.fetch_add(woken, Ordering::Relaxed);
    }

    /// Wakes every waiter (after a snapshot replaced the whole state).
    pub fn wake_all(&self) {
        let drained: Vec<_> = self.map().drain().collect();
        let mut woken = 0;
        for (_, notifies) in drained {
            for notify in notifies {
                notify.notify_one();
                woken += 1;
            }
        }
        self.wakeups.fetch_add(woken, Ordering::Relaxed);
    }

    /// Wake-ups delivered since start.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Registered waiters right now (a waiter counts once per path).
    pub fn registered(&self) -> usize {
        self.map().values().map(Vec::len).sum()
    }
}

impl WaitGuard {
    /// Completes when a watched path is deleted (or was deleted after
    /// registration and before this call: `Notify` keeps the permit).
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        let mut map = self.registry.map();
        for path in &self.paths {
            if let Some(list) = map.get_mut(path) {
                list.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if list.is_empty() {
                    map.remove(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_only_the_waiter_of_the_deleted_path() {
        let registry = Arc::new(WaiterRegistry::default());
        let a = registry.register(vec!["/q/1".into(), "/q/2".into()]);
        let b = registry.register(vec!["/q/2".into(), "/q/3".into()]);
        registry.wake_deleted(["/q/1"]);
        a.woken().await;
        assert_eq!(registry.wakeups(), 1);
        drop(a);
        assert_eq!(registry.registered(), 2, "b's two paths remain");
        drop(b);
        assert_eq!(registry.registered(), 0);
    }
}
