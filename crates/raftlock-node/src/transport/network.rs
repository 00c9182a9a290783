//! Raft RPCs to peers: bincode bodies to each peer's internal routes, the
//! hot ones (appends, votes, calls to the leader) as frames on peer pipes
//! (`pipe`), the rest (and everything to a member without pipes) over
//! pooled HTTP/1.1 connections. A peer's address is, in order: the
//! config's `peer_overrides` (a harness puts a proxy on any link), the
//! config file's members (they founded the cluster), then the Raft
//! membership (members added at run time, which no file lists). Retries
//! are openraft's business; a call fails fast and says why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use raftlock_storage::DurableIndex;
use raftlock_tls::rustls;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::NodeConfig;
use crate::raft::typ::{LogId, Member, NodeId, TypeConfig};
use crate::sessions::quorum::QuorumClock;
use crate::transport::peer_guard::{PeerGuard, PeerState};
use crate::transport::pipe::client::{PipeError, Pipes};
use crate::transport::pipe::frame::Head;
use crate::transport::pipe::Kind;

/// Route of each RPC on the peer's internal listener.
pub(crate) mod route {
    pub const APPEND: &str = "/raft/append";
    pub const VOTE: &str = "/raft/vote";
    pub const SNAPSHOT: &str = "/raft/snapshot";
    /// Writes, keepalives and read indexes for the leader (`at_leader`).
    pub const LEADER: &str = "/internal/leader";
    pub const INITIALIZED: &str = "/internal/initialized";
    /// The member's data-directory identity (`peer_guard`, founding, adds).
    pub const IDENTITY: &str = "/internal/identity";
    /// The upgrade to a peer pipe (`pipe`), which then carries appends,
    /// votes and `LEADER` calls.
    pub const PIPE: &str = "/internal/pipe";
}

/// Why a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The request never reached the peer (connection refused, …).
    #[error("peer unreachable: {0}")]
    NotSent(String),
    /// Sent, but no valid answer came back: it may have been processed.
    #[error("no answer from peer: {0}")]
    NoAnswer(String),
}

/// HTTP client to peers, shared by all Raft connections and forwarding.
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    config: Arc<NodeConfig>,
    /// Fault injection: peers this node cannot reach (a partition in
    /// in-process tests; real deployments never set it).
    cut: Arc<RwLock<BTreeSet<NodeId>>>,
    /// Raft addresses of the members of the Raft membership, as this node
    /// last saw it: how members absent from the config file are reached.
    known: Arc<RwLock<BTreeMap<NodeId, String>>>,
    /// This member's identity, sent with every request (`peer_guard`).
    guard: Option<Arc<PeerGuard>>,
    /// `https` with `[tls]` (mutual TLS, see member_tls.rs), else `http`.
    scheme: &'static str,
    /// Parsed URL per (peer, route), with the address it was built from:
    /// an append is sent every few hundred microseconds under load, and
    /// parsing its URL each time was a measurable share of the call.
    urls: Arc<RwLock<UrlCache>>,
    /// Long-lived framed connections for the hot calls (`pipe`).
    pipes: Arc<Pipes>,
}

