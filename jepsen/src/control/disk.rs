//! Member data directories on size-limited tmpfs mounts, and the ballast
//! file that fills one up: the real `ENOSPC` of the `disk-fill` nemesis.
//! Whichever write of the member needs space first meets it (a new log
//! chunk, a snapshot, sled's own files), as on a real full disk; the
//! member must leave Raft, answer `503 disk_full`, and come back by itself
//! once the ballast is gone (docs/design.md, "A full disk").
//!
//! Mounting needs root. Every mount is undone when [`DataDisks`] is
//! dropped (lazily if a killed member still holds a file open).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// The ballast's name inside a member's data directory.
const BALLAST: &str = "disk-fill-ballast";

/// The tmpfs mounts of a run (none unless a fault needs them).
#[derive(Debug, Default)]
pub struct DataDisks {
    mounts: Vec<PathBuf>,
}

impl DataDisks {
    /// Mounts a tmpfs of `size_mb` MiB on each of `dirs` (created first).
    pub fn mount(dirs: impl IntoIterator<Item = PathBuf>, size_mb: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            is_root(),
            "the disk-fill nemesis puts each member's data directory on a tmpfs of its own, \
             and mounting one needs root"
        );
        let mut disks = DataDisks::default();
        for dir in dirs {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
                .arg(&dir)
                .output()
                .context("running mount")?;
            anyhow::ensure!(
                out.status.success(),
                "mount -t tmpfs on {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            disks.mounts.push(dir);
        }
        Ok(disks)
    }

    /// True when `dir` is one of these mounts.
    pub fn is_mounted(&self, dir: &Path) -> bool {
        self.mounts.iter().any(|m| m == dir)
    }

    /// Fills the tmpfs on `dir` to the last byte with a ballast file;
    /// returns its size. Refuses a directory that is not one of these
    /// mounts: filling the machine's own disk would hurt everything else.
    /// Tens of MiB of writes: off the async workers, which also run the
    /// clients whose operations the history times.
    pub async fn fill(&self, dir: &Path) -> io::Result<u64> {
        if !self.is_mounted(dir) {
            return Err(io::Error::other(format!(
                "{} is not a tmpfs of this run: not filling it",
                dir.display()
            )));
        }
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || write_ballast(&dir))
            .await
            .map_err(io::Error::other)?
    }

    /// Removes the ballast from `dir` (nothing to do when there is none).
    pub fn free(&self, dir: &Path) -> io::Result<()> {
        match std::fs::remove_file(dir.join(BALLAST)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Writes the ballast into `dir` until the file system is full.
fn write_ballast(dir: &Path) -> io::Result<u64> {
    let mut file = std::fs::File::create(dir.join(BALLAST))?;
    let chunk = vec![0xa5u8; 1 << 20];
    let mut written = 0u64;
    let mut write = |buf: &[u8]| -> io::Result<bool> {
        match file.write(buf) {
            Ok(0) => Ok(false),
            Ok(n) => {
                written += n as u64;
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => Ok(false),
            Err(e) => Err(e),
        }
    };
    while write(&chunk)? {}
    // Whatever is left in the last page.
    while write(&[0xa5])? {}
    Ok(written)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Removes everything inside `dir`, keeping `dir` (a mount point cannot
/// be removed while mounted).
pub fn remove_contents(dir: &Path) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

impl Drop for DataDisks {
    fn drop(&mut self) {
        for dir in &self.mounts {
            let unmounted = Command::new("umount")
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success());
            // Busy (a killed member's files not yet closed): detach it now;
            // the kernel frees it when the last file closes.
            if !unmounted
                && !Command::new("umount")
                    .arg("-l")
                    .arg(dir)
                    .status()
                    .is_ok_and(|s| s.success())
            {
                eprintln!("could not unmount the tmpfs on {}", dir.display());
            }
        }
    }
}
