//! `GET /v1/elections/{name}/observe`: Server-Sent Events.
//!
//! One `leader` event at connect (a linearizable read), then one per
//! change of the election's leader or value as this replica applies the
//! log: the node's election observer ([`raftlock_node::Node::observe_election`])
//! decides when, this module what an event shows (the caller's view: another
//! principal's session id is hidden) and how it is framed. The stream
//! ends on graceful shutdown.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use raftlock_core::path::validate_lock_name;
use raftlock_node::ElectionChanges;

use crate::auth::Caller;
use raftlock_api::election::ElectionView;

use crate::error::ApiError;
use crate::redact::Redact;
use crate::state::AppState;

fn event(view: &ElectionView) -> Event {
    let data = serde_json::to_string(view).unwrap_or_else(|_| "{}".into());
    Event::default().event("leader").data(data)
}

fn events(
    app: AppState,
    caller: Caller,
    first: ElectionView,
    changes: ElectionChanges,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let head = stream::once(async move { Ok(event(&first)) });
    let tail = stream::unfold(changes, move |mut changes| {
        let app = app.clone();
        let caller = caller.clone();
        async move {
            let view = tokio::select! {
                view = changes.next() => view?,
                _ = app.stopping() => return None,
            };
            Some((Ok(event(&view.redact(&caller))), changes))
        }
    });
    futures::StreamExt::chain(head, tail)
}

/// Starts an observe stream (the election name is validated, and the
/// first state read, before: a bad name or no leader is a plain JSON
/// error, not a stream).
pub(crate) async fn observe(
    app: AppState,
    caller: Caller,
    name: String,
) -> Result<Response, ApiError> {
    validate_lock_name(&name)?;
    let (first, changes) = app.node.observe_election(&name).await?;
    let keepalive = Duration::from_millis(app.config.sse_keepalive_ms.max(1));
    let first = first.redact(&caller);
    Ok(Sse::new(events(app, caller, first, changes))
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response())
}