/// (peer, route) → (the address it was built from, the URL).
type UrlCache = HashMap<(NodeId, &'static str), (String, reqwest::Url)>;

impl PeerClient {
    /// `tls`: how to dial peers with `[tls]` (trust the cluster CA, show
    /// this member's certificate); `None` dials plain HTTP.
    pub fn new(config: Arc<NodeConfig>, tls: Option<rustls::ClientConfig>) -> Self {
        let builder = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_millis(500));
        let pipes = Arc::new(Pipes::new(tls.clone()));
        let (builder, scheme) = match tls {
            Some(tls) => (builder.tls_backend_preconfigured(tls), "https"),
            None => (builder, "http"),
        };
        // reqwest's fallback client below needs a default provider.
        raftlock_tls::install_default_provider();
        let http = builder.build().unwrap_or_default();
        PeerClient {
            http,
            config,
            scheme,
            cut: Arc::default(),
            known: Arc::default(),
            guard: None,
            urls: Arc::default(),
            pipes,
        }
    }

    /// Sends this member's identity with every request (`peer_guard`).
    pub(crate) fn with_guard(mut self, guard: Arc<PeerGuard>) -> Self {
        self.guard = Some(guard);
        self
    }

    /// Records the Raft addresses of the membership's members (see
    /// `replica::membership::follow_membership`); the config still wins for the members it
    /// lists.
    pub(crate) fn learn<'a>(&self, members: impl Iterator<Item = (&'a NodeId, &'a Member)>) {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        for (id, member) in members {
            known.insert(*id, member.raft_addr.clone());
        }
    }

    /// Records how `peer` answered a Raft request (`peer_guard::PeerState`).
    fn observe<T>(&self, peer: NodeId, answer: &Result<T, CallError>) {
        if let Some(guard) = &self.guard {
            guard.observe(
                peer,
                match answer {
                    Ok(_) => PeerState::Ok,
                    Err(CallError::NotSent(m) | CallError::NoAnswer(m)) => PeerState::of_failure(m),
                },
            );
        }
    }

    /// The address to dial for `peer`'s Raft routes.
    fn addr_of(&self, peer: NodeId) -> Option<String> {
        if let Some(addr) = self.config.raft_addr_of(peer) {
            return Some(addr.to_string());
        }
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        known.get(&peer).cloned()
    }

    /// `scheme://addr/route` for `peer`, parsed once per address.
    fn url_of(&self, peer: NodeId, route: &'static str) -> Result<reqwest::Url, CallError> {
        let addr = self.addr_of(peer).ok_or_else(|| {
            CallError::NotSent(format!(
                "node {peer} is neither configured nor a known member"
            ))
        })?;
        {
            let urls = self.urls.read().unwrap_or_else(|e| e.into_inner());
            if let Some((built_from, url)) = urls.get(&(peer, route)) {
                if *built_from == addr {
                    return Ok(url.clone());
                }
            }
        }
        let url = reqwest::Url::parse(&format!("{}://{addr}{route}", self.scheme))
            .map_err(|e| CallError::NotSent(format!("bad address {addr:?} of node {peer}: {e}")))?;
        let mut urls = self.urls.write().unwrap_or_else(|e| e.into_inner());
        urls.insert((peer, route), (addr, url.clone()));
        Ok(url)
    }

    #[cfg(feature = "fault-injection")]
    /// Fault injection: cut (or restore) this node's links to `peers`.
    pub(crate) fn cut_links(&self, peers: &[NodeId], cut: bool) {
        let mut set = self.cut.write().unwrap_or_else(|e| e.into_inner());
        for peer in peers {
            if cut {
                set.insert(*peer);
            } else {
                set.remove(peer);
            }
        }
    }

    /// POSTs `body` (bincode) to `peer`'s `route` and decodes the answer.
    pub(crate) async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        peer: NodeId,
        route: &'static str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        self.call_to(peer, 0, route, body, timeout).await
    }

    /// [`Self::call`] to a peer whose membership entry names
    /// `incarnation` (0: not known); the peer refuses it if it is another
    /// incarnation (`peer_guard`).
    pub(crate) async fn call_to<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        peer: NodeId,
        incarnation: u64,
        route: &'static str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        if self
            .cut
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&peer)
        {
            return Err(CallError::NotSent(format!("link to node {peer} is cut")));
        }
        if let Some(kind) = Kind::of_route(route) {
            let addr = self.addr_of(peer).ok_or_else(|| {
                CallError::NotSent(format!(
                    "node {peer} is neither configured nor a known member"
                ))
            })?;
            let head = Head {
                kind,
                claims: self.guard.as_ref().map(|g| g.claims(incarnation)),
            };
            match self.pipes.call(peer, &addr, &head, body, timeout).await {
                Err(PipeError::Unsupported) => {} // an older member: HTTP
                Err(PipeError::Call(e)) => return Err(e),
                Ok(answer) => return Ok(answer),
            }
        }
        let url = self.url_of(peer, route)?;
        let bytes = bincode::serialize(body).map_err(|e| CallError::NotSent(e.to_string()))?;
        let mut request = self.http.post(url);
        if let Some(guard) = &self.guard {
            request = request.headers(guard.outgoing(incarnation));
        }
        let response = request
            .timeout(timeout)
            .body(bytes)
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    CallError::NotSent(e.to_string())
                } else {
                    CallError::NoAnswer(e.to_string())
                }
            })?;
        if response.status() == reqwest::StatusCode::CONFLICT {
            // The peer's identity check refused it before doing anything.
            let why = response.text().await.unwrap_or_default();
            return Err(CallError::NotSent(format!("refused by node {peer}: {why}")));
        }
        if !response.status().is_success() {
            return Err(CallError::NoAnswer(format!("HTTP {}", response.status())));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CallError::NoAnswer(e.to_string()))?;
        bincode::deserialize(&bytes).map_err(|e| CallError::NoAnswer(format!("bad answer: {e}")))
    }
}

