//! The simulated links between members: openraft's network traits over
//! direct calls into the target's Raft handle, with seeded delay (and so
//! reordering), loss, duplication and one- or two-way cuts.
//!
//! A lost request or a cut link costs the caller [`RPC_TIMEOUT`] before it
//! fails, as a dead TCP peer would; failing at once would let openraft
//! retry in a loop that never lets simulated time advance.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use raftlock_node::{Member as RaftMember, NodeId, Raft, TypeConfig};

use crate::world::WorldRef;

/// How long a caller waits for an answer that does not come.
pub const RPC_TIMEOUT: Duration = Duration::from_millis(100);

/// Cut links and link fault rates.
#[derive(Debug, Clone, Default)]
pub struct Links {
    /// Directed links `(from, to)` that deliver nothing.
    pub cut: BTreeSet<(NodeId, NodeId)>,
    /// Chance that a message (request or response) is lost.
    pub loss: f64,
    /// Chance that a request is delivered twice.
    pub duplicate: f64,
    /// Extra delay of each message, drawn from `0..extra_delay_ms`.
    pub extra_delay_ms: u64,
}

/// What happens to one request and its response, drawn when it is sent.
struct Fate {
    request_delay: Duration,
    response_delay: Duration,
    request_lost: bool,
    response_lost: bool,
    duplicate: Option<Duration>,
}

impl Links {
    fn delay(&self, rng: &mut crate::rng::SimRng) -> Duration {
        Duration::from_micros(rng.range(100, 2_000) + rng.range(0, self.extra_delay_ms * 1_000 + 1))
    }
}

/// Why a message got no answer.
#[derive(Debug)]
struct LinkDown(&'static str);

impl std::error::Error for LinkDown {}

impl std::fmt::Display for LinkDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Builds member `from`'s connections.
pub struct SimNetworkFactory {
    /// The run.
    pub world: WorldRef,
    /// The member whose Raft sends.
    pub from: NodeId,
    /// Its incarnation: a crashed instance's stragglers send nothing.
    pub incarnation: u64,
}

impl RaftNetworkFactory<TypeConfig> for SimNetworkFactory {
    type Network = SimConnection;

    async fn new_client(&mut self, target: NodeId, _node: &RaftMember) -> SimConnection {
        SimConnection {
            world: self.world.clone(),
            from: self.from,
            to: target,
            incarnation: self.incarnation,
        }
    }
}

/// One member's connection to a peer.
pub struct SimConnection {
    world: WorldRef,
    from: NodeId,
    to: NodeId,
    incarnation: u64,
}

type Rpc<R, E> = Result<R, RPCError<NodeId, RaftMember, E>>;

impl SimConnection {
    /// Whether `from`'s current instance is this connection's and may send
    /// to `to` now.
    fn can_send(&self, from: NodeId, to: NodeId, incarnation: Option<u64>) -> bool {
        self.world.with(|w| {
            let sender_alive = match incarnation {
                Some(inc) => w
                    .nodes
                    .get(&from)
                    .is_some_and(|m| m.incarnation == inc && m.raft.is_some()),
                None => w.nodes.get(&from).is_some_and(|m| m.raft.is_some()),
            };
            sender_alive && !w.links.cut.contains(&(from, to))
        })
    }

    /// The peer accepted an AppendEntries of `vote` sent at `sent`: the
    /// sender's quorum clock notes it, if the sender is still the
    /// incarnation that sent it.
    fn accepted(&self, vote: openraft::Vote<NodeId>, sent: tokio::time::Instant) {
        let quorum = self.world.with(|w| {
            let m = w.nodes.get_mut(&self.from)?;
            if m.incarnation != self.incarnation || m.raft.is_none() {
                return None;
            }
            let newer = match m.acks.get(&self.to) {
                Some((v, t)) if *v == vote => sent > *t,
                Some((v, _)) => vote > *v,
                None => true,
            };
            if newer {
                m.acks.insert(self.to, (vote, sent));
            }
            m.quorum.clone()
        });
        if let Some(q) = quorum {
            q.record(self.to, vote, sent);
        }
    }

    /// Sends `req` to the peer's Raft through `call`, as the links decide.
    async fn send<Req, Resp, E, F, Fut>(&self, req: Req, call: F) -> Rpc<Resp, E>
    where
        Req: Clone + Send + 'static,
        Resp: Send + 'static,
        E: std::error::Error,
        F: Fn(Raft, Req) -> Fut + Send + Sync + 'static + Clone,
        Fut: Future<Output = Result<Resp, E>> + Send + 'static,
    {
        let fate = self.world.with(|w| {
            let request_delay = w.links.delay(&mut w.rng);
            let response_delay = w.links.delay(&mut w.rng);
            let loss = w.links.loss;
            let request_lost = w.rng.chance(loss);
            let response_lost = w.rng.chance(loss);
            let duplicate = w
                .rng
                .chance(w.links.duplicate)
                .then(|| w.links.delay(&mut w.rng));
            Fate {
                request_delay,
                response_delay,
                request_lost,
                response_lost,
                duplicate,
            }
        });
        let lost = || async {
            tokio::time::sleep(RPC_TIMEOUT).await;
            Err(RPCError::Network(NetworkError::new(&LinkDown("no answer"))))
        };
        if fate.request_lost || !self.can_send(self.from, self.to, Some(self.incarnation)) {
            return lost().await;
        }
        tokio::time::sleep(fate.request_delay).await;
        // A paused sender or receiver holds the message; it arrives late.
        self.world.wait_unpaused(&[self.from, self.to]).await;
        // The link may have been cut, or the peer crashed, in flight.
        let target = self.world.with(|w| w.raft(self.to));
        let Some(raft) = target.filter(|_| self.can_send(self.from, self.to, None)) else {
            return lost().await;
        };
        if let Some(extra) = fate.duplicate {
            let (raft, req, call) = (raft.clone(), req.clone(), call.clone());
            tokio::spawn(async move {
                tokio::time::sleep(extra).await;
                let _ = call(raft, req).await;
            });
        }
        let answer = tokio::time::timeout(RPC_TIMEOUT, call(raft, req)).await;
        let Ok(answer) = answer else {
            // `Network`, not `Unreachable`: openraft's backoff after the
            // latter waits in an unbiased `select!`, whose order tokio draws
            // from a seed outside the run's.
            return Err(RPCError::Network(NetworkError::new(&LinkDown("timed out"))));
        };
        tokio::time::sleep(fate.response_delay).await;
        self.world.wait_unpaused(&[self.from, self.to]).await;
        if fate.response_lost || !self.can_send(self.to, self.from, None) {
            return lost().await;
        }
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

impl RaftNetwork<TypeConfig> for SimConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        let (vote, sent) = (rpc.vote, tokio::time::Instant::now());
        let answer = self
            .send(rpc, |raft: Raft, rpc| async move {
                raft.append_entries(rpc).await
            })
            .await;
        // As the node's transport: every answer but a higher vote means
        // the peer held our vote after `sent`.
        if let Ok(a) = &answer {
            if !matches!(a, AppendEntriesResponse::HigherVote(_)) {
                self.accepted(vote, sent);
            }
        }
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        self.send(rpc, |raft: Raft, rpc| async move {
            raft.install_snapshot(rpc).await
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<NodeId>, RaftError<NodeId>> {
        self.send(rpc, |raft: Raft, rpc| async move { raft.vote(rpc).await })
            .await
    }
}
