//! Takes a lock over HTTP, prints its fencing token, releases it.
//!
//! Run against a cluster (e.g. `raftlock up`):
//! `cargo run -p raftlock-client --example http_lock [LOCK_NAME]`
//! Endpoints come from `RAFTLOCK_ENDPOINTS` (comma-separated), default
//! `http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003`.

use std::sync::Arc;
use std::time::Duration;

use raftlock_client::{HttpClient, LockClient, Mutex, Session};

const DEFAULT_ENDPOINTS: &str = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let endpoints =
        std::env::var("RAFTLOCK_ENDPOINTS").unwrap_or_else(|_| DEFAULT_ENDPOINTS.to_string());
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/http-lock".to_string());

    let client: Arc<dyn LockClient> = Arc::new(HttpClient::from_list(&endpoints)?);
    let session = Session::open(client, "http-lock-example", Duration::from_secs(10)).await?;
    let guard = Mutex::new(&session, name.as_str())
        .lock_timeout(Duration::from_secs(30))
        .await?;
    println!("locked {name} with fencing token {}", guard.fencing_token());
    guard.unlock().await?;
    session.close().await?;
    println!("released {name}");
    Ok(())
}