/// Hands openraft one connection object per peer.
#[derive(Clone)]
pub struct Network {
    pub(crate) client: PeerClient,
    /// This node's durable log prefix: the commit index it sends must be
    /// covered (see [`raftlock_storage::DurableIndex`]).
    pub(crate) durable: DurableIndex,
    /// Where accepted appends are recorded (leadership confirmation).
    pub(crate) quorum: Arc<QuorumClock>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> PeerConnection {
        // A leader replicates to a member it just added before its metrics
        // (and so `follow_membership`) show it.
        self.client.learn(std::iter::once((&target, node)));
        PeerConnection {
            client: self.client.clone(),
            target,
            incarnation: node.incarnation,
            durable: self.durable.clone(),
            quorum: self.quorum.clone(),
        }
    }
}

/// openraft's handle for one peer.
pub struct PeerConnection {
    client: PeerClient,
    target: NodeId,
    /// The target's incarnation as the membership names it.
    incarnation: u64,
    durable: DurableIndex,
    quorum: Arc<QuorumClock>,
}

impl PeerConnection {
    async fn rpc<Req, Resp, E>(
        &self,
        route: &'static str,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, Member, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let answer: Result<Result<Resp, RaftError<NodeId, E>>, CallError> = self
            .client
            .call_to(
                self.target,
                self.incarnation,
                route,
                request,
                option.hard_ttl(),
            )
            .await;
        self.client.observe(self.target, &answer);
        let answer = answer.map_err(|e| match e {
            CallError::NotSent(m) => {
                RPCError::Unreachable(Unreachable::new(&std::io::Error::other(m)))
            }
            CallError::NoAnswer(m) => {
                RPCError::Network(NetworkError::new(&std::io::Error::other(m)))
            }
        })?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// Longest an append waits for this node's disk to cover the commit index
/// it carries before sending a lower one (a sync takes well under 1 ms on a
/// healthy disk).
const COMMIT_DURABLE_WAIT: Duration = Duration::from_millis(20);

/// The commit index `rpc` may carry when this node's log is durable up to
/// `durable`: the leader's own, or else the greatest log id in the request
/// (its entries, or the entry before them) that is both committed and
/// durable, or none. A lower commit index is always a valid message: a
/// follower only ever moves its own forward.
fn durable_commit(rpc: &AppendEntriesRequest<TypeConfig>, durable: u64) -> Option<LogId> {
    let committed = rpc.leader_commit?;
    if committed.index <= durable {
        return Some(committed);
    }
    // Below the commit index here, so any of these is committed.
    rpc.entries
        .iter()
        .map(|e| e.log_id)
        .chain(rpc.prev_log_id)
        .filter(|id| id.index <= durable)
        .max_by_key(|id| id.index)
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        // openraft counts the leader's own log as persisted once written
        // (deferred durability), so its commit index can run ahead of what
        // is on a majority's disks. Followers apply what it says, so it goes
        // out only as far as this node's disk covers. A commit is normally
        // one sync ahead: wait that long, so followers learn it now rather
        // than with the next request; a stalled disk must not hold back
        // heartbeats, so after the wait the index is lowered instead.
        if let Some(committed) = &rpc.leader_commit {
            let wait = COMMIT_DURABLE_WAIT.min(option.hard_ttl() / 2);
            let _ = tokio::time::timeout(wait, self.durable.wait_for(committed.index)).await;
        }
        let durable = self
            .durable
            .current()
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        rpc.leader_commit = durable_commit(&rpc, durable);
        let vote = rpc.vote;
        let sent = tokio::time::Instant::now();
        let answer: AppendEntriesResponse<NodeId> = self.rpc(route::APPEND, &rpc, &option).await?;
        // Every answer but a higher vote means the peer held our vote after
        // `sent` (a conflict is about the log, not the leadership).
        if !matches!(answer, AppendEntriesResponse::HigherVote(_)) {
            self.quorum.record(self.target, vote, sent);
        }
        Ok(answer)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Member, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.rpc(route::SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        self.rpc(route::VOTE, &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Entry, EntryPayload, Vote};

    use super::*;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn request(
        prev: Option<LogId>,
        entries: &[LogId],
        commit: Option<LogId>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: prev,
            entries: entries
                .iter()
                .map(|&log_id| Entry {
                    log_id,
                    payload: EntryPayload::Blank,
                })
                .collect(),
            leader_commit: commit,
        }
    }

    /// The URL is parsed once per peer and route, and built again when
    /// the peer's address changes (a member re-added at another address).
    #[test]
    fn peer_urls_are_cached_until_the_address_changes() {
        let mut members = BTreeMap::new();
        members.insert(1, Member::new("127.0.0.1:1", "127.0.0.1:2"));
        let config = NodeConfig {
            id: 1,
            members,
            data_dir: std::path::PathBuf::from("unused"),
            settings: crate::config::ClusterSettings::default(),
            peer_overrides: BTreeMap::new(),
            tls: None,
        };
        let client = PeerClient::new(Arc::new(config), None);
        let url = |peer| {
            client
                .url_of(peer, route::APPEND)
                .map(|u| u.to_string())
                .ok()
        };
        // Node 7 is in no config: reached at the address the membership gave.
        assert_eq!(url(7), None);
        let m = Member::new("127.0.0.1:3", "127.0.0.1:4");
        client.learn(std::iter::once((&7, &m)));
        assert_eq!(url(7).as_deref(), Some("http://127.0.0.1:4/raft/append"));
        assert_eq!(url(7).as_deref(), Some("http://127.0.0.1:4/raft/append"));
        let moved = Member::new("127.0.0.1:3", "127.0.0.1:5");
        client.learn(std::iter::once((&7, &moved)));
        assert_eq!(url(7).as_deref(), Some("http://127.0.0.1:5/raft/append"));
        assert_eq!(url(1).as_deref(), Some("http://127.0.0.1:2/raft/append"));
    }

    #[test]
    fn the_commit_index_sent_never_passes_the_durable_log() {
        let rpc = request(Some(id(1, 4)), &[id(2, 5), id(2, 6)], Some(id(2, 6)));
        assert_eq!(
            durable_commit(&rpc, 9),
            Some(id(2, 6)),
            "durable: unchanged"
        );
        assert_eq!(durable_commit(&rpc, 5), Some(id(2, 5)));
        assert_eq!(durable_commit(&rpc, 4), Some(id(1, 4)), "the entry before");
        assert_eq!(durable_commit(&rpc, 3), None, "nothing known to name");
        let heartbeat = request(Some(id(2, 6)), &[], Some(id(2, 8)));
        assert_eq!(durable_commit(&heartbeat, 7), Some(id(2, 6)));
        assert_eq!(durable_commit(&request(None, &[], None), 0), None);
    }
}
