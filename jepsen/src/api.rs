//! The harness's HTTP client for raftlock's API (`docs/api.md`).
//!
//! Every call goes to one chosen node and makes exactly one request: no
//! retries, no leader discovery, so that each recorded operation is one
//! request and its outcome is classified honestly:
//! - [`Reply::Ok`]: the server said it happened;
//! - [`Reply::Fail`]: it definitely did not happen (`no_leader`, a
//!   refused connection, `timeout`/`lock_held`, a version mismatch, …);
//! - [`Reply::Info`]: unknown (`outcome_unknown`, a timeout, a connection
//!   lost after the request may have been sent, any other 5xx).
//!
//! The control-plane reads (the cluster view, the membership, a lock's
//! state) go through `raftlock-client`, one single-attempt client per
//! member; their callers use only the answers. The workloads' operations
//! still send their own requests: their histories and the sticky clients'
//! routing read the harness's transport codes (`connect`, `http_timeout`,
//! `transport`) and the exact code of an unknown outcome, which the
//! client's `ClientError` folds into `OutcomeUnknown` (docs/adr/0020).

use std::time::Duration;

use base64::Engine as _;
use raftlock_client::{ClientError, ErrorCode, HttpClient, HttpConfig, RetryPolicy};
use serde::Deserialize as _;
use serde_json::{json, Value as Json};

/// What went wrong, for the history's `error` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The API's error code, or `connect` / `http_timeout` / `transport`
    /// / `bad_response` for failures below the API.
    pub code: String,
    /// Human text.
    pub message: String,
}

impl ApiError {
    fn new(code: &str, message: impl Into<String>) -> Self {
        ApiError {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// `code: message`, for histories.
    pub fn text(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

/// One request's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    /// It happened; the server's answer.
    Ok(T),
    /// It definitely did not happen.
    Fail(ApiError),
    /// It may or may not have happened.
    Info(ApiError),
}

impl<T> Reply<T> {
    /// The error code of a `Fail` or `Info`.
    pub fn code(&self) -> Option<&str> {
        match self {
            Reply::Ok(_) => None,
            Reply::Fail(e) | Reply::Info(e) => Some(&e.code),
        }
    }
}

/// A stored node: its data and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeData {
    /// Decoded data bytes.
    pub data: Vec<u8>,
    /// Version, starting at 1.
    pub version: u64,
}

/// `GET /v1/cluster`, the fields the harness uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    /// Who this node thinks leads.
    pub leader: Option<u64>,
    /// Its term.
    pub term: u64,
}

/// `GET /v1/cluster/members`, the fields the harness uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembersView {
    /// Voter ids, ascending.
    pub voters: Vec<u64>,
    /// Every member id (voters and learners), ascending.
    pub members: Vec<u64>,
    /// True while a change is being committed.
    pub joint: bool,
}

/// Client for every node of one cluster.
#[derive(Debug, Clone)]
pub struct Api {
    /// One pooled client for all nodes.
    http: reqwest::Client,
    /// `http://ip:port` per member, index = id - 1.
    nodes: Vec<String>,
    /// Timeout for requests that do not long-poll.
    timeout: Duration,
    /// The typed client of each member (index = id - 1), one attempt per
    /// call and no failover, for the control-plane reads.
    typed: Vec<Option<HttpClient>>,
}

impl Api {
    /// A client for the nodes' API base URLs (`http://127.0.0.1:7001`, …),
    /// with `timeout` for every request that does not long-poll.
    pub fn new(nodes: Vec<String>, timeout: Duration) -> Api {
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        let config = HttpConfig {
            request_timeout: timeout,
            connect_timeout: Duration::from_millis(500),
            retry: RetryPolicy {
                attempts: 1,
                ..RetryPolicy::default()
            },
            ..HttpConfig::default()
        };
        let typed = nodes
            .iter()
            .map(|url| HttpClient::with_config([url.clone()], config.clone()).ok())
            .collect();
        Api {
            http,
            nodes,
            timeout,
            typed,
        }
    }

