//! The client over the HTTP API (`docs/api.md`), with failover between
//! endpoints.
//!
//! Failover policy, in one place ([`HttpClient::call`]):
//!
//! - Any node serves any request (followers forward writes to the leader),
//!   so the client sticks to the endpoint that last answered and moves to
//!   the next one only when that one fails.
//! - An attempt that was never delivered (connection refused, connect
//!   timeout) or answered `no_leader` changed nothing: retry on the next
//!   endpoint, after a jittered backoff ([`RetryPolicy`]).
//! - An attempt whose answer was lost after sending (timeout, reset, a
//!   proxy's 5xx) has an unknown outcome. Every raftlock operation the
//!   client issues is safe to resend (acquire and campaign are idempotent
//!   per session; release, resign and close aim at a state that a second
//!   try reaches too; a duplicate open creates a session that owns
//!   nothing and expires), so it is resent as well; if the attempts run
//!   out, the error is [`ClientError::OutcomeUnknown`], never a definite
//!   one. Node writes and transactions are the exception (a second
//!   application could change the answer, or apply a branch twice): their
//!   first lost answer is `OutcomeUnknown` at once.
//! - Any other answer is final and mapped to a typed [`ClientError`].

mod inspect;
mod nodes;
mod ops;
mod primitives;
mod sse;
mod tools;
mod watch;

pub use tools::{Answered, NodeWrite};

pub(crate) mod wire;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use raftlock_tls::rustls;
use reqwest::{Method, StatusCode};

use crate::error::{ClientError, ErrorCode, Result};
use crate::retry::RetryPolicy;

/// Settings of an [`HttpClient`]; every field has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// How long to wait for the answer to a request that does not
    /// long-poll; added to `wait` for acquire and campaign (so a server's
    /// own `timeout` answer arrives before the client gives up).
    /// Default 10 s: above the servers' default `leader_wait_ms` (3 s)
    /// plus a commit.
    pub request_timeout: Duration,
    /// How long a TCP connect may take before the endpoint counts as down.
    /// Default 1 s.
    pub connect_timeout: Duration,
    /// Retries of `no_leader`, unreachable endpoints and lost answers.
    pub retry: RetryPolicy,
    /// An observe stream silent for this long is reconnected (the state is
    /// re-read on connect, so nothing is missed). Default 60 s.
    pub observe_idle_timeout: Duration,
    /// PEM files for `https://` endpoints. Default: none (the system's
    /// trusted roots, no client certificate).
    pub tls: TlsFiles,
    /// Sent as `Authorization: Bearer …` with every request, for a
    /// cluster that defines tokens (docs/security.md). Default none.
    pub token: Option<BearerToken>,
}

/// PEM files of an HTTPS client (the CLI's `--cacert/--cert/--key`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// Trust only the certificates in this file (the cluster CA) instead
    /// of the system's roots.
    pub ca: Option<PathBuf>,
    /// Present this certificate chain when a server asks (`client_auth`);
    /// needs `key` and `ca`.
    pub cert: Option<PathBuf>,
    /// The private key of `cert`.
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// The rustls config these files make, or `None` to use reqwest's
    /// defaults (system roots).
    fn client_config(&self) -> Result<Option<rustls::ClientConfig>> {
        let bad = |m: &str| Err(ClientError::BadRequest(m.to_string()));
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            (Some(_), None) => return bad("a client certificate (--cert) needs its key (--key)"),
            (None, Some(_)) => return bad("a client key (--key) needs its certificate (--cert)"),
        };
        let Some(ca) = &self.ca else {
            if identity.is_some() {
                return bad("a client certificate (--cert) needs the cluster CA (--cacert)");
            }
            return Ok(None);
        };
        raftlock_tls::client_config(ca, identity)
            .map(Some)
            .map_err(|e| ClientError::BadRequest(e.to_string()))
    }
}

/// A bearer token for the API. Its `Debug` output hides the secret, so
/// logging an [`HttpConfig`] does not leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// Wraps a token as `raftlock token new` printed it (surrounding
    /// whitespace, such as a token file's newline, is dropped).
    pub fn new(token: impl Into<String>) -> BearerToken {
        BearerToken(token.into().trim().to_string())
    }

    /// The secret itself.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<hidden>)")
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            retry: RetryPolicy::default(),
            observe_idle_timeout: Duration::from_secs(60),
            tls: TlsFiles::default(),
            token: None,
        }
    }
}

