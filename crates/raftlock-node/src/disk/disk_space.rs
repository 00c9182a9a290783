//! Whether the data directory's file system has room again, for a member
//! that stopped its Raft on a full disk (`storage_watch.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Free space a member waits for before it reopens its log after a full
/// disk. Reopening sled and catching up writes at once; a few MiB keep
/// a disk that is only just below full from failing again at the first
/// append (sled writes in segments of up to 512 KiB, a snapshot file is
/// the state's size).
pub(crate) const ROOM_TO_REOPEN: u64 = 4 * 1024 * 1024;

/// The data directory's free space, and the fault hook that makes it look
/// full. Cheap to clone.
#[derive(Clone)]
pub(crate) struct DiskSpace {
    dir: PathBuf,
    /// Set by [`crate::Node::fail_log_sync_out_of_space`]: the disk counts
    /// as full until [`crate::Node::restore_disk_space`].
    injected_full: Arc<AtomicBool>,
}

/// What a look at the disk found.
#[derive(Debug)]
pub(crate) enum Room {
    /// At least [`ROOM_TO_REOPEN`] free for this user.
    Enough,
    /// Less free than that (or an injected full disk); bytes free.
    Short(u64),
}

impl DiskSpace {
    pub fn new(dir: &Path) -> Self {
        DiskSpace {
            dir: dir.to_path_buf(),
            injected_full: Arc::new(AtomicBool::new(false)),
        }
    }

    #[cfg(feature = "fault-injection")]
    pub fn set_injected_full(&self, full: bool) {
        self.injected_full.store(full, Ordering::SeqCst);
    }

    /// Free space now (`statvfs`'s blocks available to unprivileged users,
    /// so root's reserve on ext4 does not count as room).
    pub fn room(&self) -> std::io::Result<Room> {
        if self.injected_full.load(Ordering::SeqCst) {
            return Ok(Room::Short(0));
        }
        let free = fs2::available_space(&self.dir)?;
        Ok(if free >= ROOM_TO_REOPEN {
            Room::Enough
        } else {
            Room::Short(free)
        })
    }
}
