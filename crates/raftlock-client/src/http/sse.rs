//! `GET /v1/elections/{name}/observe`: a Server-Sent Events stream, parsed
//! by eventsource-stream, reconnecting (with failover) when it drops. Each
//! connect starts with the current state, so a reconnect misses nothing
//! that matters: the stream yields leader *states*, deduplicated.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStream, EventStreamError, Eventsource};
use futures::{stream, Stream, StreamExt};

use super::wire::{self, parse};
use super::HttpClient;
use crate::client::LeaderStream;
use crate::error::{ClientError, Result};
use crate::types::{checked, Leader};

/// One connection's body as a stream of chunks. The error is why the
/// connection is no longer usable (a transport error, or silence past the
/// idle timeout); the event parser hands it back untouched.
pub(super) type Chunks = Pin<Box<dyn Stream<Item = std::result::Result<Bytes, String>> + Send>>;

/// The body of `response`, each chunk awaited at most `idle`. The timeout
/// sits on chunks, not on events: the server's keep-alive comments are
/// chunks but never events, and they are what proves the stream alive.
pub(super) fn chunks(response: reqwest::Response, idle: Duration) -> Chunks {
    Box::pin(stream::unfold(Some(response), move |response| async move {
        let mut response = response?;
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(Some(bytes))) => Some((Ok(bytes), Some(response))),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => Some((Err(e.to_string()), None)),
            Err(_) => Some((Err("the stream went silent".to_string()), None)),
        }
    }))
}

struct State {
    client: HttpClient,
    path: String,
    /// The current connection's events (parsed by eventsource-stream).
    events: Option<EventStream<Chunks>>,
    /// The last state yielded, to skip repeats (every connect resends it).
    last: Option<Option<Leader>>,
    /// Connections in a row that ended before delivering any event.
    drops: u32,
    done: bool,
}

/// The leader stream of election `name` over SSE.
pub(crate) fn observe(client: HttpClient, name: String) -> LeaderStream {
    let path = checked(&name).map(|n| format!("/v1/elections/{n}/observe"));
    let state = State {
        client,
        path: path.clone().unwrap_or_default(),
        events: None,
        last: None,
        drops: 0,
        done: false,
    };
    if let Err(e) = path {
        return Box::pin(stream::once(async move { Err(e) }));
    }
    Box::pin(stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        match next(&mut st).await {
            Ok(leader) => Some((Ok(leader), st)),
            Err(e) => {
                st.done = true;
                Some((Err(e), st))
            }
        }
    }))
}

/// Reads until the leader state changes; reconnects when the connection
/// drops, and gives up once the retry policy's attempts are spent.
async fn next(st: &mut State) -> Result<Option<Leader>> {
    let config = st.client.config().clone();
    loop {
        let Some(events) = st.events.as_mut() else {
            let response = st.client.open_stream(&st.path).await?;
            st.events = Some(chunks(response, config.observe_idle_timeout).eventsource());
            continue;
        };
        let why = match events.next().await {
            Some(Ok(event)) => {
                if event.event != "leader" {
                    continue;
                }
                st.drops = 0;
                let leader = wire::leader(parse(event.data.as_bytes())?)?;
                if st.last.as_ref() != Some(&leader) {
                    st.last = Some(leader.clone());
                    return Ok(leader);
                }
                continue;
            }
            Some(Err(EventStreamError::Transport(why))) => why,
            // Not UTF-8 or not SSE: this connection is unusable; try another.
            Some(Err(e)) => e.to_string(),
            None => "the server closed the stream".to_string(),
        };
        tracing::debug!(path = st.path, "observe reconnects: {why}");
        st.events = None;
        st.drops += 1;
        if st.drops >= config.retry.attempts() {
            return Err(ClientError::Unavailable(format!("observe: {why}")));
        }
        tokio::time::sleep(config.retry.backoff(st.drops)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The subset of SSE our server writes, split across chunks the way a
    /// network may split it, parsed by the crate as `next` relies on.
    #[tokio::test]
    async fn parses_events_split_across_chunks() {
        let parts: [&'static [u8]; 2] = [
            b": keep-alive\n\nevent: leader\r\ndata: {\"a\":",
            b"1}\ndata: x\n\nevent: other\ndata:y\n\n",
        ];
        let chunks = stream::iter(parts.map(|p| Ok::<_, String>(Bytes::from_static(p))));
        let events: Vec<(String, String)> = chunks
            .eventsource()
            .map(|e| {
                let e = e.expect("event");
                (e.event, e.data)
            })
            .collect()
            .await;
        assert_eq!(
            events,
            [
                ("leader".to_string(), "{\"a\":1}\nx".to_string()),
                ("other".to_string(), "y".to_string()),
            ]
        );
    }

    /// A transport error reaches `next` as itself, so it can reconnect.
    #[tokio::test]
    async fn transport_errors_pass_through() {
        let chunks = stream::iter([Err::<Bytes, _>("reset".to_string())]);
        let first = chunks.eventsource().next().await.expect("an item");
        assert!(
            matches!(first, Err(EventStreamError::Transport(ref why)) if why == "reset"),
            "{first:?}"
        );
    }
}
