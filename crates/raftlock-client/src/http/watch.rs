//! `GET /v1/nodes/{path}?watch=true`: a node watch as a stream of
//! changes, reconnecting (with failover) from the last revision it
//! yielded, so a dropped connection loses nothing (docs/api.md, Nodes).

use std::collections::BTreeSet;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use futures::stream;
use futures::StreamExt;
use reqwest::Method;
use serde::Deserialize;

use eventsource_stream::{EventStream, EventStreamError, Eventsource};

use super::nodes::node_url;
use super::sse::{chunks, Chunks};
use super::wire::parse;
use super::{Call, HttpClient};
use crate::error::{ClientError, Result};
use crate::watch::{NodeData, NodeWatch, WatchEvent};

#[derive(Deserialize)]
struct NodeBody {
    data: String,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
}

impl NodeBody {
    fn into_data(self) -> Result<NodeData> {
        Ok(NodeData {
            data: BASE64
                .decode(&self.data)
                .map_err(|e| ClientError::Protocol(format!("node data is not base64: {e}")))?,
            version: self.version,
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
        })
    }
}

#[derive(Deserialize)]
struct ChangeBody {
    revision: u64,
    path: String,
    node: Option<NodeBody>,
}

#[derive(Deserialize)]
struct CompactedBody {
    floor: u64,
}

struct State {
    client: HttpClient,
    /// The watched node's URL path (`/v1/nodes/…`, percent-encoded).
    url: String,
    /// The current connection's events (parsed by eventsource-stream).
    events: Option<EventStream<Chunks>>,
    /// The newest revision yielded, and the paths yielded at it: a
    /// reconnect resumes after the one before, skipping these.
    revision: u64,
    at_revision: BTreeSet<String>,
    drops: u32,
    done: bool,
}

impl HttpClient {
    /// The node at tree path `path` and the revision the read saw (pass
    /// it to [`watch`](Self::watch) to miss no later change).
    pub async fn read_node(&self, path: &str) -> Result<(NodeData, u64)> {
        let url = node_url(path)?;
        let (body, revision) = self.call_with_revision(Call::new(Method::GET, url)).await?;
        Ok((parse::<NodeBody>(&body)?.into_data()?, revision))
    }

    /// Changes of the node at `path` and of its direct children after
    /// `since_revision` (`None`: from now), in revision order. Lazy:
    /// nothing is sent until polled. On a dropped connection it
    /// reconnects (to any member) from the last revision it yielded;
    /// it ends after [`WatchEvent::Compacted`] or an error it could not
    /// recover from (the last item).
    pub fn watch(&self, path: &str, since_revision: Option<u64>) -> NodeWatch {
        let url = match node_url(path) {
            Ok(url) => url,
            Err(e) => return Box::pin(stream::once(async move { Err(e) })),
        };
        let client = self.clone();
        let start = stream::once(async move {
            let revision = match since_revision {
                Some(r) => r,
                None => client.read_node("/").await.map(|(_, r)| r)?,
            };
            Ok(State {
                client,
                url,
                events: None,
                revision,
                at_revision: BTreeSet::new(),
                drops: 0,
                done: false,
            })
        });
        Box::pin(start.flat_map(|started: Result<State>| {
            match started {
                Err(e) => stream::once(async move { Err(e) }).boxed(),
                Ok(state) => stream::unfold(state, |mut st| async move {
                    if st.done {
                        return None;
                    }
                    let item = next(&mut st).await;
                    // A compaction or an error is the last item.
                    if !matches!(item, Ok(WatchEvent::Put { .. } | WatchEvent::Delete { .. })) {
                        st.done = true;
                    }
                    Some((item, st))
                })
                .boxed(),
            }
        }))
    }
}

/// Reads until the next new change; reconnects when the connection drops.
async fn next(st: &mut State) -> Result<WatchEvent> {
    let config = st.client.config().clone();
    loop {
        let Some(events) = st.events.as_mut() else {
            // Resume after the revision before the last one yielded: the
            // rest of that revision's changes may not have arrived yet.
            let since = if st.at_revision.is_empty() {
                st.revision
            } else {
                st.revision.saturating_sub(1)
            };
            let url = format!("{}?watch=true&since_revision={since}", st.url);
            let response = st.client.open_stream(&url).await?;
            st.events = Some(chunks(response, config.observe_idle_timeout).eventsource());
            continue;
        };
        let why = match events.next().await {
            Some(Ok(event)) => {
                st.drops = 0;
                match event.event.as_str() {
                    "put" | "delete" => {
                        let change = parse::<ChangeBody>(event.data.as_bytes())?;
                        if change.revision < st.revision
                            || (change.revision == st.revision
                                && st.at_revision.contains(&change.path))
                        {
                            continue;
                        }
                        if change.revision > st.revision {
                            st.revision = change.revision;
                            st.at_revision.clear();
                        }
                        st.at_revision.insert(change.path.clone());
                        return Ok(match change.node {
                            Some(node) => WatchEvent::Put {
                                revision: change.revision,
                                path: change.path,
                                node: node.into_data()?,
                            },
                            None => WatchEvent::Delete {
                                revision: change.revision,
                                path: change.path,
                            },
                        });
                    }
                    "compacted" => {
                        let body = parse::<CompactedBody>(event.data.as_bytes())?;
                        return Ok(WatchEvent::Compacted { floor: body.floor });
                    }
                    _ => continue,
                }
            }
            Some(Err(EventStreamError::Transport(why))) => why,
            // Not UTF-8 or not SSE: this connection is unusable; try another.
            Some(Err(e)) => e.to_string(),
            None => "the server closed the stream".to_string(),
        };
        tracing::debug!(url = st.url, "watch reconnects: {why}");
        st.events = None;
        st.drops += 1;
        if st.drops >= config.retry.attempts() {
            return Err(ClientError::Unavailable(format!("watch: {why}")));
        }
        tokio::time::sleep(config.retry.backoff(st.drops)).await;
    }
}