/// A [`LockClient`](crate::LockClient) talking HTTP/JSON to any nodes of
/// a cluster. Cheap to clone; clones share connections.
///
/// ```no_run
/// # async fn demo() -> Result<(), raftlock_client::ClientError> {
/// use raftlock_client::HttpClient;
/// let client = HttpClient::new(["http://127.0.0.1:7001", "http://127.0.0.1:7002"])?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// Base URLs without a trailing slash.
    endpoints: Vec<String>,
    http: reqwest::Client,
    config: HttpConfig,
    /// Index of the endpoint to try first: the last one that answered.
    preferred: AtomicUsize,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("endpoints", &self.inner.endpoints)
            .field("config", &self.inner.config)
            .finish()
    }
}

/// What became of one attempt on one endpoint.
enum Attempt {
    /// An HTTP answer.
    /// With the `Raftlock-Revision` header's value, when it has one.
    Answer(StatusCode, Vec<u8>, Option<u64>),
    /// Never delivered; nothing changed.
    NotSent(String),
    /// Sent, no usable answer: it may have been applied.
    Unknown(String),
}

/// One request, as the retry loop needs it.
pub(crate) struct Call {
    method: Method,
    path: String,
    body: Option<Vec<u8>>,
    /// The server-side wait of a long poll; extends the request timeout.
    wait: Duration,
    /// For release-like calls: after an attempt with an unknown outcome,
    /// an answer saying "already gone" means the first attempt worked.
    gone_is_done: bool,
    /// For writes a second application would change (node writes,
    /// transactions): never resent once it may have been applied; the
    /// answer is then `OutcomeUnknown` at once.
    once: bool,
}

impl Call {
    pub(crate) fn new(method: Method, path: String) -> Call {
        Call {
            method,
            path,
            body: None,
            wait: Duration::ZERO,
            gone_is_done: false,
            once: false,
        }
    }

    pub(crate) fn once(mut self) -> Call {
        self.once = true;
        self
    }

    pub(crate) fn json(mut self, body: &impl serde::Serialize) -> Call {
        // Serializing our own plain structs cannot fail.
        self.body = serde_json::to_vec(body).ok();
        self
    }

    pub(crate) fn wait(mut self, wait: Duration) -> Call {
        self.wait = wait;
        self
    }

    pub(crate) fn gone_is_done(mut self) -> Call {
        self.gone_is_done = true;
        self
    }
}

