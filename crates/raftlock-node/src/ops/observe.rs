//! Watching an election: the one observer the HTTP API's SSE route and the
//! in-process client share.
//!
//! The first view is a linearizable read; after that, the replica's effect
//! stream says which commands touched the election's queue, and each such
//! change is followed by a read of this replica's own state (it applied
//! the change before publishing it). Only a view different from the last
//! one is handed out, so changes applied in one burst may show as one
//! view of the latest state. A lagging subscriber, and a periodic resync
//! (which also covers a snapshot install, which publishes no effects),
//! re-read the same way.

use std::sync::Arc;
use std::time::Duration;

use raftlock_api::election::ElectionView;
use raftlock_core::path::validate_lock_name;
use raftlock_core::{Effects, QueueKind};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{interval_at, Instant, Interval, MissedTickBehavior};

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::Consistency;

/// How often an observer re-reads the state without being told to.
const RESYNC: Duration = Duration::from_secs(5);

/// The changes of one election after the first view
/// ([`Node::observe_election`]).
pub struct ElectionChanges {
    node: Node,
    /// `/elections/{name}/`: the queue's nodes are its direct children
    /// (election `a/b`'s nodes are not `a`'s).
    children_prefix: String,
    changes: broadcast::Receiver<Arc<Effects>>,
    resync: Interval,
    /// The election's name.
    name: String,
    /// The last view handed out.
    last: ElectionView,
}

impl Node {
    /// Watches election `name`: returns its view now (after a
    /// linearizable read) and the changes that follow: each a view that
    /// differs from the last one handed out. Session ids are shown in
    /// full; a front door that serves several principals redacts them.
    pub async fn observe_election(
        &self,
        name: &str,
    ) -> Result<(ElectionView, ElectionChanges), NodeError> {
        validate_lock_name(name)?;
        // Subscribe before the first read, so no change falls in between.
        let changes = self.subscribe();
        let first = self.election(name, Consistency::Linearizable).await?;
        let mut resync = interval_at(Instant::now() + RESYNC, RESYNC);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let watch = ElectionChanges {
            node: self.clone(),
            children_prefix: format!("{}/", QueueKind::Election.queue_path(name)),
            changes,
            resync,
            name: name.to_string(),
            last: first.clone(),
        };
        Ok((first, watch))
    }
}

impl ElectionChanges {
    /// Waits for the next different view; `None` once the node stops.
    pub async fn next(&mut self) -> Option<ElectionView> {
        loop {
            let recheck = tokio::select! {
                received = self.changes.recv() => match received {
                    Ok(effects) => self.touches(&effects),
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return None,
                },
                _ = self.resync.tick() => true,
                _ = self.node.replica.shutdown.stopped() => return None,
            };
            if !recheck {
                continue;
            }
            let view = self
                .node
                .election(&self.name, Consistency::Stale)
                .await
                .ok()?;
            if view != self.last {
                self.last = view.clone();
                return Some(view);
            }
        }
    }

    fn touches(&self, effects: &Effects) -> bool {
        let mine = |path: &str| {
            path.strip_prefix(&self.children_prefix)
                .is_some_and(|child| !child.contains('/'))
        };
        effects.deleted.iter().any(|d| mine(&d.path))
            || effects.granted.iter().any(|p| mine(p))
            || effects.written.iter().any(|p| mine(p))
    }
}
