//! A member's simulated disk, byte for byte: the segment files the real
//! log (`raftlock_storage::SegmentLog`) writes through its file-system
//! seam, and what syncs made durable.
//!
//! Every write lands in a file's `live` bytes at once (what the running
//! log reads back) and queues as unsynced; `sync_data` applies a file's
//! queued writes, in order, to its `durable` bytes. Directory entries are
//! durable only after `sync_dir`: a created file whose directory was not
//! synced vanishes in a crash, a removed one comes back. A crash keeps the
//! durable state, plus (torn crash) a seeded prefix of the unsynced writes
//! with the last one cut short, as a power loss in the middle of writing
//! back. The vote, the purge pointer and snapshots are durable once
//! written (the real stores sync them before returning).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::{Entry, LogId, Vote};
use raftlock_node::{Member as RaftMember, NodeId, TypeConfig};
use raftlock_storage::{LogFile, SegmentFs, SegmentLog};

/// A snapshot as stored: its meta and the state machine's bytes.
pub type StoredSnapshot = (openraft::SnapshotMeta<NodeId, RaftMember>, Vec<u8>);

/// The real segment log over a simulated disk.
pub type SimLog = SegmentLog<NodeId, SimFs>;

/// Where the log's segments live on every simulated disk.
pub const LOG_DIR: &str = "/log";

/// Segments close at this size: small, so a run rotates and purges many
/// of them (the real default is 64 MiB).
pub const SEGMENT_BYTES: u64 = 8 * 1024;

/// One file's content.
#[derive(Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

/// A write not yet synced.
struct Pending {
    inode: u64,
    at: u64,
    bytes: Vec<u8>,
}

/// The files of one disk.
#[derive(Default)]
struct Files {
    /// Bumped by every crash: handles opened before it fail.
    epoch: u64,
    next_inode: u64,
    /// Never freed before a crash: an open handle may still use a removed file.
    inodes: BTreeMap<u64, Inode>,
    /// The directory entries the running log sees.
    live_dir: BTreeMap<PathBuf, u64>,
    /// The directory entries that survive a crash.
    durable_dir: BTreeMap<PathBuf, u64>,
    /// Unsynced writes, oldest first.
    unsynced: VecDeque<Pending>,
    lost_writes: u64,
    torn_writes: u64,
}

fn write_into(bytes: &mut Vec<u8>, at: u64, data: &[u8]) {
    let at = at as usize;
    let end = at + data.len();
    if bytes.len() < end {
        // `pwrite` past the end: the gap reads as zeros.
        bytes.resize(end, 0);
    }
    bytes[at..end].copy_from_slice(data);
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl Files {
    fn inode(&self, path: &Path) -> io::Result<u64> {
        self.live_dir
            .get(path)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn sync_inode(&mut self, inode: u64) {
        let (mine, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.unsynced)
            .into_iter()
            .partition(|p| p.inode == inode);
        self.unsynced = rest;
        if let Some(node) = self.inodes.get_mut(&inode) {
            for p in mine {
                write_into(&mut node.durable, p.at, &p.bytes);
            }
        }
    }

    fn land(&mut self, p: &Pending, len: usize) {
        if let Some(node) = self.inodes.get_mut(&p.inode) {
            write_into(&mut node.durable, p.at, &p.bytes[..len]);
        }
    }

    /// Power loss; `torn`: the first `kept` unsynced writes reached the
    /// disk, and `per_mille` of the next one.
    fn crash(&mut self, torn: Option<(usize, u64)>) {
        if let Some((kept, per_mille)) = torn {
            for _ in 0..kept {
                let Some(p) = self.unsynced.pop_front() else {
                    break;
                };
                self.land(&p, p.bytes.len());
            }
            if let Some(p) = self.unsynced.pop_front() {
                let len = p.bytes.len();
                let part = (len as u64 * per_mille.min(999) / 1000) as usize;
                self.land(&p, part.min(len.saturating_sub(1)));
                self.torn_writes += 1;
                self.lost_writes += 1;
            }
        }
        self.lost_writes += self.unsynced.len() as u64;
        self.unsynced.clear();
        self.live_dir = self.durable_dir.clone();
        let kept: Vec<u64> = self.durable_dir.values().copied().collect();
        self.inodes.retain(|n, _| kept.contains(n));
        for node in self.inodes.values_mut() {
            node.live = node.durable.clone();
        }
        self.epoch += 1;
    }

    /// A copy holding what a crash now would leave (the unsynced writes
    /// gone), for the oracle to read without touching this disk.
    fn durable_copy(&self) -> Files {
        let inodes = self
            .durable_dir
            .values()
            .filter_map(|n| {
                self.inodes.get(n).map(|node| {
                    (
                        *n,
                        Inode {
                            live: node.durable.clone(),
                            durable: node.durable.clone(),
                        },
                    )
                })
            })
            .collect();
        Files {
            epoch: 0,
            next_inode: self.next_inode,
            inodes,
            live_dir: self.durable_dir.clone(),
            durable_dir: self.durable_dir.clone(),
            unsynced: VecDeque::new(),
            lost_writes: 0,
            torn_writes: 0,
        }
    }
}

/// The segment log's file system on one simulated disk, for one
/// incarnation of the member: after a crash every call fails.
#[derive(Clone)]
pub struct SimFs {
    files: Arc<Mutex<Files>>,
    epoch: u64,
}

impl SimFs {
    fn lock(&self) -> io::Result<MutexGuard<'_, Files>> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if files.epoch != self.epoch {
            return Err(io::Error::other("disk of a crashed incarnation"));
        }
        Ok(files)
    }

    fn handle(&self, inode: u64, writable: bool) -> SimFile {
        SimFile {
            fs: self.clone(),
            inode,
            writable,
        }
    }
}

