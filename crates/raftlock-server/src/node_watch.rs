//! `GET /v1/nodes/{path}?watch=true&since_revision=R`: Server-Sent Events,
//! one per change to the node or its children, in revision order
//! (docs/api.md, Nodes).
//!
//! The node's change history (`raftlock_node::ChangeHistory`) decides
//! what changed; this module filters and frames it. A stream subscribes
//! to new revisions before it reads the history, so a change recorded in
//! between is signalled, never missed. A `since_revision` older than the
//! history kept gets one `compacted` event, and the stream ends: read
//! afresh and watch again from the read's revision. Ends on graceful
//! shutdown too.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use futures::stream::{self, Stream};
use raftlock_core::path::{parent_of, validate_node_path};
use raftlock_node::{Change, Consistency};
use serde::Serialize;
use tokio::sync::watch;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// One event's data. `node` is the node after a `put`; absent for a
/// `delete`. `ephemeral_owner` is shown to callers that see every session
/// (no tokens, or a cluster admin), `null` otherwise.
#[derive(Debug, Serialize)]
struct ChangeBody {
    revision: u64,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<NodeView>,
}

#[derive(Debug, Serialize)]
struct NodeView {
    data: String,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<String>,
}

fn event(change: Change, caller: &Caller) -> Event {
    let kind = if change.node.is_some() {
        "put"
    } else {
        "delete"
    };
    let body = ChangeBody {
        revision: change.revision,
        node: change.node.map(|n| NodeView {
            data: BASE64.encode(&n.data),
            version: n.version,
            create_revision: n.create_revision,
            mod_revision: n.mod_revision,
            ephemeral_owner: n
                .ephemeral_owner
                .filter(|_| caller.sees_every_session())
                .map(|s| s.to_string()),
        }),
        path: change.path,
    };
    let data = serde_json::to_string(&body).unwrap_or_else(|_| "{}".into());
    Event::default().event(kind).data(data)
}

struct Watching {
    app: AppState,
    caller: Caller,
    path: String,
    /// Changes up to this revision were sent (or did not match).
    sent: u64,
    latest: watch::Receiver<u64>,
    ready: VecDeque<Event>,
    done: bool,
}

impl Watching {
    fn matches(&self, changed: &str) -> bool {
        changed == self.path || (changed != "/" && parent_of(changed) == self.path)
    }

    /// Queues what the history holds after `sent`; false when compacted.
    fn fill(&mut self) {
        let history = self.app.node.history();
        match history.since(self.sent, |p| self.matches(p)) {
            Ok(changes) => {
                for change in changes {
                    self.sent = self.sent.max(change.revision);
                    self.ready.push_back(event(change, &self.caller));
                }
            }
            Err(compacted) => {
                let data = serde_json::json!({
                    "since_revision": self.sent,
                    "floor": compacted.floor,
                });
                self.ready
                    .push_back(Event::default().event("compacted").data(data.to_string()));
                self.done = true;
            }
        }
    }
}

fn events(mut watching: Watching) -> impl Stream<Item = Result<Event, Infallible>> {
    // Subscribed (in `watch`) before this first read of the history.
    watching.fill();
    stream::unfold(watching, |mut w| async move {
        loop {
            if let Some(event) = w.ready.pop_front() {
                return Some((Ok(event), w));
            }
            if w.done {
                return None;
            }
            tokio::select! {
                changed = w.latest.changed() => changed.ok()?,
                _ = w.app.stopping() => return None,
            }
            w.fill();
        }
    })
}

/// Starts a watch of `path` after `since` (absent: this replica's
/// current revision, read linearizably).
pub(crate) async fn watch(
    app: AppState,
    caller: Caller,
    path: String,
    since: Option<u64>,
) -> Result<Response, ApiError> {
    validate_node_path(&path)?;
    let latest = app.node.history().subscribe();
    let sent = match since {
        Some(revision) => revision,
        None => app.node.revision(Consistency::Linearizable).await?,
    };
    let keepalive = Duration::from_millis(app.config.sse_keepalive_ms.max(1));
    let watching = Watching {
        app,
        caller,
        path,
        sent,
        latest,
        ready: VecDeque::new(),
        done: false,
    };
    Ok(Sse::new(events(watching))
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response())
}
