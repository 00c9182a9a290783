//! `GET /v1/elections/{name}/observe`: Server-Sent Events.
//!
//! One `leader` event at connect (a linearizable read), then one per
//! change of the election's leader or value as this replica applies the
//! log. The replica's effect stream says which commands touched the
//! election; the event carries the state read after that, compared with
//! the last event sent, so only real changes are sent (changes applied in
//! one burst may arrive as one event showing the latest state). A lagging
//! subscriber, and a periodic resync (which also covers a snapshot
//! install, which publishes no effects), re-read the state the same way.
//! The stream ends on graceful shutdown.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use raftlock_core::path::validate_lock_name;
use raftlock_core::{Effects, QueueKind};
use raftlock_node::Consistency;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{interval_at, Instant, Interval, MissedTickBehavior};

use crate::auth::Caller;
use crate::elections::ElectionBody;
use crate::error::ApiError;
use crate::state::AppState;

/// How often an observer re-reads the state without being told to.
const RESYNC: Duration = Duration::from_secs(5);

struct Observer {
    app: AppState,
    /// Who watches: decides whether events show the leader's session id.
    caller: Caller,
    name: String,
    /// `/elections/{name}/`: the queue's nodes are its direct children.
    children_prefix: String,
    changes: broadcast::Receiver<Arc<Effects>>,
    resync: Interval,
    /// The last state sent; `None` before the first event.
    last: Option<ElectionBody>,
}

impl Observer {
    fn touches(&self, effects: &Effects) -> bool {
        let mine = |path: &str| {
            path.strip_prefix(&self.children_prefix)
                .is_some_and(|child| !child.contains('/'))
        };
        effects.deleted.iter().any(|d| mine(&d.path))
            || effects.granted.iter().any(|p| mine(p))
            || effects.written.iter().any(|p| mine(p))
    }

    /// Waits for the next change worth an event; `None` ends the stream.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            let recheck = tokio::select! {
                received = self.changes.recv() => match received {
                    Ok(effects) => self.touches(&effects),
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return None,
                },
                _ = self.resync.tick() => true,
                _ = self.app.stopping() => return None,
            };
            if !recheck {
                continue;
            }
            // This replica applied the change before publishing it.
            let Ok(view) = self
                .app
                .node
                .read(Consistency::Stale, |s| {
                    ElectionBody::of(s, &self.name, &self.caller)
                })
                .await
            else {
                continue;
            };
            if self.last.as_ref() != Some(&view) {
                let event = event(&view);
                self.last = Some(view);
                return Some((Ok(event), self));
            }
        }
    }
}

fn event(view: &ElectionBody) -> Event {
    let data = serde_json::to_string(view).unwrap_or_else(|_| "{}".into());
    Event::default().event("leader").data(data)
}

fn events(
    first: ElectionBody,
    observer: Observer,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let head = stream::once(async move { Ok(event(&first)) });
    let tail = stream::unfold(observer, Observer::next);
    futures::StreamExt::chain(head, tail)
}

/// Starts an observe stream (the election name is validated first, so a
/// bad name is a plain JSON `bad_request`, not a stream).
pub(crate) async fn observe(
    app: AppState,
    caller: Caller,
    name: String,
) -> Result<Response, ApiError> {
    validate_lock_name(&name)?;
    // Subscribe before the first read, so no change falls in between.
    let changes = app.node.subscribe();
    let first = app
        .node
        .read(Consistency::Linearizable, |s| {
            ElectionBody::of(s, &name, &caller)
        })
        .await?;
    let mut resync = interval_at(Instant::now() + RESYNC, RESYNC);
    resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let keepalive = Duration::from_millis(app.config.sse_keepalive_ms.max(1));
    let observer = Observer {
        children_prefix: format!("{}/", QueueKind::Election.queue_path(&name)),
        app,
        caller,
        name,
        changes,
        resync,
        last: Some(first.clone()),
    };
    Ok(Sse::new(events(first, observer))
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response())
}
