//! The register workload's clients: read / write / compare-and-set on a few
//! keys, each a node of the real state machine, recorded in the Jepsen
//! history format and judged by its register checkers.
//!
//! A client picks a member at random and follows `ForwardToLeader` hints,
//! as a client of the HTTP API does. Reads go through openraft's read index
//! (`ensure_linearizable`), as the node's linearizable reads do.

use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use raftlock_core::{Command, Compare, Response, TxnOp};
use raftlock_jepsen::{Event, EventType, Process, Value, F};
use raftlock_node::{NodeId, Proposal};

use crate::world::WorldRef;

/// Registers the clients use.
pub const KEYS: [&str; 3] = ["x", "y", "z"];
/// A client gives up on an operation after this long: outcome unknown.
pub const OP_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Hops along leader hints before giving up.
const MAX_HOPS: usize = 3;

fn path(key: &str) -> String {
    format!("/sim/{key}")
}

/// One operation as asked.
#[derive(Debug, Clone)]
enum Op {
    Read,
    Write(i64),
    Cas(i64, i64),
}

/// How an operation ended.
enum Outcome {
    Ok(Value),
    Fail(String),
    Info(String),
}

/// Runs one client until the world stops.
pub async fn client(world: WorldRef) {
    let mut process = world.with(|w| w.new_process());
    while !world.with(|w| w.stopping) {
        let (op, key, pause) = world.with(|w| {
            let key = KEYS[w.rng.pick(KEYS.len())];
            let value = w.rng.range(0, 5) as i64;
            let op = match w.rng.range(0, 10) {
                0..4 => Op::Read,
                4..7 => Op::Write(value),
                _ => Op::Cas(w.rng.range(0, 5) as i64, value),
            };
            (op, key, Duration::from_millis(w.rng.range(0, 30)))
        });
        tokio::time::sleep(pause).await;
        let (f, invoke_value) = match &op {
            Op::Read => (F::Read, Value::Nil),
            Op::Write(v) => (F::Write, Value::Int(*v)),
            Op::Cas(a, b) => (F::Cas, Value::List(vec![Value::Int(*a), Value::Int(*b)])),
        };
        world.with(|w| {
            w.record(
                Event::new(
                    Process::Client(process),
                    EventType::Invoke,
                    f.clone(),
                    invoke_value,
                )
                .with_key(key),
            )
        });
        let outcome = match tokio::time::timeout(OP_TIMEOUT, perform(&world, &op, key)).await {
            Ok(o) => o,
            Err(_) => Outcome::Info("timed out".into()),
        };
        let event = match outcome {
            Outcome::Ok(v) => Event::new(Process::Client(process), EventType::Ok, f, v),
            Outcome::Fail(e) => {
                Event::new(Process::Client(process), EventType::Fail, f, Value::Nil).with_error(e)
            }
            Outcome::Info(e) => {
                Event::new(Process::Client(process), EventType::Info, f, Value::Nil).with_error(e)
            }
        };
        let unknown = event.kind == EventType::Info;
        world.with(|w| {
            w.record(event.with_key(key));
            if unknown {
                process = w.new_process();
            }
        });
    }
}

