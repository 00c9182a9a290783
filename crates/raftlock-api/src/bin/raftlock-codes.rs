//! Writes the Python and Go clients' error-code tables from
//! [`raftlock_api::ErrorCode`] (`raftlock_api::tables`); with `--check`,
//! writes nothing and fails when a committed table differs.
//!
//! ```text
//! cargo run -p raftlock-api --bin raftlock-codes [-- --check] [--root DIR]
//! ```
//!
//! `--root` is the repository root (default: two levels above this crate).

use std::path::PathBuf;
use std::process::ExitCode;

use raftlock_api::tables;

fn main() -> ExitCode {
    let mut check = false;
    let mut root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--root" => match args.next() {
                Some(dir) => root = PathBuf::from(dir),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    let mut stale = false;
    for (path, text) in [
        (tables::PYTHON_PATH, tables::python()),
        (tables::GO_PATH, tables::go()),
    ] {
        let file = root.join(path);
        let current = std::fs::read_to_string(&file).ok();
        if current.as_deref() == Some(text.as_str()) {
            continue;
        }
        if check {
            eprintln!("raftlock-codes: {path} is stale: run `cargo run -p raftlock-api --bin raftlock-codes`");
            stale = true;
        } else if let Err(e) = std::fs::write(&file, text) {
            eprintln!("raftlock-codes: cannot write {}: {e}", file.display());
            return ExitCode::FAILURE;
        } else {
            println!("wrote {path}");
        }
    }
    if stale {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: raftlock-codes [--root DIR] [--check]");
    ExitCode::from(2)
}
