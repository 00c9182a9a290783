//! One line of a history: an event, as Jepsen records them.

use super::Value;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Who performed an event: a logical client, or the nemesis.
///
/// A client process does one operation at a time. Following Jepsen, a
/// process whose operation ended `info` (outcome unknown) should continue
/// under a fresh process id, and each process uses one raftlock session, so
/// the mutex model can use the process id as the lock owner.
///
/// Serialized as a number for clients and as the string `"nemesis"` for the
/// fault injector (`:nemesis` in EDN), so faults sit in the same history but
/// are never mistaken for client operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    /// A client; the id is unique for the whole run.
    Client(u64),
    /// The fault injector. Its events are excluded from checking.
    Nemesis,
}

impl Process {
    /// True for the nemesis.
    pub fn is_nemesis(self) -> bool {
        matches!(self, Process::Nemesis)
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => write!(f, "{p}"),
            Process::Nemesis => write!(f, "nemesis"),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => s.serialize_u64(*p),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Process;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a non-negative process number or \"nemesis\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Process, E> {
                Ok(Process::Client(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Process, E> {
                u64::try_from(v)
                    .map(Process::Client)
                    .map_err(|_| E::custom(format!("negative process id {v}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Process, E> {
                if v == "nemesis" {
                    Ok(Process::Nemesis)
                } else {
                    Err(E::custom(format!("unknown process {v:?}")))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The four Jepsen event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The client is about to send the request.
    Invoke,
    /// The operation definitely happened, with the completion's value.
    Ok,
    /// The operation definitely did not happen.
    Fail,
    /// The outcome is unknown (timeout, connection lost): it may have taken
    /// effect at any time after its invocation, or never.
    Info,
}

impl EventType {
    /// The Jepsen name: `invoke`, `ok`, `fail`, `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Invoke => "invoke",
            EventType::Ok => "ok",
            EventType::Fail => "fail",
            EventType::Info => "info",
        }
    }
}

/// The function of an operation. Known names get a variant so checkers can
/// match on them; anything else is kept verbatim in `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum F {
    /// Acquire a lock (`key` = lock name). Ok means granted.
    Acquire,
    /// Release a held lock.
    Release,
    /// The client learnt its session expired: the server dropped every
    /// lock the session held, at some time inside this op's window.
    Expire,
    /// Same as `Expire`, for a session the client had to give up (lost).
    Lost,
    /// Read a register or counter; the completion's value is what was read.
    Read,
    /// Write the invocation's value to a register.
    Write,
    /// Compare-and-set: the value is `[expected, new]`.
    Cas,
    /// Increment the fenced counter with the event's fencing token.
    Incr,
    /// Nemesis: a fault starts; the value names it.
    Start,
    /// Nemesis: a fault ends; the value names it.
    Stop,
    /// Any other function, kept as written.
    Other(String),
}

impl F {
    /// The name as written in histories.
    pub fn as_str(&self) -> &str {
        match self {
            F::Acquire => "acquire",
            F::Release => "release",
            F::Expire => "expire",
            F::Lost => "lost",
            F::Read => "read",
            F::Write => "write",
            F::Cas => "cas",
            F::Incr => "incr",
            F::Start => "start",
            F::Stop => "stop",
            F::Other(s) => s,
        }
    }
}

impl From<String> for F {
    fn from(s: String) -> Self {
        match s.as_str() {
            "acquire" => F::Acquire,
            "release" => F::Release,
            "expire" => F::Expire,
            "lost" => F::Lost,
            "read" => F::Read,
            "write" => F::Write,
            "cas" => F::Cas,
            "incr" => F::Incr,
            "start" => F::Start,
            "stop" => F::Stop,
            _ => F::Other(s),
        }
    }
}

impl From<&str> for F {
    fn from(s: &str) -> Self {
        F::from(s.to_string())
    }
}

impl From<F> for String {
    fn from(f: F) -> Self {
        match f {
            F::Other(s) => s,
            other => other.as_str().to_string(),
        }
    }
}

impl fmt::Display for F {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event of a history (one JSON line).
///
/// Times are monotonic nanoseconds since the run started, so events from
/// different client tasks compare directly; wall clocks would not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Position in the history, 0-based and increasing.
    pub index: u64,
    /// Which client (or the nemesis) did this.
    pub process: Process,
    /// invoke / ok / fail / info.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The function, e.g. `acquire`, `read`, `cas`.
    pub f: F,
    /// Argument on invoke; result on ok.
    #[serde(default)]
    pub value: Value,
    /// Monotonic nanoseconds since the run started.
    pub time: u64,
    /// The key (register name, lock name) for per-key workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Error text on `fail`/`info`, for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fencing token: granted by an `acquire` ok, carried by an `incr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

impl Event {
    /// A new event with index and time 0 (a [`super::Recorder`] or
    /// [`super::History::push`] caller sets them) and no key/error/token.
    pub fn new(
        process: Process,
        kind: EventType,
        f: impl Into<F>,
        value: impl Into<Value>,
    ) -> Self {
        Event {
            index: 0,
            process,
            kind,
            f: f.into(),
            value: value.into(),
            time: 0,
            key: None,
            error: None,
            token: None,
        }
    }

    /// Builder: set the key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Builder: set the error text.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Builder: set the fencing token.
    pub fn with_token(mut self, token: u64) -> Self {
        self.token = Some(token);
        self
    }

    /// Builder: set the time (nanoseconds since run start).
    pub fn at(mut self, time: u64) -> Self {
        self.time = time;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_serializes_as_number_or_nemesis() {
        assert_eq!(serde_json::to_string(&Process::Client(3)).unwrap(), "3");
        assert_eq!(
            serde_json::to_string(&Process::Nemesis).unwrap(),
            "\"nemesis\""
        );
        assert_eq!(
            serde_json::from_str::<Process>("7").unwrap(),
            Process::Client(7)
        );
        assert_eq!(
            serde_json::from_str::<Process>("\"nemesis\"").unwrap(),
            Process::Nemesis
        );
        assert!(serde_json::from_str::<Process>("-1").is_err());
        assert!(serde_json::from_str::<Process>("\"bob\"").is_err());
    }

    #[test]
    fn unknown_f_is_kept() {
        let f: F = serde_json::from_str("\"frobnicate\"").unwrap();
        assert_eq!(f, F::Other("frobnicate".into()));
        assert_eq!(serde_json::to_string(&f).unwrap(), "\"frobnicate\"");
        assert_eq!(serde_json::from_str::<F>("\"cas\"").unwrap(), F::Cas);
    }

    #[test]
    fn event_json_shape() {
        let e = Event::new(Process::Client(1), EventType::Ok, F::Acquire, Value::Nil)
            .with_key("l")
            .with_token(42)
            .at(5);
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(
            s,
            r#"{"index":0,"process":1,"type":"ok","f":"acquire","value":null,"time":5,"key":"l","token":42}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&s).unwrap(), e);
    }
}
