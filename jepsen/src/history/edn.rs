//! Jepsen EDN output (`history.edn`), so Jepsen's own tools can read a run.
//!
//! One map per line, e.g.
//! `{:index 0, :time 123, :type :invoke, :process 3, :f :acquire, :value nil}`.
//! The nemesis is `:process :nemesis`, as in Jepsen.

use super::{Event, History, Process, Value};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};

impl History {
    /// Writes the history as EDN, one event map per line.
    pub fn write_edn(&self, writer: impl Write) -> std::io::Result<()> {
        let mut w = BufWriter::new(writer);
        for e in self.events() {
            writeln!(w, "{}", event_to_edn(e))?;
        }
        w.flush()
    }
}

/// Renders one event as an EDN map.
pub fn event_to_edn(e: &Event) -> String {
    let mut s = String::with_capacity(96);
    let process = match e.process {
        Process::Client(p) => p.to_string(),
        Process::Nemesis => ":nemesis".to_string(),
    };
    let _ = write!(
        s,
        "{{:index {}, :time {}, :type :{}, :process {}, :f {}, :value {}",
        e.index,
        e.time,
        e.kind.as_str(),
        process,
        keyword(e.f.as_str()),
        value_to_edn(&e.value)
    );
    if let Some(k) = &e.key {
        let _ = write!(s, ", :key {}", string(k));
    }
    if let Some(t) = e.token {
        let _ = write!(s, ", :token {t}");
    }
    if let Some(err) = &e.error {
        let _ = write!(s, ", :error {}", string(err));
    }
    s.push('}');
    s
}

/// Renders a value as EDN: `nil`, `3`, `true`, `"s"`, `[1 2]`, `{:k 1}`.
pub fn value_to_edn(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Str(s) => string(s),
        Value::List(items) => {
            let inner: Vec<String> = items.iter().map(value_to_edn).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Map(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{} {}", keyword(k), value_to_edn(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// `:name` when `name` is a legal keyword, else the name as a string (an
/// unreadable keyword would break every EDN reader downstream).
fn keyword(name: &str) -> String {
    let legal = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "*+!-_?<>=.".contains(c));
    if legal {
        format!(":{name}")
    } else {
        string(name)
    }
}

/// An EDN string literal with the escapes EDN readers accept.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventType, F};

    #[test]
    fn invoke_looks_like_jepsen() {
        let e = Event::new(
            Process::Client(3),
            EventType::Invoke,
            F::Acquire,
            Value::Nil,
        )
        .at(123);
        assert_eq!(
            event_to_edn(&e),
            "{:index 0, :time 123, :type :invoke, :process 3, :f :acquire, :value nil}"
        );
    }

    #[test]
    fn nemesis_key_token_error_and_escapes() {
        let e = Event::new(Process::Nemesis, EventType::Info, F::Start, "part \"a\"\n")
            .with_key("k")
            .with_token(7)
            .with_error("x\\y");
        assert_eq!(
            event_to_edn(&e),
            "{:index 0, :time 0, :type :info, :process :nemesis, :f :start, \
             :value \"part \\\"a\\\"\\n\", :key \"k\", :token 7, :error \"x\\\\y\"}"
        );
    }

    #[test]
    fn lists_maps_and_odd_names() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("node".to_string(), Value::Int(2));
        let v = Value::List(vec![1.into(), Value::Map(m)]);
        assert_eq!(value_to_edn(&v), "[1 {:node 2}]");
        assert_eq!(keyword("has space"), "\"has space\"");
        assert_eq!(keyword("start-partition"), ":start-partition");
    }
}
