//! Membership requests over the public API (docs/api.md, "Cluster"), and
//! the second half of joining a running cluster.
//!
//! A member started with [`Node::join_with_listener`] never founds a
//! cluster: it waits until the leader adds it. [`ask_to_join`] is what it
//! does next: unless it already votes (a restart), it asks the cluster,
//! through any member's API, to add it (learner, caught up, then voter)
//! and returns once the change has committed. `raftlock serve --join` and
//! every other process that embeds a joining member (the Jepsen harness's
//! member processes) go through this one function; `raftlock member`
//! sends its requests through [`send_membership_request`].

use std::time::Duration;

use serde_json::{json, Value};

use crate::{Node, NodeId};

/// A request to `/v1/cluster/members`.
#[derive(Debug, Clone)]
pub enum MembershipRequest {
    /// `GET`: the membership.
    List,
    /// `POST`: add member `id` (learner until caught up, then voter).
    Add {
        /// The new member's id.
        id: NodeId,
        /// Its client API address.
        api_addr: String,
        /// Its Raft address, which the leader dials.
        raft_addr: String,
    },
    /// `DELETE /{id}`: remove a member (the leader too: it hands over).
    Remove(NodeId),
}

/// A membership request that did not succeed: the last endpoint's answer
/// (`http://…: 409 Conflict code: message`) or why none answered.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MembershipRequestError(String);

/// How long [`send_membership_request`] retries transient refusals and
/// unreachable endpoints.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// Between rounds of retries.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// Error codes worth retrying: nothing changed, and the cause passes or
/// another member can serve (`member_unreachable`: the leader could not
/// reach the new member yet, it may still be starting).
fn transient(code: &str) -> bool {
    raftlock_api::ErrorCode::parse(code).is_some_and(|c| c.retry_later() || c.retry_elsewhere())
}

/// Sends `request` to each endpoint (`http://host:port`) in turn until one
/// answers for good, and returns the answer's JSON (the membership view).
/// Transient refusals and unreachable endpoints are retried for up to a
/// minute. `http` carries the caller's TLS settings, token and timeout (an
/// add waits at the leader while the new member catches up, up to about a
/// minute).
pub async fn send_membership_request(
    http: &reqwest::Client,
    endpoints: &[String],
    request: &MembershipRequest,
) -> Result<Value, MembershipRequestError> {
    if endpoints.is_empty() {
        return Err(MembershipRequestError("no endpoints given".into()));
    }
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        let mut last_error = String::from("no endpoint answered");
        for endpoint in endpoints {
            let base = endpoint.trim_end_matches('/');
            let builder = match request {
                MembershipRequest::List => http.get(format!("{base}/v1/cluster/members")),
                MembershipRequest::Add {
                    id,
                    api_addr,
                    raft_addr,
                } => http
                    .post(format!("{base}/v1/cluster/members"))
                    .json(&json!({"id": id, "api_addr": api_addr, "raft_addr": raft_addr})),
                MembershipRequest::Remove(id) => {
                    http.delete(format!("{base}/v1/cluster/members/{id}"))
                }
            };
            let response = match builder.send().await {
                Ok(response) => response,
                Err(e) => {
                    last_error = format!("{base}: {e}");
                    continue;
                }
            };
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status.is_success() {
                return Ok(body);
            }
            let code = body["error"].as_str().unwrap_or("");
            let message = body["message"].as_str().unwrap_or("");
            last_error = format!("{base}: {status} {code}: {message}");
            if !transient(code) {
                return Err(MembershipRequestError(last_error));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(MembershipRequestError(last_error));
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// How [`ask_to_join`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// The member already voted (a restart): nothing was asked.
    AlreadyVoter,
    /// The cluster added it; it is a voter now.
    Added,
}

/// Asks the cluster at `endpoints` (API URLs of running members) to add
/// `node`, a member started with [`Node::join_with_listener`], unless it
/// already votes. Returns once it is a voter: the leader first brings it
/// up to date over the Raft port the node already serves. `http` should
/// allow about two minutes per request.
pub async fn ask_to_join(
    node: &Node,
    http: &reqwest::Client,
    endpoints: &[String],
) -> Result<Joined, MembershipRequestError> {
    let id = node.id();
    if node.membership().voters().contains(&id) {
        tracing::info!(id, "already a voter; not asking to join");
        return Ok(Joined::AlreadyVoter);
    }
    tracing::info!(id, ?endpoints, "asking the cluster to add this member");
    let me = node.config().me();
    let request = MembershipRequest::Add {
        id,
        api_addr: me.api_addr.clone(),
        raft_addr: me.raft_addr.clone(),
    };
    send_membership_request(http, endpoints, &request)
        .await
        .map_err(|e| {
            MembershipRequestError(format!("member {id} could not join the cluster: {e}"))
        })?;
    tracing::info!(id, "joined the cluster as a voter");
    Ok(Joined::Added)
}
