//! `raftlock-jepsen member`: one real cluster member whose lock clients
//! live inside its process, as in an application that embeds raftlock.
//!
//! The process runs what `raftlock serve` runs (a [`raftlock_node::Node`]
//! on its own sled data directory, with the public HTTP API on its
//! `api_addr`, so health checks, final reads and other members' clients
//! work as usual) plus a **control endpoint** on `--control`. The harness
//! sends each client operation of the embedded-client mode to the control
//! endpoint of the client's member, which performs it with
//! [`raftlock_client::EmbeddedClient`] over the in-process node: no HTTP
//! hop between the client and its node, and the client can only ever use
//! that node, as an embedded application does. See [`control`] for the
//! routes. The same endpoint takes the disk faults ([`fault`]), which is
//! why runs with a disk nemesis use member processes even when their
//! clients talk HTTP.
//!
//! The member also serves the ZooKeeper and etcd doors its `[[members]]`
//! entry gives it, as `raftlock serve` does
//! (`raftlock_zookeeper::door::member`, `raftlock_etcd::member`): the
//! `zk-mutex` and `etcd-mutex` workloads run on member processes when a
//! disk nemesis needs them.
//!
//! With `--join` the member joins a running cluster exactly as `raftlock
//! serve --join` does ([`raftlock_node::Node::join_with_listener`], then
//! [`raftlock_node::join::ask_to_join`]): the `membership` nemesis adds
//! members this way in runs with member processes, so a member added (or
//! re-added with an empty disk) carries the fault hooks like the others.
//!
//! Real processes, real sockets, real files: the harness kills, pauses and
//! restarts a member like a `raftlock serve` process, and its embedded
//! clients die, freeze and come back with it.

pub mod control;
pub mod fault;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use raftlock_node::{Member, Node, NodeConfig, NodeId};
use raftlock_server::ApiConfig;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// What `raftlock-jepsen member` needs: the same as `raftlock serve`, plus
/// the control endpoint's address.
#[derive(Debug, Clone, clap::Args)]
pub struct MemberArgs {
    /// Cluster config file listing every member.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// This member's id in the config.
    #[arg(long)]
    pub id: NodeId,
    /// Dial a peer's Raft port at another address (repeatable), e.g. the
    /// harness's link proxy: --peer 2=127.0.0.1:9102
    #[arg(long = "peer", value_name = "ID=ADDR", value_parser = parse_peer)]
    pub peers: Vec<(NodeId, String)>,
    /// Where the harness sends the embedded clients' operations and the
    /// disk faults.
    #[arg(long, value_name = "ADDR")]
    pub control: SocketAddr,
    /// Join a running cluster through these API endpoints (comma-separated)
    /// instead of founding one, as `raftlock serve --join` does: this
    /// member never bootstraps, and asks the cluster to add it (learner,
    /// then voter once caught up). Harmless on a restart (a voter does not
    /// ask again). The config file then only says where the cluster is.
    #[arg(long, value_name = "ENDPOINTS", value_delimiter = ',')]
    pub join: Vec<String>,
    /// This member's client API address, when the config does not list it
    /// (with --join).
    #[arg(long, value_name = "HOST:PORT", requires = "raft_addr")]
    pub api_addr: Option<String>,
    /// This member's Raft address, when the config does not list it.
    #[arg(long, value_name = "HOST:PORT", requires = "api_addr")]
    pub raft_addr: Option<String>,
}

/// `ID=ADDR`, as `raftlock serve --peer` takes it.
fn parse_peer(text: &str) -> Result<(NodeId, String), String> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ID=ADDR"))?;
    let id = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    addr.parse::<SocketAddr>()
        .map_err(|_| format!("{addr:?} is not an ip:port address"))?;
    Ok((id, addr.to_string()))
}

