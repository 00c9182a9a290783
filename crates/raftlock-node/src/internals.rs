//! Raw access for the simulator, tests and tools, behind the `internals`
//! feature (which `fault-injection` turns on): any command committed,
//! any closure over the state, the openraft handle. Not an API: the
//! typed operations are. A binary built on its own has none of these.

use raftlock_core::{Command, Response, StateMachine};

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::Consistency;

impl Node {
    /// Commits any command.
    pub async fn submit_command(&self, command: Command) -> Result<Response, NodeError> {
        self.submit(command).await
    }

    /// Runs `f` on the state, after a read-index barrier unless stale.
    pub async fn read_state<T>(
        &self,
        consistency: Consistency,
        f: impl FnOnce(&StateMachine) -> T,
    ) -> Result<T, NodeError> {
        self.read(consistency, f).await
    }

    /// The openraft handle (forcing an election, reading its metrics).
    pub fn raft(&self) -> crate::raft::typ::Raft {
        self.replica.raft.current()
    }
}
