//! The contract's queue kinds and modes (`raftlock_api::queue`) against
//! the state machine's log-encoded ones: converted here, once, so no
//! front door handles the core's types.

use raftlock_api::{Mode, QueueKind};
use raftlock_core::{CoreError, SessionId, SharedKind, StateMachine};

/// A contract kind as the state machine stores its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CoreQueue {
    /// One holder at a time (locks, elections).
    Plain(raftlock_core::QueueKind),
    /// Several holders at once (read-write locks, semaphores).
    Shared(SharedKind),
}

impl From<QueueKind> for CoreQueue {
    fn from(kind: QueueKind) -> Self {
        match kind {
            QueueKind::Lock => CoreQueue::Plain(raftlock_core::QueueKind::Lock),
            QueueKind::Election => CoreQueue::Plain(raftlock_core::QueueKind::Election),
            QueueKind::RwLock => CoreQueue::Shared(SharedKind::RwLock),
            QueueKind::Semaphore => CoreQueue::Shared(SharedKind::Semaphore),
        }
    }
}

impl CoreQueue {
    /// How many entries the queue holds (holders included), and whether
    /// `session` is one of them.
    pub(crate) fn place(
        self,
        state: &StateMachine,
        name: &str,
        session: SessionId,
    ) -> (usize, bool) {
        match self {
            CoreQueue::Plain(kind) => state.queue_place(kind, name, session),
            CoreQueue::Shared(kind) => state.shared_place(kind, name, session),
        }
    }
}

/// The refusal of a mode asked of a kind it does not fit ([`Mode::fits`]):
/// a bug of the front door, not of the user.
pub(crate) fn mismatch(kind: QueueKind, mode: Mode) -> CoreError {
    CoreError::Invalid(format!("{mode:?} does not fit a {} queue", kind.segment()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_maps_to_its_stored_kind() {
        for kind in QueueKind::ALL {
            let shared = matches!(CoreQueue::from(kind), CoreQueue::Shared(_));
            assert_eq!(shared, kind.is_shared(), "{kind:?}");
        }
        assert!(mismatch(QueueKind::Lock, Mode::Read)
            .to_string()
            .contains("locks"));
    }
}