/// An open file on a simulated disk.
pub struct SimFile {
    fs: SimFs,
    inode: u64,
    writable: bool,
}

impl LogFile for SimFile {
    fn write_all_at(&self, buf: &[u8], at: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "file opened for reading",
            ));
        }
        let mut files = self.fs.lock()?;
        if let Some(node) = files.inodes.get_mut(&self.inode) {
            write_into(&mut node.live, at, buf);
        }
        files.unsynced.push_back(Pending {
            inode: self.inode,
            at,
            bytes: buf.to_vec(),
        });
        Ok(())
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        let files = self.fs.lock()?;
        let live = files
            .inodes
            .get(&self.inode)
            .map(|n| n.live.as_slice())
            .unwrap_or_default();
        let src = usize::try_from(at)
            .ok()
            .and_then(|at| live.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.lock()?.sync_inode(self.inode);
        Ok(())
    }
}

impl SegmentFs for SimFs {
    type File = SimFile;

    fn create_new(&self, path: &Path) -> io::Result<SimFile> {
        let mut files = self.lock()?;
        if files.live_dir.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        let inode = files.next_inode;
        files.next_inode += 1;
        files.inodes.insert(inode, Inode::default());
        files.live_dir.insert(path.to_path_buf(), inode);
        Ok(self.handle(inode, true))
    }

    fn open_rw(&self, path: &Path) -> io::Result<SimFile> {
        let inode = self.lock()?.inode(path)?;
        Ok(self.handle(inode, true))
    }

    fn open_read(&self, path: &Path) -> io::Result<SimFile> {
        let inode = self.lock()?.inode(path)?;
        Ok(self.handle(inode, false))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let files = self.lock()?;
        let inode = files.inode(path)?;
        Ok(files
            .inodes
            .get(&inode)
            .map(|n| n.live.clone())
            .unwrap_or_default())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let files = self.lock()?;
        Ok(files
            .live_dir
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(OsString::from))
            .collect())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut files = self.lock()?;
        files.live_dir.remove(path).ok_or_else(|| not_found(path))?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut files = self.lock()?;
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        files.durable_dir.retain(|p, _| !in_dir(p));
        let live: Vec<(PathBuf, u64)> = files
            .live_dir
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, n)| (p.clone(), *n))
            .collect();
        files.durable_dir.extend(live);
        Ok(())
    }
}

/// Opens the real log over `fs`, dropping entries at or below `purged`.
pub fn open_log(
    fs: SimFs,
    purged: Option<LogId<NodeId>>,
) -> Result<(SimLog, raftlock_storage::Opened), String> {
    SimLog::open_with::<Entry<TypeConfig>>(
        fs,
        Path::new(LOG_DIR),
        SEGMENT_BYTES,
        purged.map(|p| p.index),
    )
    .map_err(|e| e.to_string())?
    .map_err(|reason| format!("the log refuses to open: {reason}"))
}

/// One durability barrier, as the real store's sync worker runs it: sync
/// what was written (and the directory), then delete what a purge let go.
pub fn barrier(log: &SimLog) -> Result<(), String> {
    let ticket = log.begin_sync().map_err(|e| e.to_string())?;
    ticket.sync().map_err(|e| e.to_string())?;
    ticket.remove_doomed().map_err(|e| e.to_string())?;
    log.finish_sync(&ticket);
    Ok(())
}

/// A member's disk.
#[derive(Default)]
pub struct Disk {
    files: Arc<Mutex<Files>>,
    /// The vote, durable once saved.
    pub vote: Option<Vote<NodeId>>,
    /// The purge pointer, durable once saved.
    pub purged: Option<LogId<NodeId>>,
    /// The newest snapshot, durable once written.
    pub snapshot: Option<StoredSnapshot>,
}

impl Disk {
    fn files(&self) -> MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bumped by every crash: a store opened before it is stale.
    pub fn epoch(&self) -> u64 {
        self.files().epoch
    }

    /// The file system for the incarnation starting now.
    pub fn fs(&self) -> SimFs {
        SimFs {
            files: Arc::clone(&self.files),
            epoch: self.epoch(),
        }
    }

