//! Replays every input the fuzzers kept (`fuzz/corpus/<target>/`) or found
//! crashing (`fuzz/artifacts/<target>/`) through the same decoders, so a
//! fixed crash stays fixed without a nightly toolchain. Fails on a panic.

use std::path::{Path, PathBuf};

use raftlock_fuzz_cases::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.expect("read corpus entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}

#[test]
fn every_kept_input_decodes_without_a_panic() {
    let mut replayed = 0;
    for (name, run) in TARGETS {
        for kind in ["corpus", "artifacts"] {
            for input in inputs(&fuzz_dir().join(kind).join(name)) {
                let bytes = std::fs::read(&input).expect("read input");
                let outcome = std::panic::catch_unwind(|| run(&bytes));
                assert!(outcome.is_ok(), "{name}: {} panicked", input.display());
                replayed += 1;
            }
        }
    }
    // The corpus is committed: an empty replay means it went missing.
    assert!(replayed >= TARGETS.len(), "only {replayed} inputs replayed");
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    for (name, _) in TARGETS {
        let file = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.is_file(), "{} missing", file.display());
    }
}
