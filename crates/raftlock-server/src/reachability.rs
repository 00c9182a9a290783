//! `GET /v1/cluster/reachability`: can the answering member reach each
//! member's API right now? `GET /v1/cluster` only knows what Raft knows,
//! and a follower knows nothing of the other followers; the dashboard
//! (`/ui`) uses this to show a dead member as down whichever member
//! serves the page (docs/api.md).
//!
//! A probe opens a TCP connection to the member's `api_addr`, sends
//! `GET /v1/health` and waits for the first bytes of an answer, all within
//! [`PROBE_TIMEOUT`]. A connection alone is not enough: the kernel accepts
//! connections for a stopped (SIGSTOP, swapped-out) process. Any answer
//! counts as reachable, and so does a connection the member closes or a
//! TLS handshake it fails (a live process did that); only a refused connection or silence until the
//! deadline is unreachable. An HTTP status line also tells whether the member
//! is healthy (has a leader and is caught up), and a healthy member's
//! answer carries its applied index, so the page can show every member's
//! lag from any member.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use raftlock_tls::rustls::pki_types::ServerName;
use raftlock_tls::rustls::ClientConfig;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use utoipa::{OpenApi, ToSchema};

use crate::state::AppState;

/// Bound on one probe (connect, send, first bytes back). The members are
/// probed concurrently, so this bounds the request.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The reachability operation in the OpenAPI document (`openapi.rs`).
#[derive(OpenApi)]
#[openapi(paths(reachability))]
pub(crate) struct Api;

/// The reachability routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/cluster/reachability", get(reachability))
}

#[derive(Debug, Serialize, ToSchema)]
struct Probe {
    id: u64,
    api_addr: String,
    reachable: bool,
    /// `true`/`false` from the member's `/v1/health` status (200/503);
    /// `null` when it did not answer in HTTP.
    healthy: Option<bool>,
    /// The member's applied index, from its healthy answer.
    applied_index: Option<u64>,
    /// Round trip of the probe, when it answered.
    rtt_ms: Option<u64>,
    /// Why not reachable: the connection failed, or nothing came back in
    /// time.
    error: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Reachability {
    /// The member that probed.
    node_id: u64,
    timeout_ms: u64,
    members: Vec<Probe>,
}

/// Can the answering member reach each member's API right now?
#[utoipa::path(get, path = "/v1/cluster/reachability", tag = "cluster",
    responses((status = 200, description = "One probe per member", body = Reachability)))]
async fn reachability(State(app): State<AppState>) -> Json<Reachability> {
    let status = app.node.status();
    // With the cluster's `[tls]` table the members serve HTTPS: probe as a
    // member does (the cluster CA, this member's certificate, which
    // satisfies `client_auth = "required"`). Built per request: three
    // small PEM files, once a second at most per open dashboard.
    let tls = app.node.config().tls.as_ref().map(|settings| {
        raftlock_tls::member_client_config(settings)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    });
    let probes = status.members.into_iter().map(|m| {
        let tls = tls.clone();
        async move { probe(m.id, m.api_addr, tls).await }
    });
    Json(Reachability {
        node_id: status.id,
        timeout_ms: PROBE_TIMEOUT.as_millis() as u64,
        members: futures::future::join_all(probes).await,
    })
}

/// `None` for plain HTTP, else the TLS client config (or why it could not
/// be built).
type ProbeTls = Option<Result<Arc<ClientConfig>, String>>;

