//! Virtualenvs for the tests that drive real Python clients (kazoo,
//! python-etcd3, grpcio) from PyPI.
//!
//! A venv is made once under the caller's target directory and reused.
//! Tests of one binary run on parallel threads and cargo runs several test
//! binaries side by side, so making a venv is serialised by an exclusive
//! lock on a file beside it: a second caller waits, then finds it made.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::fcntl::{Flock, FlockArg};

/// The `python3` on `PATH`, if any.
fn python3() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("python3"))
            .find(|p| p.is_file())
    })
}

fn succeeds(cmd: &mut Command) -> bool {
    match cmd.status() {
        Ok(status) => status.success(),
        Err(e) => panic!("{cmd:?}: {e}"),
    }
}

/// The python of a virtualenv at `dir` holding `packages` (pip
/// requirement strings), made on first use.
///
/// Without `python3` on `PATH` it says loudly that `test` cannot run and
/// returns `None`, except under CI (`CI` set), where that fails the test.
/// A failed install always fails the test.
pub fn venv(test: &str, dir: &Path, packages: &[&str]) -> Option<PathBuf> {
    let Some(python3) = python3() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: python3 is missing under CI"
        );
        eprintln!("==========================================================");
        eprintln!("SKIP {test}: no python3 on PATH");
        eprintln!("==========================================================");
        return None;
    };
    let lock_path = beside(dir, "lock");
    let file = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    // Held until this function returns (dropping it unlocks).
    let _held = Flock::lock(file, FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("locking {}: {e}", lock_path.display()));
    let python = dir.join("bin").join("python");
    let marker = dir.join(".installed");
    let wanted = packages.join(" ");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        return Some(python);
    }
    make(&python3, dir);
    assert!(
        succeeds(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check"
                ])
                .args(packages)
        ),
        "{test}: pip install {wanted} failed"
    );
    std::fs::write(&marker, &wanted)
        .unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    Some(python)
}

/// `dir` with `.suffix` appended to its last component.
fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// Makes an empty virtualenv at `dir`: `python3 -m venv`, or, on a
/// Debian python3 without python3-venv, virtualenv from PyPI.
fn make(python3: &Path, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    if succeeds(Command::new(python3).args(["-m", "venv"]).arg(dir)) {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    let tool = beside(dir, "virtualenv");
    assert!(
        succeeds(
            Command::new(python3)
                .args(["-m", "pip", "install", "--quiet", "--target"])
                .arg(&tool)
                .arg("virtualenv")
        ),
        "installing virtualenv failed"
    );
    assert!(
        succeeds(
            Command::new(python3)
                .env("PYTHONPATH", &tool)
                .args(["-m", "virtualenv", "--quiet"])
                .arg(dir)
        ),
        "virtualenv {} failed",
        dir.display()
    );
}