    /// A power loss: unsynced writes are gone, and stores opened before
    /// it are stale.
    pub fn crash(&mut self) {
        self.files().crash(None);
    }

    /// A power loss in the middle of writing back: the first `kept`
    /// unsynced writes reached the platter, `per_mille` of the next one
    /// too. The real log's open then finds the torn record by its checksum
    /// and cuts it off. Whatever was never acknowledged may survive this
    /// way; nothing acknowledged is lost.
    pub fn crash_torn(&mut self, kept: usize, per_mille: u64) {
        self.files().crash(Some((kept, per_mille)));
    }

    /// Unsynced writes lost to crashes, for the run's summary.
    pub fn lost_writes(&self) -> u64 {
        self.files().lost_writes
    }

    /// Writes torn by crashes.
    pub fn torn_writes(&self) -> u64 {
        self.files().torn_writes
    }

    /// The log as a crash now would leave it, opened over a copy of the
    /// durable state (this disk is not touched).
    pub fn durable_log(&self) -> Result<SimLog, String> {
        let copy = SimFs {
            files: Arc::new(Mutex::new(self.files().durable_copy())),
            epoch: 0,
        };
        open_log(copy, self.purged).map(|(log, _)| log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn indexes(log: &SimLog) -> Vec<u64> {
        log.range::<Entry<TypeConfig>>(..)
            .expect("range")
            .iter()
            .map(|e| e.log_id.index)
            .collect()
    }

    fn reopen(d: &Disk) -> SimLog {
        open_log(d.fs(), d.purged).expect("open").0
    }

    #[test]
    fn a_crash_keeps_what_was_synced_and_loses_the_rest() {
        let mut d = Disk::default();
        let log = reopen(&d);
        log.append([entry(1), entry(2)]).expect("append");
        barrier(&log).expect("sync");
        log.append([entry(3)]).expect("append");
        assert_eq!(indexes(&log), [1, 2, 3]);
        assert_eq!(indexes(&d.durable_log().expect("durable")), [1, 2]);
        d.crash();
        assert!(
            log.append([entry(4)]).is_err(),
            "a stale log writes nothing"
        );
        assert_eq!(indexes(&reopen(&d)), [1, 2]);
        assert!(d.lost_writes() >= 1);
        assert_eq!(d.epoch(), 1);
    }

    #[test]
    fn a_torn_crash_anywhere_leaves_the_synced_entries_and_a_prefix_of_the_rest() {
        for kept in 0..6 {
            for per_mille in [0, 1, 250, 500, 999] {
                let mut d = Disk::default();
                let log = reopen(&d);
                log.append([entry(1)]).expect("append");
                barrier(&log).expect("sync");
                for i in 2..=5 {
                    log.append([entry(i)]).expect("append");
                }
                d.crash_torn(kept, per_mille);
                let got = indexes(&reopen(&d));
                assert!(!got.is_empty(), "kept {kept}, {per_mille}‰: {got:?}");
                assert_eq!(got, (1..=got.len() as u64).collect::<Vec<_>>());
                // Four unsynced appends, one write each: a fifth kept
                // leaves nothing to tear.
                assert_eq!(d.torn_writes(), u64::from(kept < 4), "kept {kept}");
            }
        }
    }

    #[test]
    fn directory_entries_are_durable_only_after_a_directory_sync() {
        let mut d = Disk::default();
        let fs = d.fs();
        let a = fs.create_new(Path::new("/log/a")).expect("create");
        a.write_all_at(b"abc", 0).expect("write");
        a.sync_data().expect("sync");
        fs.sync_dir(Path::new("/log")).expect("sync dir");
        fs.remove(Path::new("/log/a")).expect("remove");
        let b = fs.create_new(Path::new("/log/b")).expect("create");
        b.sync_data().expect("sync");
        d.crash();
        let fs = d.fs();
        assert_eq!(fs.list(Path::new("/log")).expect("list"), ["a"]);
        assert_eq!(fs.read(Path::new("/log/a")).expect("read"), b"abc");
        assert!(a.read_exact_at(&mut [0; 1], 0).is_err(), "stale handle");
    }

    #[test]
    fn segments_rotate_and_a_purge_deletes_them_after_its_barrier() {
        let mut d = Disk::default();
        let log = reopen(&d);
        let big = |index| Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::<TypeConfig>::Blank,
        };
        for i in 1..=400 {
            log.append([big(i)]).expect("append");
        }
        barrier(&log).expect("sync");
        let fs = d.fs();
        let before = fs.list(Path::new(LOG_DIR)).expect("list").len();
        assert!(before > 1, "{before} segment(s)");
        d.purged = Some(big(300).log_id);
        log.remove_upto(300);
        barrier(&log).expect("sync");
        barrier(&log).expect("sync the deletions");
        let after = fs.list(Path::new(LOG_DIR)).expect("list").len();
        assert!(after < before, "{before} -> {after}");
        d.crash();
        assert_eq!(indexes(&reopen(&d)), (301..=400).collect::<Vec<_>>());
    }
}
