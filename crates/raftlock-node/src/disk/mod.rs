//! What a member keeps on disk beside the Raft log: the snapshot file,
//! backups, the data directory's identity, and what happens when the log
//! disk fails or fills.

pub(crate) mod backup;
pub(crate) mod disk_space;
pub(crate) mod identity;
pub(crate) mod snapshot_file;
pub(crate) mod storage_watch;