impl HttpClient {
    /// A client for these endpoints (`http://host:port`, or
    /// `https://host:port` with [`HttpConfig::tls`]), default settings.
    pub fn new<I, S>(endpoints: I) -> Result<HttpClient>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_config(endpoints, HttpConfig::default())
    }

    /// A client for these endpoints with explicit settings.
    pub fn with_config<I, S>(endpoints: I, config: HttpConfig) -> Result<HttpClient>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let endpoints: Vec<String> = endpoints
            .into_iter()
            .map(|e| e.into().trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(ClientError::BadRequest("no endpoints given".into()));
        }
        let scheme_ok = |e: &String| e.starts_with("http://") || e.starts_with("https://");
        if let Some(bad) = endpoints.iter().find(|e| !scheme_ok(e)) {
            return Err(ClientError::BadRequest(format!(
                "endpoint {bad:?} must start with http:// or https://"
            )));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = &config.token {
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.secret()))
                    .map_err(|_| {
                        ClientError::BadRequest("the bearer token is not printable ASCII".into())
                    })?;
            // Kept out of reqwest's debug output and HTTP/2 header tables.
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .tcp_nodelay(true)
            .no_proxy()
            .default_headers(headers);
        // Without a CA file, https uses the system's roots through
        // reqwest's own config, which needs the process's rustls provider.
        raftlock_tls::install_default_provider();
        if let Some(tls) = config.tls.client_config()? {
            builder = builder.tls_backend_preconfigured(tls);
        }
        let http = builder
            .build()
            .map_err(|e| ClientError::Internal(format!("cannot build HTTP client: {e}")))?;
        Ok(HttpClient {
            inner: Arc::new(Inner {
                endpoints,
                http,
                config,
                preferred: AtomicUsize::new(0),
            }),
        })
    }

    /// A client for a comma-separated endpoint list, as in
    /// `RAFTLOCK_ENDPOINTS=http://a:7001,http://b:7001`.
    pub fn from_list(list: &str) -> Result<HttpClient> {
        Self::new(list.split(','))
    }

    /// The endpoints, in configured order.
    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// The settings in use.
    pub fn config(&self) -> &HttpConfig {
        &self.inner.config
    }

    /// Runs `call` with failover and retries (see the module docs);
    /// returns the body of a 2xx answer.
    pub(crate) async fn call(&self, call: Call) -> Result<Vec<u8>> {
        self.call_with_revision(call).await.map(|(body, _)| body)
    }

    /// As [`call`](Self::call), with the revision a read saw (`0` when
    /// the answer does not say).
    pub(crate) async fn call_with_revision(&self, call: Call) -> Result<(Vec<u8>, u64)> {
        let inner = &self.inner;
        let count = inner.endpoints.len();
        let start = inner.preferred.load(Ordering::Relaxed);
        let mut unknown: Option<String> = None;
        let mut last = ClientError::Unavailable("no attempt made".into());
        for attempt in 0..inner.config.retry.attempts() {
            tokio::time::sleep(inner.config.retry.backoff(attempt)).await;
            let index = (start + attempt as usize) % count;
            let endpoint = &inner.endpoints[index];
            match self.attempt(endpoint, &call).await {
                Attempt::NotSent(why) => {
                    tracing::debug!(endpoint, "not delivered: {why}");
                    last = ClientError::Unavailable(format!("{endpoint}: {why}"));
                }
                Attempt::Unknown(why) => {
                    tracing::debug!(endpoint, "answer lost: {why}");
                    if call.once {
                        return Err(ClientError::OutcomeUnknown(format!("{endpoint}: {why}")));
                    }
                    unknown = Some(format!("{endpoint}: {why}"));
                }
                Attempt::Answer(status, body, revision) if status.is_success() => {
                    inner.preferred.store(index, Ordering::Relaxed);
                    return Ok((body, revision.unwrap_or(0)));
                }
                Attempt::Answer(status, body, _) => match error_of(status, &body) {
                    ClientError::NoLeader(m) => last = ClientError::NoLeader(m),
                    // That member cannot serve (its disk failed or is full,
                    // its data was replaced, it is at its connection cap)
                    // and it refused before proposing (nothing applied):
                    // another member serves.
                    e if passed_over(&e) => last = e,
                    // A node going down may have applied it: resend elsewhere.
                    e if e.code().is_some_and(ErrorCode::outcome_unknown) => {
                        if call.once {
                            return Err(ClientError::OutcomeUnknown(format!("{endpoint}: {e}")));
                        }
                        unknown = Some(format!("{endpoint}: {e}"));
                    }
                    e => {
                        inner.preferred.store(index, Ordering::Relaxed);
                        let gone = matches!(
                            e,
                            ClientError::NotFound(_)
                                | ClientError::NotOwner(_)
                                | ClientError::SessionNotFound(_)
                        );
                        if call.gone_is_done && gone && unknown.is_some() {
                            return Ok((Vec::new(), 0));
                        }
                        return Err(e);
                    }
                },
            }
        }
        Err(match unknown {
            Some(why) => ClientError::OutcomeUnknown(why),
            None => last,
        })
    }

    async fn attempt(&self, endpoint: &str, call: &Call) -> Attempt {
        let timeout = self.inner.config.request_timeout.saturating_add(call.wait);
        let mut request = self
            .inner
            .http
            .request(call.method.clone(), format!("{endpoint}{}", call.path))
            .timeout(timeout);
        if let Some(body) = &call.body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) if e.is_connect() => return Attempt::NotSent(e.to_string()),
            Err(e) => return Attempt::Unknown(e.to_string()),
        };
        let status = response.status();
        let revision = response
            .headers()
            .get("raftlock-revision")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        match response.bytes().await {
            Ok(body) => Attempt::Answer(status, body.to_vec(), revision),
            Err(e) => Attempt::Unknown(format!("reading the answer: {e}")),
        }
    }

    /// Sends a GET for a long-lived response (SSE), trying endpoints in
    /// turn until one answers 2xx.
    pub(crate) async fn open_stream(&self, path: &str) -> Result<reqwest::Response> {
        let inner = &self.inner;
        let count = inner.endpoints.len();
        let start = inner.preferred.load(Ordering::Relaxed);
        let mut last = ClientError::Unavailable("no attempt made".into());
        for attempt in 0..inner.config.retry.attempts() {
            tokio::time::sleep(inner.config.retry.backoff(attempt)).await;
            let endpoint = &inner.endpoints[(start + attempt as usize) % count];
            let request = inner
                .http
                .get(format!("{endpoint}{path}"))
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .send();
            // Bounds the wait for the headers only, not the stream.
            let sent = match tokio::time::timeout(inner.config.request_timeout, request).await {
                Ok(sent) => sent.map_err(|e| e.to_string()),
                Err(_) => Err("no answer in time".to_string()),
            };
            match sent {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let body = response
                        .bytes()
                        .await
                        .map(|b| b.to_vec())
                        .unwrap_or_default();
                    match error_of(status, &body) {
                        e if e.is_transient()
                            || e.outcome_unknown()
                            || e.code().is_some_and(ErrorCode::retry_elsewhere) =>
                        {
                            last = e
                        }
                        e => return Err(e),
                    }
                }
                Err(why) => last = ClientError::Unavailable(format!("{endpoint}: {why}")),
            }
        }
        Err(last)
    }
}