/// How long the join request may take: the leader gives a learner about
/// a minute to catch up before it answers.
const JOIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the member until SIGTERM or SIGINT. With `--join`, it starts as
/// `raftlock serve --join` does ([`Node::join_with_listener`], then
/// [`raftlock_node::join::ask_to_join`]) and serves once it votes.
pub async fn run(args: MemberArgs) -> anyhow::Result<()> {
    init_logging();
    let joining = !args.join.is_empty();
    let (mut config, binds) = match (&args.api_addr, &args.raft_addr) {
        (Some(api_addr), Some(raft_addr)) => {
            let me = Member {
                api_addr: api_addr.clone(),
                raft_addr: raft_addr.clone(),
                incarnation: 0,
            };
            NodeConfig::from_cluster_file_joining(&args.config, args.id, Some(me))?
        }
        _ if joining => NodeConfig::from_cluster_file_joining(&args.config, args.id, None)?,
        _ => NodeConfig::from_cluster_file_with_binds(&args.config, args.id)?,
    };
    config.peer_overrides.extend(args.peers);
    let api_addr = config.me().api_addr.clone();
    let tls = config.tls.clone();
    let cluster_toml = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read config {}", args.config.display()))?;
    let api_config = ApiConfig::from_cluster_toml(&cluster_toml)
        .with_context(|| format!("config {}", args.config.display()))?;
    // Bind every listener first: a port conflict fails before Raft starts.
    let api = TcpListener::bind(&binds.api)
        .await
        .with_context(|| format!("cannot listen on api_addr {}", binds.api))?;
    let raft = TcpListener::bind(&binds.raft)
        .await
        .with_context(|| format!("cannot listen on raft_addr {}", binds.raft))?;
    let control = TcpListener::bind(args.control)
        .await
        .with_context(|| format!("cannot listen on the control address {}", args.control))?;
    // The doors the cluster file gives this member, as `raftlock serve`
    // serves them: zk-mutex and etcd-mutex runs with disk faults use
    // member processes.
    let zookeeper = raftlock_zookeeper::door::member::MemberDoor::bind(&cluster_toml, args.id)
        .await
        .with_context(|| format!("config {}", args.config.display()))?;
    let etcd = raftlock_etcd::member::MemberDoor::bind(&cluster_toml, args.id)
        .await
        .with_context(|| format!("config {}", args.config.display()))?;
    let node = if joining {
        let node = Node::join_with_listener(config, raft).await?;
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let http = reqwest::Client::builder()
            .timeout(JOIN_REQUEST_TIMEOUT)
            .build()
            .context("building the HTTP client for the join request")?;
        if let Err(e) = raftlock_node::join::ask_to_join(&node, &http, &args.join).await {
            node.shutdown().await;
            return Err(e.into());
        }
        node
    } else {
        Node::start_with_listener(config, raft).await?
    };
    let _zookeeper_door = zookeeper
        .map(|door| door.start(&node, &api_config.auth, tls.as_ref()))
        .transpose()?;
    let _etcd_door = etcd
        .map(|door| door.start(&node, &api_config.auth, tls.as_ref()))
        .transpose()?;
    tracing::info!(id = args.id, api = %api_addr, control = %args.control, joined = joining, "jepsen member serving");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let api_task = tokio::spawn(raftlock_server::serve(
        node.clone(),
        api,
        api_config,
        stopped(stop_rx.clone()),
    ));
    let control_app = control::router(node.clone()).merge(fault::router(node.clone()));
    let control_task = tokio::spawn(async move {
        axum::serve(control, control_app)
            .with_graceful_shutdown(stopped(stop_rx))
            .await
    });

    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    stop_tx.send_replace(true);
    let api_result = api_task.await;
    let _ = control_task.await;
    node.shutdown().await;
    match api_result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(anyhow!("API server failed: {e}")),
        Err(e) => Err(anyhow!("API server task failed: {e}")),
    }
}

/// Logs to stderr (the harness appends it to `node-N.log`); `RUST_LOG`
/// overrides the level, as for `raftlock serve`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
