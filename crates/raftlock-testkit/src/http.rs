//! JSON replies of the HTTP API, and requests reqwest would not send as
//! written.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::WAIT;

/// A plain-HTTP client for a test cluster: no proxy from the environment,
/// and a bound on every request (a long poll in a test is at most 30 s).
pub fn client() -> reqwest::Client {
    // reqwest is built without a default TLS provider (crates/raftlock-tls).
    raftlock_tls::install_default_provider();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// A JSON reply: status, headers, and the body parsed (`Null` when empty).
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON; `Null` for an empty body.
    pub body: Value,
}

impl Reply {
    /// Sends `request` and reads the whole reply; panics naming `what` if
    /// it fails or the body is not JSON.
    pub async fn of(request: reqwest::RequestBuilder, what: &str) -> Reply {
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{what}: body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Asserts an API error: status, code, JSON content type and shape.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str, what: &str) {
        assert_eq!(self.status.as_u16(), status, "{what}: {}", self.body);
        assert_eq!(self.body["error"], code, "{what}: {}", self.body);
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: message missing in {}",
            self.body
        );
        let content_type = self.headers.get("content-type").map(|v| v.as_bytes());
        assert_eq!(content_type, Some(&b"application/json"[..]), "{what}");
    }

    /// Asserts a success status and returns the body.
    #[track_caller]
    pub fn expect(&self, status: u16, what: &str) -> &Value {
        assert_eq!(self.status.as_u16(), status, "{what}: {}", self.body);
        &self.body
    }
}

/// Sends `request` verbatim (reqwest would normalize `..` and `%2e%2e`)
/// to `url` (`http://host:port`) and returns (status, parsed JSON body).
pub async fn raw_http(url: &str, request: &str) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .expect("response in time")
        .expect("read");
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, body)
}

/// An address nothing listens on (bound by the OS, then released): a
/// connection to it is refused, like a member that is down.
pub async fn dead_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}
