//! An application that is itself a member of its lock cluster: it starts
//! its member from the same cluster file `raftlock serve` reads, then
//! takes a lock through the in-process client.
//!
//! Run: `cargo run -p raftlock-client --example embedded -- [CLUSTER_FILE] [ID]`
//! (default: `cluster-config/single.toml`, member 1, a one-member cluster).
//! As a member of a three-member file it needs a quorum up: the other
//! members run `raftlock serve` (or are copies of this program).
//! `scripts/readme-examples.sh` runs it as member 3 next to two `serve`s.

use std::sync::Arc;
use std::time::Duration;

use raftlock_client::{EmbeddedClient, Mutex, Session};
use raftlock_node::Node;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let file = args
        .next()
        .unwrap_or_else(|| "cluster-config/single.toml".into());
    let id: u64 = args.next().map_or(Ok(1), |id| id.parse())?;

    let node = Node::start_from_cluster_file(&file, id).await?;
    let client = Arc::new(EmbeddedClient::new(node.clone()));
    let session = Session::open(client, "embedded-example", Duration::from_secs(10)).await?;
    let guard = Mutex::new(&session, "examples/embedded").lock().await?;
    println!("fencing token {}", guard.fencing_token());

    guard.unlock().await?;
    session.close().await?;
    node.shutdown().await;
    println!("released, session closed, member stopped");
    Ok(())
}
