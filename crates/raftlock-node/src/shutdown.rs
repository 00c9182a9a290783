//! The node's stop signal: flipped once by `Node::shutdown`, watched by
//! every background task and every wait, so none outlives the node.

use std::sync::Arc;

use tokio::sync::watch;

/// Cheap to clone; every clone sees the same signal.
#[derive(Clone)]
pub(crate) struct Shutdown {
    /// `true` once shutdown has begun; never goes back.
    signal: Arc<watch::Sender<bool>>,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        Shutdown {
            signal: Arc::new(watch::channel(false).0),
        }
    }

    /// Begins shutdown.
    pub(crate) fn trigger(&self) {
        self.signal.send_replace(true);
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.signal.borrow()
    }

    /// Completes once shutdown has begun.
    pub(crate) async fn stopped(&self) {
        let mut rx = self.signal.subscribe();
        // An error means the sender is gone: stopping anyway.
        let _ = rx.wait_for(|s| *s).await;
    }
}
