//! JSON lines: one [`Event`] per line, the harness's native format.

use super::{Event, History, HistoryError};
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

impl History {
    /// Parses JSON lines. Blank lines are skipped; anything else that is not
    /// an event is an error naming the line, never a silent skip.
    pub fn read_jsonl(reader: impl BufRead) -> Result<Self, HistoryError> {
        let mut events = Vec::new();
        for (n, line) in reader.lines().enumerate() {
            let line = line.map_err(|source| HistoryError::Io {
                path: "<reader>".into(),
                source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let event: Event =
                serde_json::from_str(&line).map_err(|source| HistoryError::Parse {
                    line: n + 1,
                    source,
                })?;
            events.push(event);
        }
        History::from_events(events)
    }

    /// Reads a `.jsonl` history file.
    pub fn load_jsonl(path: &Path) -> Result<Self, HistoryError> {
        let file = std::fs::File::open(path).map_err(|source| HistoryError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::read_jsonl(std::io::BufReader::new(file)).map_err(|e| match e {
            HistoryError::Io { source, .. } => HistoryError::Io {
                path: path.to_path_buf(),
                source,
            },
            other => other,
        })
    }

    /// Writes one JSON object per line.
    pub fn write_jsonl(&self, writer: impl Write) -> std::io::Result<()> {
        let mut w = BufWriter::new(writer);
        for e in self.events() {
            serde_json::to_writer(&mut w, e)?;
            w.write_all(b"\n")?;
        }
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventType, Process, F};

    #[test]
    fn round_trip() {
        let mut h = History::new();
        h.push(Event::new(Process::Client(0), EventType::Invoke, F::Write, 1).with_key("x"));
        h.push(
            Event::new(Process::Client(0), EventType::Ok, F::Write, 1)
                .with_key("x")
                .at(10),
        );
        h.push(Event::new(Process::Nemesis, EventType::Info, F::Start, "partition").at(11));
        let mut buf = Vec::new();
        h.write_jsonl(&mut buf).unwrap();
        let back = History::read_jsonl(&buf[..]).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn bad_line_is_reported_with_its_number() {
        let text = "{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"time\":0}\n\nnot json\n";
        match History::read_jsonl(text.as_bytes()) {
            Err(HistoryError::Parse { line, .. }) => assert_eq!(line, 3),
            other => panic!("expected parse error, got {other:?}"),
        }
    }

    #[test]
    fn decreasing_index_is_rejected() {
        let text = "{\"index\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"time\":0}\n\
                    {\"index\":0,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"time\":1}\n";
        assert!(matches!(
            History::read_jsonl(text.as_bytes()),
            Err(HistoryError::IndexOrder { .. })
        ));
    }
}
