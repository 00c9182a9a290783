//! The value carried by an event: a small, hashable subset of JSON.
//!
//! Values are data, like Jepsen's: `nil`, integers, booleans, strings, lists
//! and string-keyed maps. Models interpret them (a `cas` value is the list
//! `[expected, new]`). Floats are left out on purpose: models hash and compare
//! values, and a float would make "equal" ambiguous.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A Jepsen-style operation value. Serialized untagged, so JSON reads
/// naturally: `null`, `3`, `true`, `"x"`, `[1, 2]`, `{"a": 1}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// No value: an invocation without argument, or a read of a register
    /// that was never written.
    #[default]
    Nil,
    /// A boolean, e.g. the outcome of a `cas`.
    Bool(bool),
    /// An integer: register values, counter values, tokens.
    Int(i64),
    /// A string: fault names, opaque values.
    Str(String),
    /// A list, e.g. `[expected, new]` for `cas`.
    List(Vec<Value>),
    /// A map with string keys, for structured details (e.g. nemesis targets).
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The integer inside, if this is an `Int`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The string inside, if this is a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// True for `Nil`.
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }
}

/// `()` is `nil`: handy for invocations without argument.
impl From<()> for Value {
    fn from(_: ()) -> Self {
        Value::Nil
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Nil, Into::into)
    }
}

/// Compact, EDN-like rendering for reports: `nil`, `3`, `"x"`, `[1 2]`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => write!(f, "nil"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(items) => {
                write!(f, "[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, " ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Value::Map(map) => {
                write!(f, "{{")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k:?} {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_is_natural() {
        let v = Value::List(vec![Value::Nil, 3.into(), true.into(), "x".into()]);
        let s = serde_json::to_string(&v).unwrap();
        assert_eq!(s, r#"[null,3,true,"x"]"#);
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
    }

    #[test]
    fn floats_are_rejected() {
        assert!(serde_json::from_str::<Value>("1.5").is_err());
    }

    #[test]
    fn display_is_edn_like() {
        let v = Value::List(vec![1.into(), 2.into()]);
        assert_eq!(v.to_string(), "[1 2]");
        assert_eq!(Value::Nil.to_string(), "nil");
    }
}
