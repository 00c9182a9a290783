//! raftlock's etcd v3 front door: etcd's gRPC services over a raftlock
//! node (docs/etcd.md, ADR 0027). The door owns the gRPC framing, the
//! watch streams and the error mapping; every key lives in the node's
//! replicated key space (core `kv/`), every lease is a raftlock session,
//! and every call goes through the node's typed operations.
//!
//! - `kv`: Range, Put, DeleteRange, Txn, Compact; `convert`: the
//!   messages to and from the key space's types;
//! - `watch`: the Watch stream; `lease`: Grant, Revoke, KeepAlive,
//!   TimeToLive, Leases; `lock`: the v3lock service; `election`: the
//!   v3election service; `turn`: the queue both wait in;
//! - `maintenance`: Status and MemberList;
//! - `auth`: Authenticate over the cluster's bearer tokens, and the
//!   grants every call is checked against (ADR 0029);
//! - `errors`: raftlock errors as etcd's;
//! - [`member`]: a member's door bound and started from the cluster file.
//!
//! Methods not listed answer UNIMPLEMENTED (generated default stubs).

mod auth;
mod convert;
mod election;
mod errors;
mod kv;
mod lease;
mod lock;
mod maintenance;
pub mod member;
mod tls;
mod turn;
mod watch;

use std::net::SocketAddr;

use raftlock_api::auth::AuthConfig;
use raftlock_node::{Consistency, Node};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// etcd's generated messages and service traits.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    /// `mvccpb`: key-values and events.
    pub mod mvccpb {
        tonic::include_proto!("mvccpb");
    }
    /// `authpb`: users and roles (only referenced by messages here).
    pub mod authpb {
        tonic::include_proto!("authpb");
    }
    /// `etcdserverpb`: the KV, Watch, Lease, Cluster and Maintenance services.
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
    /// `v3lockpb`: the Lock service.
    pub mod v3lockpb {
        tonic::include_proto!("v3lockpb");
    }
    /// `v3electionpb`: the Election service.
    pub mod v3electionpb {
        tonic::include_proto!("v3electionpb");
    }
}

/// etcd's default request size limit (`--max-request-bytes`, 1.5 MiB),
/// plus room for the message's framing.
pub const MAX_REQUEST_BYTES: usize = 1536 * 1024 + 4096;

/// The services' shared handle: the node, and what headers and member
/// lists say about the cluster.
#[derive(Clone)]
pub(crate) struct Etcd {
    node: Node,
    /// Every member's etcd client address, by member id (MemberList).
    client_addrs: Vec<(u64, String)>,
    /// `http`, or `https` when the door serves TLS (MemberList's URLs).
    scheme: &'static str,
    /// The cluster's bearer tokens; none: every call is allowed.
    tokens: auth::Tokens,
}

impl Etcd {
    /// etcd's response header at state revision `revision`.
    fn header(&self, revision: u64) -> pb::etcdserverpb::ResponseHeader {
        pb::etcdserverpb::ResponseHeader {
            cluster_id: self.node.identity().cluster_id.unwrap_or(0),
            member_id: self.node.id(),
            revision: i64::try_from(revision).unwrap_or(i64::MAX),
            raft_term: self.node.status().term,
        }
    }

    /// This member's state revision, for answers that do not read one.
    async fn revision(&self) -> u64 {
        self.node.revision(Consistency::Stale).await.unwrap_or(0)
    }
}

/// A running door; dropping it does not stop it ([`Door::stop`] does).
pub struct Door {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Door {
    /// Serves etcd's gRPC API for `node` on `listener`, in the clear.
    /// `client_addrs` are every member's etcd client addresses, for
    /// MemberList; `auth` the cluster's bearer tokens (with none, every
    /// call is allowed).
    pub fn start(
        node: Node,
        listener: TcpListener,
        client_addrs: Vec<(u64, String)>,
        auth: &AuthConfig,
    ) -> std::io::Result<Door> {
        let addr = listener.local_addr()?;
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        Ok(Self::serve(
            node,
            addr,
            incoming,
            client_addrs,
            "http",
            auth,
        ))
    }

    /// As [`start`](Self::start), over TLS with `server` (the API's
    /// certificate and client policy, from `[tls]`); the door offers
    /// HTTP/2 by ALPN, as gRPC clients ask.
    pub fn start_tls(
        node: Node,
        listener: TcpListener,
        client_addrs: Vec<(u64, String)>,
        server: std::sync::Arc<rustls::ServerConfig>,
        auth: &AuthConfig,
    ) -> std::io::Result<Door> {
        let addr = listener.local_addr()?;
        let incoming = tls::incoming(listener, server)?;
        Ok(Self::serve(
            node,
            addr,
            incoming,
            client_addrs,
            "https",
            auth,
        ))
    }

    fn serve<S, IO>(
        node: Node,
        addr: SocketAddr,
        incoming: S,
        client_addrs: Vec<(u64, String)>,
        scheme: &'static str,
        auth: &AuthConfig,
    ) -> Door
    where
        S: futures::Stream<Item = std::io::Result<IO>> + Send + 'static,
        IO: tokio::io::AsyncRead
            + tokio::io::AsyncWrite
            + tonic::transport::server::Connected
            + Unpin
            + Send
            + 'static,
    {
        use pb::etcdserverpb::{
            auth_server::AuthServer, cluster_server::ClusterServer, kv_server::KvServer,
            lease_server::LeaseServer, maintenance_server::MaintenanceServer,
            watch_server::WatchServer,
        };
        use pb::v3electionpb::election_server::ElectionServer;
        use pb::v3lockpb::lock_server::LockServer;
        let etcd = Etcd {
            node: node.clone(),
            client_addrs,
            scheme,
            tokens: auth::Tokens::new(auth),
        };
        let router = tonic::transport::Server::builder()
            .add_service(KvServer::new(etcd.clone()).max_decoding_message_size(MAX_REQUEST_BYTES))
            .add_service(WatchServer::new(etcd.clone()))
            .add_service(LeaseServer::new(etcd.clone()))
            .add_service(ClusterServer::new(etcd.clone()))
            .add_service(MaintenanceServer::new(etcd.clone()))
            .add_service(LockServer::new(etcd.clone()))
            .add_service(ElectionServer::new(etcd.clone()))
            .add_service(AuthServer::new(etcd));
        let task = tokio::spawn(async move {
            let stopped = async move { node.stopped().await };
            if let Err(e) = router.serve_with_incoming_shutdown(incoming, stopped).await {
                tracing::warn!(error = %e, "etcd door stopped");
            }
        });
        Door { addr, task }
    }

    /// Where the door listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(self) {
        self.task.abort();
    }
}
