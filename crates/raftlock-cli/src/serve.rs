//! `raftlock serve`: one member, until SIGINT or SIGTERM.

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use raftlock_node::{Node, NodeConfig, NodeId, TlsSettings};
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
    /// Join a running cluster through these API endpoints (comma-separated)
    /// instead of founding one: this member never bootstraps, and asks the
    /// cluster to add it (learner, then voter once caught up). Harmless on
    /// a restart. The config file then only says where the cluster is.
    #[arg(long, value_name = "ENDPOINTS", value_delimiter = ',')]
    join: Vec<String>,
    /// This member's client API address, when the config does not list it
    /// (with --join).
    #[arg(long, value_name = "HOST:PORT", requires = "raft_addr")]
    api_addr: Option<String>,
    /// This member's Raft address, when the config does not list it.
    #[arg(long, value_name = "HOST:PORT", requires = "api_addr")]
    raft_addr: Option<String>,
    /// With --join on a cluster with tokens: an admin token, to ask for
    /// this member to be added.
    #[command(flatten)]
    token: crate::token::TokenArgs,
}

fn parse_peer(text: &str) -> Result<(NodeId, String), String> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ID=ADDR"))?;
    let id = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    raftlock_node::check_address(addr)?;
    Ok((id, addr.to_string()))
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    crate::init_logging("info,openraft=warn");
    let joining = !args.join.is_empty();
    let (mut config, binds) = match (&args.api_addr, &args.raft_addr) {
        (Some(api_addr), Some(raft_addr)) => {
            let me = raftlock_node::Member {
                api_addr: api_addr.clone(),
                raft_addr: raft_addr.clone(),
                incarnation: 0,
            };
            NodeConfig::from_cluster_file_joining(&args.config, args.id, Some(me))?
        }
        _ if joining => NodeConfig::from_cluster_file_joining(&args.config, args.id, None)?,
        _ => NodeConfig::from_cluster_file_with_binds(&args.config, args.id)?,
    };
    let cluster_toml = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read config {}", args.config.display()))?;
    let api_config = ApiConfig::from_cluster_toml(&cluster_toml)
        .with_context(|| format!("config {}", args.config.display()))?;
    config.peer_overrides.extend(args.peers);
    let api_addr = config.me().api_addr.clone();
    // Bind the API first: a port conflict should fail before Raft starts.
    // Names (`localhost:7001`) resolve here; tokio binds the first
    // resolved address that works.
    let api = TcpListener::bind(&binds.api)
        .await
        .with_context(|| format!("cannot listen on api_bind {}", binds.api))?;
    let raft = TcpListener::bind(&binds.raft)
        .await
        .with_context(|| format!("cannot listen on raft_bind {}", binds.raft))?;
    let zookeeper = raftlock_zookeeper::door::member::MemberDoor::bind(&cluster_toml, args.id)
        .await
        .with_context(|| format!("config {}", args.config.display()))?;
    let etcd = raftlock_etcd::member::MemberDoor::bind(&cluster_toml, args.id)
        .await
        .with_context(|| format!("config {}", args.config.display()))?;
    let data_dir = config.data_dir.clone();
    let tls = config.tls.clone();
    let node = if joining {
        Node::join_with_listener(config, raft).await?
    } else {
        Node::start_with_listener(config, raft).await?
    };
    if joining {
        join(&node, &args.join, tls.as_ref(), &args.token).await?;
    }
    let _zookeeper_door = zookeeper
        .map(|door| door.start(&node, &api_config.auth, tls.as_ref()))
        .transpose()?;
    let _etcd_door = etcd
        .map(|door| door.start(&node, &api_config.auth, tls.as_ref()))
        .transpose()?;
    tracing::info!(
        id = args.id,
        api = %api_addr,
        api_bind = %binds.api,
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
    let served = raftlock_server::serve(node.clone(), api, api_config, shutdown).await;
    node.shutdown().await;
    served.map_err(|e| anyhow!("API server failed: {e}"))
}

/// Asks the cluster at `endpoints` to add this member, unless it already
/// votes (a restart): [`raftlock_node::join::ask_to_join`], over an HTTP
/// client with this member's TLS settings and the admin token.
async fn join(
    node: &Node,
    endpoints: &[String],
    tls: Option<&TlsSettings>,
    token: &crate::token::TokenArgs,
) -> anyhow::Result<()> {
    let mut http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .default_headers(token.headers()?);
    // With `[tls]`, the cluster's API is HTTPS and may want a client
    // certificate: this member's own does (the same CA signed it).
    let endpoints: Vec<String> = match tls {
        Some(tls) => {
            http = http.tls_backend_preconfigured(raftlock_tls::member_client_config(tls)?);
            let tls_flags = crate::client_tls::ClientTls {
                cacert: Some(tls.ca.clone()),
                ..Default::default()
            };
            endpoints.iter().map(|e| tls_flags.url(e)).collect()
        }
        None => endpoints.to_vec(),
    };
    let http = http.build()?;
    raftlock_node::join::ask_to_join(node, &http, &endpoints).await?;
    Ok(())
}
