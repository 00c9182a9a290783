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
//! Real processes, real sockets, real files: the harness kills, pauses and
//! restarts a member like a `raftlock serve` process, and its embedded
//! clients die, freeze and come back with it.

pub mod control;
pub mod fault;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Context as _};
use raftlock_node::{Node, NodeConfig, NodeId};
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
    /// Where the harness sends the embedded clients' operations.
    #[arg(long, value_name = "ADDR")]
    pub control: SocketAddr,
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

/// Runs the member until SIGTERM or SIGINT.
pub async fn run(args: MemberArgs) -> anyhow::Result<()> {
    init_logging();
    let mut config = NodeConfig::from_cluster_file(&args.config, args.id)?;
    config.peer_overrides.extend(args.peers);
    let api_addr = config.me().api_addr.clone();
    // Bind both listeners first: a port conflict fails before Raft starts.
    let api = TcpListener::bind(&api_addr)
        .await
        .with_context(|| format!("cannot listen on api_addr {api_addr}"))?;
    let control = TcpListener::bind(args.control)
        .await
        .with_context(|| format!("cannot listen on the control address {}", args.control))?;
    let node = Node::start(config).await?;
    tracing::info!(id = args.id, api = %api_addr, control = %args.control, "jepsen member serving");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let api_task = tokio::spawn(raftlock_server::serve(
        node.clone(),
        api,
        ApiConfig::default(),
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
