//! A real, small file system for a member's data directory (a size-limited
//! tmpfs), and a ballast file that fills it up: the full-disk tests run
//! against a real `ENOSPC`, not an injected one. Mounting needs root (CI
//! runs as root). Every mount is undone when its [`Tmpfs`] is dropped,
//! on success and on panic alike.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a directory; unmounted on drop.
pub struct Tmpfs {
    dir: PathBuf,
}

/// Why no tmpfs could be mounted.
pub enum MountError {
    /// Not root: the caller skips, and says so.
    NotRoot,
    /// Root, and mounting failed anyway: a real failure.
    Failed(String),
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_mb` MiB on `dir` (created if missing).
    pub fn mount(dir: &Path, size_mb: u64) -> Result<Tmpfs, MountError> {
        if !is_root() {
            return Err(MountError::NotRoot);
        }
        std::fs::create_dir_all(dir).map_err(|e| MountError::Failed(e.to_string()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| MountError::Failed(format!("mount: {e}")))?;
        if !out.status.success() {
            return Err(MountError::Failed(format!(
                "mount -t tmpfs on {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// Fills the file system up with a ballast file, to the last byte.
    pub fn fill(&self) -> Ballast {
        let path = self.dir.join("ballast");
        let mut file = std::fs::File::create(&path).expect("create the ballast file");
        let chunk = vec![0xa5u8; 1 << 20];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("writing the ballast: {e}"),
            }
        }
        // Whatever fits in a page's tail.
        while file.write(&[0xa5]).is_ok_and(|n| n == 1) {}
        Ballast { path }
    }

    /// Fills the file system up, then gives `free` bytes back: room for
    /// small writes, none for a large one.
    pub fn fill_leaving(&self, free: u64) -> Ballast {
        let ballast = self.fill();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&ballast.path)
            .expect("open the ballast file");
        let len = file.metadata().expect("ballast metadata").len();
        file.set_len(len.saturating_sub(free))
            .expect("shorten the ballast file");
        ballast
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a member's files open in a task not yet ended):
            // detach it now; the kernel frees it when the last file closes.
            let lazy = Command::new("umount").arg("-l").arg(&self.dir).status();
            if !lazy.is_ok_and(|s| s.success()) {
                eprintln!("could not unmount the tmpfs on {}", self.dir.display());
            }
        }
    }
}

/// The file that fills a [`Tmpfs`]; [`Ballast::remove`] gives the space back.
pub struct Ballast {
    path: PathBuf,
}

impl Ballast {
    pub fn remove(self) {
        std::fs::remove_file(&self.path).expect("remove the ballast");
    }
}
