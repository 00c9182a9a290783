//! `raftlock serve`: one member, until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::Args;
use raftlock_node::{DoorAddrs, Node, NodeConfig, NodeId, TlsSettings};
use raftlock_server::ApiConfig;
use raftlock_zookeeper::door::{Door, DoorConfig};
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
    let api_config = load_api_config(&args.config)?;
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
    let zookeeper = zookeeper_listener(&args.config, args.id).await?;
    let etcd = etcd_listener(&args.config, args.id).await?;
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
    let _door = match zookeeper {
        Some((listener, addrs)) => {
            let door = zookeeper_door(&node, listener, &api_config, tls.as_ref())?;
            tracing::info!(client_addr = %addrs.client_addr, bind = %door.local_addr(),
                tls = tls.is_some(), tokens = api_config.auth.enabled(),
                "ZooKeeper door serving (docs/zookeeper.md)");
            Some(door)
        }
        None => None,
    };
    let _etcd_door = match etcd {
        Some((listener, addrs, all)) => {
            let door = match tls.as_ref() {
                Some(tls) => {
                    let server = raftlock_tls::api_server_config(tls)?;
                    raftlock_etcd::Door::start_tls(
                        node.clone(),
                        listener,
                        all,
                        server,
                        &api_config.auth,
                    )?
                }
                None => raftlock_etcd::Door::start(node.clone(), listener, all, &api_config.auth)?,
            };
            tracing::info!(client_addr = %addrs.client_addr, bind = %door.local_addr(),
                tls = tls.is_some(), tokens = api_config.auth.enabled(),
                "etcd door serving (docs/etcd.md)");
            Some(door)
        }
        None => None,
    };
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

/// This member's ZooKeeper door listener, if the cluster file gives it
/// one (`zookeeper = { client_addr = ... }` in its `[[members]]` entry).
async fn zookeeper_listener(
    path: &Path,
    id: NodeId,
) -> anyhow::Result<Option<(TcpListener, DoorAddrs)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let Some(addrs) = raftlock_node::door_addrs(&text, "zookeeper", id)
        .map_err(|e| anyhow!("config {}: {e}", path.display()))?
    else {
        return Ok(None);
    };
    let listener = TcpListener::bind(addrs.bind_addr())
        .await
        .with_context(|| format!("cannot listen on zookeeper bind {}", addrs.bind_addr()))?;
    Ok(Some((listener, addrs)))
}

/// Every member's etcd client address, by member id, and this member's
/// etcd door listener, if the cluster file gives it one (`etcd = {
/// client_addr = ... }` in its `[[members]]` entry). With `[tls]` the
/// door serves TLS with the API's certificate and client policy.
async fn etcd_listener(
    path: &Path,
    id: NodeId,
) -> anyhow::Result<Option<(TcpListener, DoorAddrs, Vec<(u64, String)>)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let all = raftlock_node::all_door_addrs(&text, "etcd")
        .map_err(|e| anyhow!("config {}: {e}", path.display()))?;
    let Some(addrs) = all.iter().find(|(m, _)| *m == id).map(|(_, a)| a.clone()) else {
        return Ok(None);
    };
    let listener = TcpListener::bind(addrs.bind_addr())
        .await
        .with_context(|| format!("cannot listen on etcd bind {}", addrs.bind_addr()))?;
    let clients = all.into_iter().map(|(m, a)| (m, a.client_addr)).collect();
    Ok(Some((listener, addrs, clients)))
}

/// The door with the API's tokens, and TLS when the cluster has `[tls]`
/// (the same certificate and client policy as the HTTP API).
fn zookeeper_door(
    node: &Node,
    listener: TcpListener,
    api: &ApiConfig,
    tls: Option<&TlsSettings>,
) -> anyhow::Result<Door> {
    let config = DoorConfig {
        auth: api.auth.clone(),
        ..DoorConfig::default()
    };
    Ok(match tls {
        Some(tls) => {
            let server = raftlock_tls::api_server_config(tls)?;
            Door::spawn_tls(node.clone(), listener, config, server)?
        }
        None => Door::spawn(node.clone(), listener, config)?,
    })
}

/// The `[api]` table of the cluster file (every key optional).
fn load_api_config(path: &Path) -> anyhow::Result<ApiConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    ApiConfig::from_cluster_toml(&text).with_context(|| format!("config {}", path.display()))
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