async fn probe(id: u64, api_addr: String, tls: ProbeTls) -> Probe {
    let started = Instant::now();
    let answer = tokio::time::timeout(PROBE_TIMEOUT, ask_health(&api_addr, tls)).await;
    let (reachable, answer, error) = match answer {
        Ok(Ok(answer)) => (true, answer, None),
        Ok(Err(e)) => (false, Vec::new(), Some(e.to_string())),
        Err(_) => (
            false,
            Vec::new(),
            Some(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
        ),
    };
    Probe {
        id,
        rtt_ms: reachable.then(|| started.elapsed().as_millis() as u64),
        api_addr,
        reachable,
        healthy: health_of(&answer),
        applied_index: applied_index_of(&answer),
        error,
    }
}

/// Bound on the answer read (a health answer is about 100 bytes).
const MAX_ANSWER: usize = 4096;

/// Connects (over TLS when `tls` says so), asks for `/v1/health`, returns
/// what the member answered before closing the connection (at most
/// [`MAX_ANSWER`] bytes).
async fn ask_health(api_addr: &str, tls: ProbeTls) -> std::io::Result<Vec<u8>> {
    let tcp = TcpStream::connect(api_addr).await?;
    let Some(tls) = tls else {
        return exchange(tcp, api_addr).await;
    };
    let config = tls.map_err(std::io::Error::other)?;
    let host = api_addr
        .rsplit_once(':')
        .map_or(api_addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string()).map_err(std::io::Error::other)?;
    match TlsConnector::from(config).connect(name, tcp).await {
        Ok(stream) => exchange(stream, api_addr).await,
        // The member accepted and spoke TLS (or closed): it is alive, even
        // if the handshake failed.
        Err(_) => Ok(Vec::new()),
    }
}

/// Sends the health request on `stream` and reads the answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    api_addr: &str,
) -> std::io::Result<Vec<u8>> {
    let request =
        format!("GET /v1/health HTTP/1.1\r\nHost: {api_addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    while answer.len() < MAX_ANSWER {
        match stream.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            // Some bytes already came: the member answers.
            Err(_) if !answer.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    // An empty answer is a live process closing the connection (a TLS
    // listener refusing plain HTTP does that): reachable, health unknown.
    Ok(answer)
}

/// `applied_index` of a `200` health answer's JSON body.
fn applied_index_of(answer: &[u8]) -> Option<u64> {
    if health_of(answer) != Some(true) {
        return None;
    }
    let text = std::str::from_utf8(answer).ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    let body: serde_json::Value = serde_json::from_str(body).ok()?;
    body.get("applied_index")?.as_u64()
}

/// `HTTP/1.1 200 …` → healthy, another status → not; not HTTP → unknown.
fn health_of(answer: &[u8]) -> Option<bool> {
    let head = answer.get(..answer.len().min(12))?;
    let text = std::str::from_utf8(head).ok()?;
    let code = text.strip_prefix("HTTP/1.")?.get(2..5)?;
    Some(code == "200")
}

#[cfg(test)]
mod tests {
    use super::{applied_index_of, health_of};
    use tokio::io::AsyncReadExt;

    #[test]
    fn reads_the_health_status_line() {
        assert_eq!(health_of(b"HTTP/1.1 200 OK\r\n"), Some(true));
        assert_eq!(
            health_of(b"HTTP/1.1 503 Service Unavailable\r\n"),
            Some(false)
        );
        assert_eq!(health_of(b"\x15\x03\x03\x00\x02"), None);
        assert_eq!(health_of(b"HTTP/1.1 2"), None);
    }

    #[tokio::test]
    async fn a_member_that_accepts_but_never_answers_is_unreachable() {
        // The kernel completes the handshake for a listener nobody
        // accepts from, as for a stopped process.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let started = std::time::Instant::now();
        let probe = super::probe(7, addr, None).await;
        assert!(!probe.reachable, "{probe:?}");
        assert!(probe.error.unwrap().contains("no answer within"));
        assert!(started.elapsed() < super::PROBE_TIMEOUT * 2);
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_and_a_closing_member_reachable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let closing = tokio::spawn(async move {
            // Reads the request, then closes without a word (as a TLS
            // listener given plain HTTP may). Closing with the request
            // unread would reset the connection instead.
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 256];
            let mut read = 0;
            while !request[..read].ends_with(b"\r\n\r\n") {
                match stream.read(&mut request[read..]).await.unwrap() {
                    0 => break,
                    n => read += n,
                }
            }
            drop(stream);
        });
        let probe = super::probe(1, addr.clone(), None).await;
        assert!(probe.reachable, "{probe:?}");
        assert_eq!(probe.healthy, None);
        closing.await.unwrap();
        // The listener is gone: connections are refused.
        let probe = super::probe(1, addr, None).await;
        assert!(!probe.reachable, "{probe:?}");
    }

    #[test]
    fn reads_the_applied_index_of_a_healthy_answer() {
        let ok =
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n{\"healthy\":true,\"applied_index\":42}";
        assert_eq!(applied_index_of(ok), Some(42));
        let no = b"HTTP/1.1 503 Service Unavailable\r\n\r\n{\"applied_index\":42}";
        assert_eq!(applied_index_of(no), None);
        assert_eq!(applied_index_of(b"HTTP/1.1 200 OK\r\n\r\nnot json"), None);
    }
}