    /// Member `node`'s typed client.
    fn typed(&self, node: u64) -> Result<&HttpClient, ApiError> {
        usize::try_from(node.saturating_sub(1))
            .ok()
            .and_then(|i| self.typed.get(i))
            .and_then(Option::as_ref)
            .ok_or_else(|| ApiError::new("connect", format!("no member {node}")))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True for a client with no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn url(&self, node: u64, path: &str) -> String {
        let base = usize::try_from(node.saturating_sub(1))
            .ok()
            .and_then(|i| self.nodes.get(i))
            .map_or("http://127.0.0.1:9", String::as_str);
        format!("{base}{path}")
    }

    async fn send(&self, req: reqwest::RequestBuilder, timeout: Duration) -> Reply<(u16, Json)> {
        let response = match req.timeout(timeout).send().await {
            Ok(r) => r,
            Err(e) => return Reply::from_transport(&e),
        };
        let status = response.status().as_u16();
        let body = match response.bytes().await {
            Ok(b) => b,
            Err(e) => return Reply::from_transport(&e),
        };
        let json = if body.is_empty() {
            Json::Null
        } else {
            match serde_json::from_slice(&body) {
                Ok(j) => j,
                Err(e) => {
                    let err = ApiError::new("bad_response", format!("HTTP {status}: {e}"));
                    return if (200..300).contains(&status) || status >= 500 {
                        Reply::Info(err)
                    } else {
                        Reply::Fail(err)
                    };
                }
            }
        };
        if (200..300).contains(&status) {
            Reply::Ok((status, json))
        } else {
            classify(status, &json)
        }
    }

    /// `POST /v1/sessions`: the new session's id.
    pub async fn open_session(&self, node: u64, ttl_ms: u64, owner: &str) -> Reply<String> {
        let req = self
            .http
            .post(self.url(node, "/v1/sessions"))
            .json(&json!({"ttl_ms": ttl_ms, "owner": owner}));
        self.send(req, self.timeout).await.and_then(|(_, body)| {
            body.get("session_id")
                .and_then(Json::as_str)
                .map(str::to_string)
                .ok_or_else(|| ApiError::new("bad_response", format!("no session_id in {body}")))
        })
    }

    /// `POST /v1/sessions/{id}/keepalive`.
    pub async fn keepalive(&self, node: u64, session: &str) -> Reply<()> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/sessions/{session}/keepalive")));
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `DELETE /v1/sessions/{id}`; `Ok(true)` when closed now, `Ok(false)`
    /// when it was already gone (`session_not_found`).
    pub async fn close_session(&self, node: u64, session: &str) -> Reply<bool> {
        let req = self
            .http
            .delete(self.url(node, &format!("/v1/sessions/{session}")));
        match self.send(req, self.timeout).await {
            Reply::Ok(_) => Reply::Ok(true),
            Reply::Fail(e) if e.code == "session_not_found" => Reply::Ok(false),
            Reply::Fail(e) => Reply::Fail(e),
            Reply::Info(e) => Reply::Info(e),
        }
    }

    /// `POST /v1/locks/{name}/acquire`, long-polling up to `wait_ms`: the
    /// fencing token when granted.
    pub async fn acquire(&self, node: u64, lock: &str, session: &str, wait_ms: u64) -> Reply<u64> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/locks/{lock}/acquire")))
            .json(&json!({"session_id": session, "wait_ms": wait_ms}));
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        self.send(req, timeout).await.and_then(|(_, body)| {
            body.get("fencing_token")
                .and_then(Json::as_u64)
                .ok_or_else(|| ApiError::new("bad_response", format!("no fencing_token in {body}")))
        })
    }

