//! Three raftlock nodes inside this one process (port-0 listeners, a
//! temporary data directory), a lock taken through the in-process client,
//! then a clean shutdown.
//!
//! Run: `cargo run -p raftlock-client --example embedded`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use raftlock_client::{EmbeddedClient, LockClient, Mutex, Session};
use raftlock_node::{ClusterSettings, Member, Node, NodeConfig};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;

    // Let the OS pick the Raft ports, then write them into the config.
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let raft_addr = listener.local_addr()?.to_string();
        // No HTTP API in this example: the clients are in-process.
        let api_addr = "127.0.0.1:1".to_string();
        members.insert(
            id,
            Member {
                api_addr,
                raft_addr,
                incarnation: 0,
            },
        );
        listeners.push(listener);
    }
    let starts: Vec<_> = (1..=3u64)
        .zip(listeners)
        .map(|(id, listener)| {
            let config = NodeConfig {
                id,
                members: members.clone(),
                data_dir: dir.path().join(format!("node-{id}")),
                settings: ClusterSettings::default(),
                peer_overrides: BTreeMap::new(),
                tls: None,
            };
            // Started together: the founder asks its peers before it
            // initializes the cluster.
            tokio::spawn(Node::start_with_listener(config, listener))
        })
        .collect();
    let mut nodes = Vec::new();
    for start in starts {
        nodes.push(start.await??);
    }
    let leader = nodes[0].wait_for_leader(Duration::from_secs(10)).await?;
    println!("cluster of 3 up, leader is node {leader}");

    // Lock through node 2: a follower or the leader, it does not matter.
    let client: Arc<dyn LockClient> = Arc::new(EmbeddedClient::new(nodes[1].clone()));
    let session = Session::open(client, "embedded-example", Duration::from_secs(10)).await?;
    let guard = Mutex::new(&session, "examples/embedded").lock().await?;
    println!(
        "locked {} as {} with fencing token {}",
        guard.name(),
        guard.node(),
        guard.fencing_token()
    );
    guard.unlock().await?;
    session.close().await?;

    for node in &nodes {
        node.shutdown().await;
    }
    println!("released, session closed, nodes stopped");
    Ok(())
}
