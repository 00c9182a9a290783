//! The fenced workload's storage service: a counter owned by the harness
//! that honours fencing tokens, as a real storage service behind a lock
//! should.
//!
//! Both steps of a read-modify-write carry the client's token. A step with
//! a token below the highest one seen is rejected; a step with a higher
//! one raises the bar. Fencing the read too is what makes the pair safe:
//! once a newer holder has *read*, an older holder's pending write is
//! refused, so no update is lost between the two.

use std::sync::Mutex;

/// The counter and the highest token it has seen.
#[derive(Debug, Default)]
pub struct FencedStore {
    /// (value, highest token); a std mutex held for a few instructions.
    inner: Mutex<(i64, u64)>,
}

/// A step refused because its token is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    /// The token the step carried.
    pub token: u64,
    /// The highest token seen before it.
    pub highest: u64,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stale token {} (store has seen {})",
            self.token, self.highest
        )
    }
}

impl FencedStore {
    fn admit(&self, token: u64, step: impl FnOnce(&mut i64) -> i64) -> Result<i64, Stale> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (value, highest) = &mut *guard;
        if token < *highest {
            return Err(Stale {
                token,
                highest: *highest,
            });
        }
        *highest = token;
        Ok(step(value))
    }

    /// Reads the counter with `token`.
    pub fn read(&self, token: u64) -> Result<i64, Stale> {
        self.admit(token, |v| *v)
    }

    /// Writes `value` with `token`; returns it.
    pub fn write(&self, value: i64, token: u64) -> Result<i64, Stale> {
        self.admit(token, |v| {
            *v = value;
            value
        })
    }

    /// The counter, without a token (the final read).
    pub fn value(&self) -> i64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_read_fences_off_an_older_write() {
        let s = FencedStore::default();
        assert_eq!(s.read(5), Ok(0));
        assert_eq!(s.read(6), Ok(0));
        assert_eq!(s.write(1, 6), Ok(1));
        assert_eq!(
            s.write(1, 5),
            Err(Stale {
                token: 5,
                highest: 6
            })
        );
        assert_eq!(s.value(), 1);
        // Equal tokens pass: one holder does several steps.
        assert_eq!(s.write(2, 6), Ok(2));
    }
}
