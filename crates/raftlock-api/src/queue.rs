//! The one model of a queue: which primitive it belongs to ([`QueueKind`])
//! and how one entry of it holds it ([`Mode`]).
//!
//! Every queue-based primitive is a queue of session entries under one
//! tree prefix; the primitives differ only in how many entries at its head
//! hold it at once. The replicated state machine (raftlock-core) keeps its
//! own log-encoded kinds; the node converts at its boundary, once.

use serde::{Deserialize, Serialize};

/// Which primitive a queue belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// A mutex under `/locks/`: one holder at a time.
    Lock,
    /// A leader election under `/elections/`: one leader, whose value is
    /// its node's data.
    Election,
    /// A read-write lock under `/rwlocks/`: the readers at the head of the
    /// queue, or one writer.
    RwLock,
    /// A counting semaphore under `/semaphores/`: as many holders as it
    /// has permits.
    Semaphore,
}

impl QueueKind {
    /// Every kind.
    pub const ALL: [QueueKind; 4] = [
        QueueKind::Lock,
        QueueKind::Election,
        QueueKind::RwLock,
        QueueKind::Semaphore,
    ];

    /// The collection's segment in the HTTP API's paths (`/v1/<segment>/…`)
    /// and the tree prefix of its queues (`/<segment>/…`).
    pub fn segment(self) -> &'static str {
        match self {
            QueueKind::Lock => "locks",
            QueueKind::Election => "elections",
            QueueKind::RwLock => "rwlocks",
            QueueKind::Semaphore => "semaphores",
        }
    }

    /// The primitive's name in messages (`read-write lock`).
    pub fn noun(self) -> &'static str {
        match self {
            QueueKind::Lock => "lock",
            QueueKind::Election => "election",
            QueueKind::RwLock => "read-write lock",
            QueueKind::Semaphore => "semaphore",
        }
    }

    /// True for the kinds several entries may hold at once.
    pub fn is_shared(self) -> bool {
        matches!(self, QueueKind::RwLock | QueueKind::Semaphore)
    }
}

/// How one entry asks to hold its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Alone: a lock, or an election's leadership.
    Exclusive,
    /// A read-write lock, shared with the other readers at its head.
    Read,
    /// A read-write lock, alone.
    Write,
    /// A place in a semaphore of this many holders.
    Permits(u64),
}

impl Mode {
    /// The kinds of queue this mode is asked of: [`Mode::Exclusive`] of a
    /// lock or an election, the others of exactly one kind.
    pub fn fits(self, kind: QueueKind) -> bool {
        match self {
            Mode::Exclusive => matches!(kind, QueueKind::Lock | QueueKind::Election),
            Mode::Read | Mode::Write => kind == QueueKind::RwLock,
            Mode::Permits(_) => kind == QueueKind::Semaphore,
        }
    }

    /// A read-write lock's mode as its API spells it (`read`, `write`).
    pub fn rw_name(self) -> Option<&'static str> {
        match self {
            Mode::Read => Some("read"),
            Mode::Write => Some("write"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_fit_their_kinds_only() {
        for kind in QueueKind::ALL {
            let fitting: Vec<_> = [Mode::Exclusive, Mode::Read, Mode::Write, Mode::Permits(2)]
                .into_iter()
                .filter(|m| m.fits(kind))
                .collect();
            match kind {
                QueueKind::Lock | QueueKind::Election => assert_eq!(fitting, [Mode::Exclusive]),
                QueueKind::RwLock => assert_eq!(fitting, [Mode::Read, Mode::Write]),
                QueueKind::Semaphore => assert_eq!(fitting, [Mode::Permits(2)]),
            }
            assert_eq!(kind.is_shared(), !Mode::Exclusive.fits(kind));
        }
        assert_eq!(QueueKind::RwLock.segment(), "rwlocks");
        assert_eq!(Mode::Read.rw_name(), Some("read"));
    }
}
