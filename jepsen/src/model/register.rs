//! A linearizable read/write/compare-and-set register, one per key.
//!
//! History conventions (one register per `key`; keys are checked as
//! independent partitions):
//! - `read`: invoke value `nil`; `ok` value is what was read, `nil` meaning
//!   never written. An `info` read is ignored (it changes nothing).
//! - `write`: invoke value is the value written.
//! - `cas`: invoke value is `[expected, new]`. `ok` with value `false` means
//!   the compare failed (legal only if the register did not hold `expected`);
//!   `ok` with any other value means the swap happened (legal only if it held
//!   `expected`). `fail` means it did not happen.
//! - An `info` write or cas may take effect at any later point, or never.
//!
//! Other functions are not register operations and are skipped.

use super::{Model, ModelError, Translated};
use crate::history::{Operation, Outcome, Value, F};

/// The register model. The state is the current value (`Nil` = unwritten).
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterModel;

/// A register operation as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterInput {
    /// Read the value.
    Read,
    /// Overwrite with a value.
    Write(Value),
    /// Compare-and-set `expected` → `new`.
    Cas {
        /// Value the register must hold for the swap.
        expected: Value,
        /// Value written when it does.
        new: Value,
    },
}

/// What the client observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterOutput {
    /// A read returned this value.
    Read(Value),
    /// A write was acknowledged.
    Written,
    /// A cas was acknowledged: `true` swapped, `false` compare failed.
    Cas(bool),
    /// The outcome is unknown (`info`).
    Unknown,
}

impl Model for RegisterModel {
    type State = Value;
    type Input = RegisterInput;
    type Output = RegisterOutput;

    fn name(&self) -> &'static str {
        "register"
    }

    fn init(&self) -> Value {
        Value::Nil
    }

    fn op(&self, op: &Operation) -> Result<Translated<RegisterInput, RegisterOutput>, ModelError> {
        let known = op.outcome == Outcome::Ok;
        let pair = match op.f {
            F::Read if known => (RegisterInput::Read, RegisterOutput::Read(op.value.clone())),
            F::Read => return Ok(None),
            F::Write => {
                let out = if known {
                    RegisterOutput::Written
                } else {
                    RegisterOutput::Unknown
                };
                (RegisterInput::Write(op.invoke_value.clone()), out)
            }
            F::Cas => {
                let (expected, new) = match &op.invoke_value {
                    Value::List(v) if v.len() == 2 => (v[0].clone(), v[1].clone()),
                    other => {
                        return Err(ModelError::new(
                            op,
                            format!("cas value must be [expected new], got {other}"),
                        ))
                    }
                };
                let out = if known {
                    RegisterOutput::Cas(op.value != Value::Bool(false))
                } else {
                    RegisterOutput::Unknown
                };
                (RegisterInput::Cas { expected, new }, out)
            }
            _ => return Ok(None),
        };
        Ok(Some(pair))
    }

    fn step(&self, state: &Value, input: &RegisterInput, output: &RegisterOutput) -> Option<Value> {
        match (input, output) {
            (RegisterInput::Read, RegisterOutput::Read(v)) => (v == state).then(|| state.clone()),
            (RegisterInput::Read, _) => Some(state.clone()),
            (RegisterInput::Write(v), _) => Some(v.clone()),
            (RegisterInput::Cas { expected, new }, RegisterOutput::Cas(true)) => {
                (state == expected).then(|| new.clone())
            }
            (RegisterInput::Cas { expected, .. }, RegisterOutput::Cas(false)) => {
                (state != expected).then(|| state.clone())
            }
            // Unknown: it took effect here, with whichever outcome the state
            // dictates (a failed compare changes nothing).
            (RegisterInput::Cas { expected, new }, _) => Some(if state == expected {
                new.clone()
            } else {
                state.clone()
            }),
        }
    }

    fn partition(&self, op: &Operation) -> Option<String> {
        op.key.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_rules() {
        let m = RegisterModel;
        let one = Value::Int(1);
        let two = Value::Int(2);
        let read = |v: &Value| RegisterOutput::Read(v.clone());
        assert_eq!(
            m.step(&Value::Nil, &RegisterInput::Read, &read(&Value::Nil)),
            Some(Value::Nil)
        );
        assert_eq!(m.step(&one, &RegisterInput::Read, &read(&two)), None);
        let cas = RegisterInput::Cas {
            expected: one.clone(),
            new: two.clone(),
        };
        assert_eq!(
            m.step(&one, &cas, &RegisterOutput::Cas(true)),
            Some(two.clone())
        );
        assert_eq!(m.step(&two, &cas, &RegisterOutput::Cas(true)), None);
        assert_eq!(
            m.step(&two, &cas, &RegisterOutput::Cas(false)),
            Some(two.clone())
        );
        assert_eq!(m.step(&one, &cas, &RegisterOutput::Cas(false)), None);
        assert_eq!(
            m.step(&one, &cas, &RegisterOutput::Unknown),
            Some(two.clone())
        );
        assert_eq!(
            m.step(&Value::Nil, &cas, &RegisterOutput::Unknown),
            Some(Value::Nil)
        );
    }
}
