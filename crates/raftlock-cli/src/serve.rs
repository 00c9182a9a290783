//! `raftlock serve`: one member, until SIGINT or SIGTERM.

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use raftlock_node::{Node, NodeConfig, NodeId};
use raftlock_server::ApiConfig;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Args)]
pub struct ServeArgs {
    /// Cluster config file listing every member (see cluster-config/).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// This member's id in the config.
    #[arg(long)]
    id: NodeId,
    /// Dial a peer's Raft port at another address, e.g. through a proxy
    /// (repeatable): --peer 2=127.0.0.1:9102
    #[arg(long = "peer", value_name = "ID=ADDR", value_parser = parse_peer)]
    peers: Vec<(NodeId, String)>,
}

fn parse_peer(text: &str) -> Result<(NodeId, String), String> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ID=ADDR"))?;
    let id = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    addr.parse::<std::net::SocketAddr>()
        .map_err(|_| format!("{addr:?} is not an ip:port address"))?;
    Ok((id, addr.to_string()))
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    crate::init_logging("info,openraft=warn");
    let mut config = NodeConfig::from_cluster_file(&args.config, args.id)?;
    config.peer_overrides.extend(args.peers);
    let api_addr = config.me().api_addr.clone();
    // Bind the API first: a port conflict should fail before Raft starts.
    let api = TcpListener::bind(&api_addr)
        .await
        .with_context(|| format!("cannot listen on api_addr {api_addr}"))?;
    let data_dir = config.data_dir.clone();
    let node = Node::start(config).await?;
    tracing::info!(
        id = args.id,
        api = %api_addr,
        raft = %node.raft_addr(),
        data = %crate::display_path(&data_dir).display(),
        "raftlock member serving"
    );
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    };
    let served = raftlock_server::serve(node.clone(), api, ApiConfig::default(), shutdown).await;
    node.shutdown().await;
    served.map_err(|e| anyhow!("API server failed: {e}"))
}
