//! Typed reads: the contract's views of the state (`raftlock_api`), built
//! here once for every front door (the HTTP API, the embedded client).
//! Session ids are shown in full; a front door that serves several
//! principals redacts them for the caller.

use raftlock_api::lock::{FencingAnswer, Holder, LockBody, LockLine, Waiter};
use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, QueueKind, StateMachine};

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::Consistency;

/// A holder as the contract shows it.
pub(crate) fn holder_of(e: QueueEntryView) -> Holder {
    Holder {
        session_id: Some(e.session.to_string()),
        since_revision: e.granted_revision.unwrap_or(e.fencing_token),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
        fencing_token: e.fencing_token,
    }
}

/// A waiter as the contract shows it.
pub(crate) fn waiter_of(e: QueueEntryView) -> Waiter {
    Waiter {
        session_id: Some(e.session.to_string()),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
    }
}

/// A lock's lock-delay in the contract's shape: `None` for none.
fn delay_of(s: &StateMachine, name: &str) -> Option<u64> {
    let delay = s.lock_delay(name);
    (delay > 0).then_some(delay)
}

impl Node {
    /// A lock's holder, its waiters in queue order, its lock-delay and
    /// whether it is held off, as of one read.
    pub async fn lock(&self, name: &str, consistency: Consistency) -> Result<LockBody, NodeError> {
        validate_lock_name(name)?;
        self.read(consistency, |s| {
            let view = s.queue(QueueKind::Lock, name);
            LockBody {
                lock: name.to_string(),
                holder: view.holder.map(holder_of),
                waiters: view.waiters.into_iter().map(waiter_of).collect(),
                lock_delay_ms: delay_of(s, name),
                held_off: s.lock_held_off(name),
            }
        })
        .await
    }

    /// The locks with a holder or waiters whose name starts with `prefix`
    /// and that `visible` lets through, in name order, as of one read.
    pub async fn locks(
        &self,
        prefix: &str,
        consistency: Consistency,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<LockLine>, NodeError> {
        self.read(consistency, |s| {
            s.queues(QueueKind::Lock, prefix)
                .into_iter()
                .filter(|q| visible(&q.name))
                .map(|q| LockLine {
                    lock_delay_ms: delay_of(s, &q.name),
                    held_off: s.lock_held_off(&q.name),
                    holder: q.holder.map(holder_of),
                    waiters: q.waiters,
                    lock: q.name,
                })
                .collect()
        })
        .await
    }

    /// Is `token` the current holder's fencing token of lock `name`? A
    /// linearizable read.
    pub async fn check_fencing(&self, name: &str, token: u64) -> Result<FencingAnswer, NodeError> {
        validate_lock_name(name)?;
        let (valid, current_token) = self
            .read(Consistency::Linearizable, |s| s.fencing_check(name, token))
            .await?;
        Ok(FencingAnswer {
            valid,
            current_token,
        })
    }
}
