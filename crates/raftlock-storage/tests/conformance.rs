//! openraft's own storage conformance suite, run against `SledLogStore`
//! with real fsync barriers (the production setting).

mod common;

use common::{MemStateMachine, Store, TestConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use raftlock_storage::Durability;
use tempfile::TempDir;

/// Builds a fresh store in a new temporary directory for each suite case;
/// the `TempDir` guard deletes it when the case ends.
struct SledBuilder;

impl StoreBuilder<TestConfig, Store, MemStateMachine, TempDir> for SledBuilder {
    async fn build(&self) -> Result<(TempDir, Store, MemStateMachine), StorageError<u64>> {
        let dir = TempDir::new().expect("temp dir");
        let store = common::open(dir.path(), Durability::Fsync);
        Ok((dir, store, MemStateMachine::default()))
    }
}

#[test]
fn openraft_storage_suite() -> anyhow::Result<()> {
    // About 8 s of this is the suite's own `sleep(1 s)` in eight cases.
    Suite::test_all(SledBuilder)?;
    Ok(())
}