    /// `POST /v1/rwlocks/{name}/acquire` in mode `read` or `write`: the
    /// fencing token when granted.
    /// `POST /v1/locks/{lock}/acquire` with a lock-delay: the token.
    pub async fn acquire_delayed(
        &self,
        node: u64,
        lock: &str,
        session: &str,
        (wait_ms, lock_delay_ms): (u64, u64),
    ) -> Reply<u64> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/locks/{lock}/acquire")))
            .json(&json!({
                "session_id": session, "wait_ms": wait_ms, "lock_delay_ms": lock_delay_ms
            }));
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        self.send(req, timeout).await.and_then(|(_, body)| {
            body.get("fencing_token")
                .and_then(Json::as_u64)
                .ok_or_else(|| ApiError::new("bad_response", format!("no fencing_token in {body}")))
        })
    }
    /// `POST /v1/multilocks/acquire`: one fencing token per lock, in the
    /// order named.
    pub async fn multi_acquire(
        &self,
        node: u64,
        locks: &[String],
        session: &str,
        wait_ms: u64,
    ) -> Reply<Vec<u64>> {
        let req = self
            .http
            .post(self.url(node, "/v1/multilocks/acquire"))
            .json(&json!({"session_id": session, "locks": locks, "wait_ms": wait_ms}));
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        self.send(req, timeout).await.and_then(|(_, body)| {
            let tokens: Option<Vec<u64>> =
                body.get("locks").and_then(Json::as_array).map(|locks| {
                    locks
                        .iter()
                        .filter_map(|l| l.get("fencing_token").and_then(Json::as_u64))
                        .collect()
                });
            tokens
                .filter(|t| t.len() == locks.len())
                .ok_or_else(|| ApiError::new("bad_response", format!("no tokens in {body}")))
        })
    }
    /// `POST /v1/multilocks/release`.
    pub async fn multi_release(&self, node: u64, locks: &[String], session: &str) -> Reply<()> {
        let req = self
            .http
            .post(self.url(node, "/v1/multilocks/release"))
            .json(&json!({"session_id": session, "locks": locks}));
        self.send(req, self.timeout).await.map(|_| ())
    }
    /// `POST /v1/txn` that writes `puts` (path, data) only while every
    /// `(lock, token)` in `holders` still holds: whether it ran.
    pub async fn guarded_puts(
        &self,
        node: u64,
        holders: &[(String, u64)],
        puts: &[(String, Vec<u8>)],
    ) -> Reply<bool> {
        let compare: Vec<Json> = holders
            .iter()
            .map(|(lock, token)| json!({"lock": lock, "fencing_token": token}))
            .collect();
        let success: Vec<Json> = puts
            .iter()
            .map(|(path, data)| {
                let data = base64::engine::general_purpose::STANDARD.encode(data);
                json!({"put": {"path": path, "data": data}})
            })
            .collect();
        let req = self
            .http
            .post(self.url(node, "/v1/txn"))
            .json(&json!({"compare": compare, "success": success, "failure": []}));
        self.send(req, self.timeout).await.and_then(|(_, body)| {
            body.get("succeeded")
                .and_then(Json::as_bool)
                .ok_or_else(|| ApiError::new("bad_response", format!("no succeeded in {body}")))
        })
    }
    pub async fn rw_acquire(
        &self,
        node: u64,
        lock: &str,
        session: &str,
        (mode, wait_ms): (&str, u64),
    ) -> Reply<u64> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/rwlocks/{lock}/acquire")))
            .json(&json!({"session_id": session, "mode": mode, "wait_ms": wait_ms}));
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        self.send(req, timeout).await.and_then(|(_, body)| {
            body.get("fencing_token")
                .and_then(Json::as_u64)
                .ok_or_else(|| ApiError::new("bad_response", format!("no fencing_token in {body}")))
        })
    }

    /// `POST /v1/rwlocks/{name}/release`.
    pub async fn rw_release(&self, node: u64, lock: &str, session: &str) -> Reply<()> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/rwlocks/{lock}/release")))
            .json(&json!({"session_id": session}));
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `POST /v1/semaphores/{name}/acquire` with limit `permits`: the
    /// fencing token when granted.
    pub async fn sem_acquire(
        &self,
        node: u64,
        name: &str,
        session: &str,
        (permits, wait_ms): (u64, u64),
    ) -> Reply<u64> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/semaphores/{name}/acquire")))
            .json(&json!({"session_id": session, "permits": permits, "wait_ms": wait_ms}));
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        self.send(req, timeout).await.and_then(|(_, body)| {
            body.get("fencing_token")
                .and_then(Json::as_u64)
                .ok_or_else(|| ApiError::new("bad_response", format!("no fencing_token in {body}")))
        })
    }

    /// `POST /v1/semaphores/{name}/release`.
    pub async fn sem_release(&self, node: u64, name: &str, session: &str) -> Reply<()> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/semaphores/{name}/release")))
            .json(&json!({"session_id": session}));
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `POST /v1/locks/{name}/release`.
    pub async fn release(&self, node: u64, lock: &str, session: &str) -> Reply<()> {
        let req = self
            .http
            .post(self.url(node, &format!("/v1/locks/{lock}/release")))
            .json(&json!({"session_id": session}));
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `GET /v1/locks/{name}`: the holder's session id and the number of
    /// waiters.
    pub async fn lock_state(&self, node: u64, lock: &str) -> Reply<(Option<String>, usize)> {
        let client = match self.typed(node) {
            Ok(client) => client,
            Err(e) => return Reply::Fail(e),
        };
        Reply::of(client.lock_view(lock).await).map(|lock| {
            let holder = lock.value.holder.and_then(|h| h.session_id);
            (holder, lock.value.waiters.len())
        })
    }

    /// `GET /v1/nodes/{path}` (linearizable): `None` when it does not exist.
    pub async fn get_node(&self, node: u64, path: &str) -> Reply<Option<NodeData>> {
        let req = self.http.get(self.url(node, &format!("/v1/nodes/{path}")));
        match self.send(req, self.timeout).await {
            Reply::Ok((_, body)) => match parse_node(&body) {
                Some(n) => Reply::Ok(Some(n)),
                None => Reply::Info(ApiError::new("bad_response", format!("bad node {body}"))),
            },
            Reply::Fail(e) if e.code == "not_found" => Reply::Ok(None),
            Reply::Fail(e) => Reply::Fail(e),
            Reply::Info(e) => Reply::Info(e),
        }
    }

    /// `PUT /v1/nodes/{path}` with `data`, optionally only at
    /// `expected_version` (0 = create if absent).
    pub async fn put_node(
        &self,
        node: u64,
        path: &str,
        data: &[u8],
        expected_version: Option<u64>,
    ) -> Reply<()> {
        let mut body = json!({"data": base64::engine::general_purpose::STANDARD.encode(data)});
        if let Some(v) = expected_version {
            body["expected_version"] = json!(v);
        }
        let req = self
            .http
            .put(self.url(node, &format!("/v1/nodes/{path}")))
            .json(&body);
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `GET /v1/cluster`.
    pub async fn cluster(&self, node: u64) -> Reply<ClusterView> {
        let client = match self.typed(node) {
            Ok(client) => client,
            Err(e) => return Reply::Fail(e),
        };
        Reply::of(client.cluster().await).map(|view| ClusterView {
            leader: view.leader_id,
            term: view.term,
        })
    }

    /// `GET /v1/cluster/members`: the membership as `node` knows it.
    pub async fn members(&self, node: u64) -> Reply<MembersView> {
        let client = match self.typed(node) {
            Ok(client) => client,
            Err(e) => return Reply::Fail(e),
        };
        Reply::of(client.membership().await).map(|answer| members_view(&answer.value))
    }

    /// `DELETE /v1/cluster/members/{id}` through `node` (which takes it to
    /// the leader): the membership after the change.
    pub async fn remove_member(&self, node: u64, id: u64) -> Reply<MembersView> {
        let req = self
            .http
            .delete(self.url(node, &format!("/v1/cluster/members/{id}")));
        // The leader commits two configurations (joint, then the new one).
        let timeout = self.timeout * 4;
        self.send(req, timeout)
            .await
            .and_then(|(_, body)| parse_members(&body))
    }

    /// `POST {path}` with a JSON `body` on a member's control endpoint (a
    /// disk fault, [`crate::member::fault`]).
    pub async fn inject(&self, node: u64, path: &str, body: Json) -> Reply<()> {
        let req = self.http.post(self.url(node, path)).json(&body);
        self.send(req, self.timeout).await.map(|_| ())
    }

    /// `GET /v1/health`: true on 200.
    pub async fn healthy(&self, node: u64) -> bool {
        let req = self.http.get(self.url(node, "/v1/health"));
        matches!(self.send(req, self.timeout).await, Reply::Ok(_))
    }
}

impl<T> Reply<T> {
    /// A typed client's answer, classified by the contract's retry
    /// classes as [`classify`] does a raw one: a request never delivered
    /// is `Fail` (`connect`), a definite refusal is `Fail`, anything else
    /// (a lost answer, an unknown code, an answer we cannot read) `Info`.
    fn of(result: raftlock_client::Result<T>) -> Reply<T> {
        let e = match result {
            Ok(value) => return Reply::Ok(value),
            Err(e) => e,
        };
        let message = e.message().to_string();
        match (&e, e.code()) {
            (ClientError::Unavailable(_), _) => Reply::Fail(ApiError::new("connect", message)),
            (_, Some(code)) if code.not_applied() => {
                Reply::Fail(ApiError::new(code.as_str(), message))
            }
            (_, Some(code)) => Reply::Info(ApiError::new(code.as_str(), message)),
            (ClientError::Rejected { code, .. }, None) => Reply::Info(ApiError::new(code, message)),
            (_, None) => Reply::Info(ApiError::new("bad_response", message)),
        }
    }

    fn from_transport(e: &reqwest::Error) -> Reply<T> {
        if e.is_connect() {
            // Never reached the server: certainly not applied.
            Reply::Fail(ApiError::new("connect", e.to_string()))
        } else if e.is_timeout() {
            Reply::Info(ApiError::new("http_timeout", e.to_string()))
        } else {
            Reply::Info(ApiError::new("transport", e.to_string()))
        }
    }

    fn map<U>(self, f: impl FnOnce(T) -> U) -> Reply<U> {
        match self {
            Reply::Ok(t) => Reply::Ok(f(t)),
            Reply::Fail(e) => Reply::Fail(e),
            Reply::Info(e) => Reply::Info(e),
        }
    }

    /// Maps an ok answer; an answer that cannot be read is `Info` (the
    /// request did take effect, but we cannot say with what result).
    fn and_then<U>(self, f: impl FnOnce(T) -> Result<U, ApiError>) -> Reply<U> {
        match self {
            Reply::Ok(t) => match f(t) {
                Ok(u) => Reply::Ok(u),
                Err(e) => Reply::Info(e),
            },
            Reply::Fail(e) => Reply::Fail(e),
            Reply::Info(e) => Reply::Info(e),
        }
    }
}

/// An error answer: `Fail` for codes that mean "not applied", `Info` for
/// `outcome_unknown` and anything the contract does not promise about.
fn classify<T>(status: u16, body: &Json) -> Reply<T> {
    let code = body
        .get("error")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let message = body
        .get("message")
        .and_then(Json::as_str)
        .map_or_else(|| format!("HTTP {status}"), str::to_string);
    let err = ApiError { code, message };
    // Definite refusals (the contract's `not_applied`) include those a
    // member answers before proposing when its disk failed or is full, it
    // is over its connection cap or an admission limit, or its data was
    // replaced: a write in flight when a disk failed is answered
    // `outcome_unknown` or `no_leader`, never these.
    if ErrorCode::parse(&err.code).is_some_and(ErrorCode::not_applied) {
        Reply::Fail(err)
    } else if err.code.is_empty() && (400..500).contains(&status) {
        // An error without the contract's body: still a refusal.
        Reply::Fail(ApiError::new(&format!("http_{status}"), err.message))
    } else {
        Reply::Info(err)
    }
}

/// The fields of a membership the harness uses.
fn members_view(view: &raftlock_api::cluster::Membership) -> MembersView {
    let mut voters: Vec<u64> = view
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    let mut members: Vec<u64> = view.members.iter().map(|m| m.id).collect();
    voters.sort_unstable();
    members.sort_unstable();
    MembersView {
        voters,
        members,
        joint: view.joint,
    }
}

fn parse_members(body: &Json) -> Result<MembersView, ApiError> {
    raftlock_api::cluster::Membership::deserialize(body)
        .map(|view| members_view(&view))
        .map_err(|e| ApiError::new("bad_response", format!("bad membership {body}: {e}")))
}

fn parse_node(body: &Json) -> Option<NodeData> {
    let data = body.get("data").and_then(Json::as_str)?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    let version = body.get("version").and_then(Json::as_u64)?;
    Some(NodeData { data, version })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_contract() {
        let r: Reply<()> = classify(503, &json!({"error": "no_leader", "message": "m"}));
        assert!(matches!(r, Reply::Fail(_)));
        let r: Reply<()> = classify(503, &json!({"error": "outcome_unknown", "message": "m"}));
        assert!(matches!(r, Reply::Info(_)));
        let r: Reply<()> = classify(500, &json!({"error": "internal", "message": "m"}));
        assert!(matches!(r, Reply::Info(_)));
        for code in [
            "storage_failed",
            "disk_full",
            "overloaded",
            "member_replaced",
        ] {
            let r: Reply<()> = classify(503, &json!({"error": code, "message": "m"}));
            assert!(matches!(r, Reply::Fail(_)), "{code}");
        }
        let r: Reply<()> = classify(409, &json!({"error": "not_holder", "message": "m"}));
        assert!(matches!(r, Reply::Fail(_)));
        let r: Reply<()> = classify(503, &json!({"error": "shutting_down", "message": "m"}));
        assert!(matches!(r, Reply::Info(_)));
        let r: Reply<()> = classify(409, &json!({"error": "a_new_code", "message": "m"}));
        assert!(matches!(r, Reply::Info(_)));
        let r: Reply<()> = classify(404, &Json::Null);
        assert_eq!(r.code(), Some("http_404"));
        assert!(matches!(r, Reply::Fail(_)));
    }

    #[test]
    fn typed_answers_are_classified_as_raw_ones() {
        let ok: Reply<u8> = Reply::of(Ok(1));
        assert_eq!(ok, Reply::Ok(1));
        let cases = [
            (ClientError::Unavailable("refused".into()), "connect", true),
            (ClientError::NoLeader("m".into()), "no_leader", true),
            (ClientError::NotFound("m".into()), "not_found", true),
            (
                ClientError::Rejected {
                    code: "storage_failed".into(),
                    message: "m".into(),
                },
                "storage_failed",
                true,
            ),
            (
                ClientError::OutcomeUnknown("m".into()),
                "outcome_unknown",
                false,
            ),
            (ClientError::ShuttingDown, "shutting_down", false),
            (ClientError::Internal("m".into()), "internal", false),
            (
                ClientError::Rejected {
                    code: "a_new_code".into(),
                    message: "m".into(),
                },
                "a_new_code",
                false,
            ),
            (ClientError::Protocol("m".into()), "bad_response", false),
        ];
        for (e, code, fail) in cases {
            let r: Reply<()> = Reply::of(Err(e));
            assert_eq!(r.code(), Some(code));
            assert_eq!(matches!(r, Reply::Fail(_)), fail, "{code}");
            if !fail {
                assert!(matches!(r, Reply::Info(_)), "{code}");
            }
        }
    }

    #[test]
    fn membership_bodies_decode() {
        let body = json!({"log_index": 9, "joint": false, "members": [
            {"id": 4, "api_addr": "a:1", "raft_addr": "a:2", "voter": false},
            {"id": 1, "api_addr": "b:1", "raft_addr": "b:2", "voter": true},
        ]});
        let view = parse_members(&body).unwrap();
        assert_eq!(view.voters, vec![1]);
        assert_eq!(view.members, vec![1, 4]);
        assert!(!view.joint);
        assert!(parse_members(&json!({"members": [{"id": 1}]})).is_err());
    }

    #[test]
    fn node_bodies_decode() {
        let n = parse_node(&json!({"path": "/x", "data": "MTI=", "version": 3})).unwrap();
        assert_eq!(n.data, b"12");
        assert_eq!(n.version, 3);
        assert!(parse_node(&json!({"data": "!!", "version": 1})).is_none());
    }
}
