//! Reads (and the few writes) of operator tools: `raftlock status`,
//! `locks`, `lock-info`, `fencing-check`, `session`, `node`, `election
//! show` and `member list`. Typed, with the client's failover, and each
//! with the body as the server sent it ([`Answered`]): a tool's `--json`
//! prints the server's own answer, so scripts see exactly the shape
//! docs/api.md and `GET /v1/openapi.json` describe, fields this client
//! does not know included.

use reqwest::Method;
use serde::de::DeserializeOwned;

use raftlock_api::cluster::Membership;
use raftlock_api::election::ElectionView;
use raftlock_api::lock::{FencingAnswer, FencingBody, LockBody};
use raftlock_api::node::{Children, NodeView};
use raftlock_api::session::{SessionList, SessionView};
use raftlock_api::shared::{RwLockView, SemaphoreView};

use super::nodes::{node_url, PutBody};
use super::wire::parse;
use super::{Call, HttpClient};
use crate::error::Result;
use crate::types::{checked, SessionId};

/// A typed answer and the body it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered<T> {
    /// The answer, typed.
    pub value: T,
    /// The body exactly as received (empty for an empty body).
    pub body: Vec<u8>,
}

impl<T> Answered<T> {
    /// Converts the typed value, keeping the body.
    pub fn try_map<U>(self, f: impl FnOnce(T) -> Result<U>) -> Result<Answered<U>> {
        Ok(Answered {
            value: f(self.value)?,
            body: self.body,
        })
    }
}

/// How [`HttpClient::write_node`] writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeWrite {
    /// Append a zero-padded counter to the name (`/queue/item-` →
    /// `/queue/item-0000000001`).
    pub sequential: bool,
    /// Write only at this version (0: only if the node does not exist).
    pub expected_version: Option<u64>,
}

/// `/a/b` → `/v1/nodes/a/b`; the root → `/v1/nodes`.
fn node_route(path: &str) -> Result<String> {
    node_url(path)
}

impl HttpClient {
    /// Runs `call` with failover and parses its answer as `T`.
    pub(crate) async fn answered<T: DeserializeOwned>(&self, call: Call) -> Result<Answered<T>> {
        let body = self.call(call).await?;
        Ok(Answered {
            value: parse(&body)?,
            body,
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: String) -> Result<Answered<T>> {
        self.answered(Call::new(Method::GET, path)).await
    }

    /// The Raft membership (`GET /v1/cluster/members`): voters and
    /// learners with their addresses.
    pub async fn membership(&self) -> Result<Answered<Membership>> {
        self.get("/v1/cluster/members".into()).await
    }

    /// Up to `limit` live sessions (`GET /v1/sessions`); with bearer
    /// tokens, those the token may see.
    pub async fn sessions(&self, limit: usize) -> Result<Answered<SessionList>> {
        self.get(format!("/v1/sessions?limit={limit}")).await
    }

    /// One session: owner, TTL and the nodes it holds.
    pub async fn session(&self, id: SessionId) -> Result<Answered<SessionView>> {
        self.get(format!("/v1/sessions/{id}")).await
    }

    /// A node of the tree (`path` starts with `/`), its data base64.
    pub async fn node(&self, path: &str) -> Result<Answered<NodeView>> {
        self.get(node_route(path)?).await
    }

    /// A node's children (the top level for `/`).
    pub async fn children(&self, path: &str) -> Result<Answered<Children>> {
        self.get(format!("{}?children=true", node_route(path)?))
            .await
    }

    /// Creates or updates a persistent node. Never resent once it may
    /// have been applied: a second write could change the answer (the
    /// version, a sequential name).
    pub async fn write_node(
        &self,
        path: &str,
        data: &[u8],
        how: NodeWrite,
    ) -> Result<Answered<NodeView>> {
        let body = PutBody::new(data, how.sequential, how.expected_version);
        let call = Call::new(Method::PUT, node_route(path)?).json(&body).once();
        self.answered(call).await
    }

    /// An election and its leader.
    pub async fn election(&self, name: &str) -> Result<Answered<ElectionView>> {
        self.get(format!("/v1/elections/{}", checked(name)?)).await
    }

    /// A lock's holder and waiters, as the API spells them.
    pub async fn lock_view(&self, name: &str) -> Result<Answered<LockBody>> {
        self.get(format!("/v1/locks/{}", checked(name)?)).await
    }

    /// A read-write lock's holders and waiters.
    pub async fn rwlock(&self, name: &str) -> Result<Answered<RwLockView>> {
        self.get(format!("/v1/rwlocks/{}", checked(name)?)).await
    }

    /// A semaphore's permits, holders and waiters.
    pub async fn semaphore(&self, name: &str) -> Result<Answered<SemaphoreView>> {
        self.get(format!("/v1/semaphores/{}", checked(name)?)).await
    }

    /// Whether `token` is the current fencing token of lock `name`.
    pub async fn fencing(&self, name: &str, token: u64) -> Result<Answered<FencingAnswer>> {
        let body = FencingBody {
            lock: checked(name)?.to_string(),
            fencing_token: token,
        };
        let call = Call::new(Method::POST, "/v1/fencing/check".into()).json(&body);
        self.answered(call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_paths_are_checked_and_the_root_has_its_own_route() {
        assert_eq!(node_route("/").expect("root"), "/v1/nodes");
        assert_eq!(node_route("/a/b").expect("path"), "/v1/nodes/a/b");
        assert!(node_route("a/b").is_err());
        assert!(node_route("/a/../b").is_err());
        // Characters a URL gives meaning to are escaped, not refused.
        assert_eq!(
            node_route("/a?children=true").expect("path"),
            "/v1/nodes/a%3Fchildren%3Dtrue"
        );
        assert_eq!(
            node_route("/app/my lock_é").expect("path"),
            "/v1/nodes/app/my%20lock_%C3%A9"
        );
    }
}
