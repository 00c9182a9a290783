//! `GET /v1/elections/{name}/observe`: a Server-Sent Events stream read
//! chunk by chunk, reconnecting (with failover) when it drops. Each
//! connect starts with the current state, so a reconnect misses nothing
//! that matters: the stream yields leader *states*, deduplicated.

use futures::stream;

use super::wire::{self, parse};
use super::HttpClient;
use crate::client::LeaderStream;
use crate::error::{ClientError, Result};
use crate::types::{checked, Leader};

/// One dispatched SSE event.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Event {
    pub name: String,
    pub data: String,
}

/// Incremental SSE parser (the subset of the WHATWG rules a server of
/// ours produces: `event`, `data`, comments, `\n` or `\r\n` lines).
#[derive(Default)]
pub(super) struct Parser {
    buffer: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
}

impl Parser {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete event, if the buffer holds one.
    pub fn next_event(&mut self) -> Option<Event> {
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    let name = self.name.take().unwrap_or_else(|| "message".into());
                    return Some(Event { name, data });
                }
                self.name = None;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.name = Some(value.to_string()),
                "data" => match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                },
                // Comments (keep-alives), `id`, `retry`: nothing to do.
                _ => {}
            }
        }
        None
    }
}

struct State {
    client: HttpClient,
    path: String,
    response: Option<reqwest::Response>,
    parser: Parser,
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
        response: None,
        parser: Parser::default(),
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
        while let Some(event) = st.parser.next_event() {
            if event.name != "leader" {
                continue;
            }
            st.drops = 0;
            let leader = parse::<wire::ElectionBody>(event.data.as_bytes())?.into_leader()?;
            if st.last.as_ref() != Some(&leader) {
                st.last = Some(leader.clone());
                return Ok(leader);
            }
        }
        let Some(response) = st.response.as_mut() else {
            st.response = Some(st.client.open_stream(&st.path).await?);
            st.parser = Parser::default();
            continue;
        };
        match tokio::time::timeout(config.observe_idle_timeout, response.chunk()).await {
            Ok(Ok(Some(bytes))) => st.parser.push(&bytes),
            ended => {
                let why = match ended {
                    Ok(Ok(_)) => "the server closed the stream".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "the stream went silent".to_string(),
                };
                tracing::debug!(path = st.path, "observe reconnects: {why}");
                st.response = None;
                st.drops += 1;
                if st.drops >= config.retry.attempts() {
                    return Err(ClientError::Unavailable(format!("observe: {why}")));
                }
                tokio::time::sleep(config.retry.backoff(st.drops)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_split_across_chunks() {
        let mut p = Parser::default();
        p.push(b": keep-alive\n\nevent: leader\r\ndata: {\"a\":");
        assert_eq!(p.next_event(), None);
        p.push(b"1}\ndata: x\n\nevent: other\ndata:y\n\n");
        let first = p.next_event().expect("first event");
        assert_eq!(first.name, "leader");
        assert_eq!(first.data, "{\"a\":1}\nx");
        let second = p.next_event().expect("second event");
        assert_eq!((second.name.as_str(), second.data.as_str()), ("other", "y"));
        assert_eq!(p.next_event(), None);
    }
}