/// Performs `op` against a member picked at random, following leader hints.
async fn perform(world: &WorldRef, op: &Op, key: &str) -> Outcome {
    let mut target = world.with(|w| {
        let ids = w.ids();
        ids[w.rng.pick(ids.len())]
    });
    for _ in 0..MAX_HOPS {
        let Some(raft) = world.with(|w| w.raft(target)) else {
            // Nothing was sent: the connection was refused.
            return Outcome::Fail(format!("member {target} is down"));
        };
        // A paused member reads its socket only once it resumes.
        world.wait_unpaused(&[target]).await;
        // A member whose log sync failed has left the Raft group and
        // answers `storage_failed` without proposing anything.
        let failed = world.with(|w| w.nodes.get(&target).and_then(|m| m.sync_failed));
        if let Some(error) = failed {
            return Outcome::Fail(format!("member {target}: storage failed ({error})"));
        }
        let hint = match op {
            Op::Read => match read(world, &raft, target, key).await {
                Ok(v) => return Outcome::Ok(v),
                Err(Hop::To(leader)) => leader,
                Err(Hop::Fail(e)) => return Outcome::Fail(e),
            },
            Op::Write(_) | Op::Cas(..) => {
                let command = match op {
                    Op::Write(v) => Command::Put {
                        path: path(key),
                        data: v.to_string().into_bytes(),
                        session: None,
                        sequential: false,
                        expected_version: None,
                    },
                    Op::Cas(a, b) => Command::Txn {
                        compare: vec![Compare::Value {
                            path: path(key),
                            value: a.to_string().into_bytes(),
                        }],
                        success: vec![TxnOp::Put {
                            path: path(key),
                            data: b.to_string().into_bytes(),
                            session: None,
                            sequential: false,
                            expected_version: None,
                        }],
                        failure: vec![],
                    },
                    Op::Read => unreachable!("reads handled above"),
                };
                match raft.client_write(Proposal::one(command)).await {
                    Ok(resp) => return written(op, resp.data.0.into_iter().next()),
                    Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => f.leader_id,
                    // Proposed or not, nobody can say: the member stopped.
                    Err(e) => return Outcome::Info(e.to_string()),
                }
            }
        };
        match hint {
            Some(leader) => target = leader,
            None => return Outcome::Fail("no leader known".into()),
        }
    }
    Outcome::Fail("too many leader hops".into())
}

/// What a committed write's reply means for the history.
fn written(op: &Op, applied: Option<raftlock_core::Applied>) -> Outcome {
    let Some(applied) = applied else {
        return Outcome::Info("no reply for the command".into());
    };
    match (op, applied.result) {
        (Op::Write(_), Ok(Response::Put { .. })) => Outcome::Ok(Value::Nil),
        (Op::Cas(..), Ok(Response::Txn { succeeded, .. })) => Outcome::Ok(Value::Bool(succeeded)),
        // Applied, and refused by the state machine: it changed nothing.
        (_, Err(e)) => Outcome::Fail(e.to_string()),
        (_, Ok(other)) => Outcome::Info(format!("unexpected reply {other:?}")),
    }
}

enum Hop {
    To(Option<NodeId>),
    Fail(String),
}

/// A linearizable read at `id`: confirm leadership with a quorum, wait
/// until applied up to the read index, then read the local replica.
async fn read(
    world: &WorldRef,
    raft: &raftlock_node::Raft,
    id: NodeId,
    key: &str,
) -> Result<Value, Hop> {
    // The defect skips the read index: any member answers from its own,
    // possibly stale, replica.
    if !cfg!(feature = "inject-stale-read") {
        // `ensure_linearizable` split in two: openraft's read index, then
        // the simulator's own wait for the apply (see `World::applied`).
        let read_index = match raft.get_read_log_id().await {
            Ok((read, _)) => read.map_or(0, |l| l.index),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                return Err(Hop::To(f.leader_id))
            }
            Err(e) => return Err(Hop::Fail(e.to_string())),
        };
        if wait_applied(world, id, read_index).await.is_err() {
            return Err(Hop::Fail(format!("member {id} stopped")));
        }
    }
    world.with(|w| {
        let m = w.nodes.get(&id).ok_or(Hop::Fail("no such member".into()))?;
        Ok(match m.sm.state.node(&path(key)) {
            None => Value::Nil,
            Some(node) => std::str::from_utf8(&node.data)
                .ok()
                .and_then(|s| s.parse().ok())
                .map_or(Value::Nil, Value::Int),
        })
    })
}

/// Waits until member `id` applied up to `index`; `Err` if it stopped
/// first.
pub async fn wait_applied(world: &WorldRef, id: NodeId, index: u64) -> Result<(), ()> {
    let wait = world.with(|w| {
        let applied = w
            .nodes
            .get(&id)
            .and_then(|m| m.sm.last_applied)
            .map_or(0, |l| l.index);
        (applied < index).then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            w.applied_waiters.push((id, index, tx));
            rx
        })
    });
    match wait {
        Some(wait) => wait.await.map_err(drop),
        None => Ok(()),
    }
}