/// Maps a non-2xx answer to an error. A body that is not the API's error
/// JSON (a proxy's page, another service) is a protocol error, or an
/// unknown outcome for a 5xx, since the request may have gone through.
fn error_of(status: StatusCode, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<raftlock_api::ErrorReply>(body) {
        Ok(e) => ClientError::from_api(&e.error, e.message),
        Err(_) => {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            if status.is_server_error() {
                ClientError::OutcomeUnknown(format!("HTTP {status}: {text}"))
            } else {
                ClientError::Protocol(format!("HTTP {status}: {text}"))
            }
        }
    }
}

/// A refusal by a member that cannot serve while another can, sent before
/// anything was proposed (`ErrorCode::retry_elsewhere`, and nothing
/// applied): `storage_failed`, `disk_full`, `member_replaced`,
/// `overloaded`.
fn passed_over(e: &ClientError) -> bool {
    e.code()
        .is_some_and(|code| code.retry_elsewhere() && code.not_applied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_refused_before_proposing_is_passed_over() {
        for code in [
            "storage_failed",
            "disk_full",
            "member_replaced",
            "overloaded",
        ] {
            let body = format!(r#"{{"error":"{code}","message":"x"}}"#);
            let e = error_of(StatusCode::SERVICE_UNAVAILABLE, body.as_bytes());
            assert!(passed_over(&e), "{code}: {e:?}");
        }
        for code in [
            "lock_held",
            "shutting_down",
            "no_leader",
            "too_many_requests",
        ] {
            let body = format!(r#"{{"error":"{code}","message":"x"}}"#);
            let e = error_of(StatusCode::CONFLICT, body.as_bytes());
            assert!(!passed_over(&e), "{code}: {e:?}");
        }
    }

    #[test]
    fn endpoints_are_normalized_and_checked() {
        let client = HttpClient::from_list("http://a:1/, http://b:2").expect("valid list");
        assert_eq!(client.endpoints(), ["http://a:1", "http://b:2"]);
        assert!(HttpClient::new(Vec::<String>::new()).is_err());
        assert!(HttpClient::new(["https://a:1"]).is_ok());
        assert!(HttpClient::new(["ftp://a:1"]).is_err());
        assert!(HttpClient::new(["a:1"]).is_err());
    }

    #[test]
    fn tls_files_must_come_in_usable_sets() {
        let with = |ca: Option<&str>, cert: Option<&str>, key: Option<&str>| {
            let config = HttpConfig {
                tls: TlsFiles {
                    ca: ca.map(PathBuf::from),
                    cert: cert.map(PathBuf::from),
                    key: key.map(PathBuf::from),
                },
                ..HttpConfig::default()
            };
            HttpClient::with_config(["https://a:1"], config).map(|_| ())
        };
        let e = with(None, Some("c.pem"), Some("k.pem")).expect_err("cert without CA");
        assert!(e.to_string().contains("--cacert"), "{e}");
        let e = with(Some("ca.pem"), Some("c.pem"), None).expect_err("cert without key");
        assert!(e.to_string().contains("--key"), "{e}");
        let e = with(Some("/nonexistent/ca.pem"), None, None).expect_err("missing CA");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn the_token_stays_out_of_debug_output() {
        let config = HttpConfig {
            token: Some(BearerToken::new("s3cret\n")),
            ..HttpConfig::default()
        };
        let client = HttpClient::with_config(["http://a:1"], config).expect("valid");
        let shown = format!("{client:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            client.config().token.as_ref().map(BearerToken::secret),
            Some("s3cret")
        );
        let bad = HttpConfig {
            token: Some(BearerToken::new("a\u{7f}b")),
            ..HttpConfig::default()
        };
        assert!(HttpClient::with_config(["http://a:1"], bad).is_err());
    }

    #[test]
    fn error_bodies_map_to_variants() {
        let body = br#"{"error":"lock_held","message":"held by x"}"#;
        assert_eq!(
            error_of(StatusCode::CONFLICT, body),
            ClientError::LockHeld("held by x".into())
        );
        assert!(error_of(StatusCode::BAD_GATEWAY, b"<html>").outcome_unknown());
        assert!(matches!(
            error_of(StatusCode::NOT_FOUND, b"nope"),
            ClientError::Protocol(_)
        ));
    }
}
