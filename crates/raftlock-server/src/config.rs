//! The API's configuration: one struct, documented defaults.

use serde::Deserialize;

/// Limits and defaults of the HTTP API. Every field has a default
/// ([`ApiConfig::default`]); a TOML/JSON table with unknown keys is
/// refused, so a typo cannot pass silently.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// How long an acquire or campaign waits when the request has no
    /// `wait_ms`. Default 30 000 (API.md).
    pub default_wait_ms: u64,
    /// Largest `wait_ms` accepted; above it is `bad_request`. Default
    /// 300 000 (5 min, API.md). Bounds how long a long-poll can pin a
    /// connection.
    pub max_wait_ms: u64,
    /// Largest request body, in bytes; above it is `413 too_large`.
    /// Default 1 MiB.
    pub max_body_bytes: usize,
    /// Largest node data or election value, in bytes (after base64
    /// decoding); above it is `413 too_large`. Default 512 KiB. Keeps a
    /// single Raft entry, and the in-memory tree, bounded.
    pub max_data_bytes: usize,
    /// Largest session `owner` label, in bytes; above it is
    /// `bad_request`. Default 256. The label is copied into every listing.
    pub max_owner_bytes: usize,
    /// Period of the comment frames that keep an idle `observe` stream
    /// (Server-Sent Events) alive through proxies. Default 15 000.
    pub sse_keepalive_ms: u64,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            default_wait_ms: 30_000,
            max_wait_ms: 300_000,
            max_body_bytes: 1024 * 1024,
            max_data_bytes: 512 * 1024,
            max_owner_bytes: 256,
            sse_keepalive_ms: 15_000,
        }
    }
}

impl ApiConfig {
    /// Checks that the values make sense together; the error names the
    /// field at fault. [`crate::router`] tolerates a config that fails
    /// this (it clamps the default wait to the maximum), but a CLI should
    /// refuse to start with it.
    pub fn validate(&self) -> Result<(), String> {
        if self.default_wait_ms > self.max_wait_ms {
            return Err(format!(
                "default_wait_ms ({}) must not exceed max_wait_ms ({})",
                self.default_wait_ms, self.max_wait_ms
            ));
        }
        if self.max_body_bytes == 0 {
            return Err("max_body_bytes must be positive".into());
        }
        if self.max_data_bytes > self.max_body_bytes {
            return Err(format!(
                "max_data_bytes ({}) must not exceed max_body_bytes ({})",
                self.max_data_bytes, self.max_body_bytes
            ));
        }
        if self.sse_keepalive_ms == 0 {
            return Err("sse_keepalive_ms must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let c = ApiConfig::default();
        assert_eq!(c.default_wait_ms, 30_000);
        assert_eq!(c.max_wait_ms, 300_000);
        assert_eq!(c.max_body_bytes, 1 << 20);
        assert_eq!(c.max_data_bytes, 512 << 10);
        assert!(c.validate().is_ok());
        let bad = ApiConfig {
            default_wait_ms: 10,
            max_wait_ms: 5,
            ..ApiConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("default_wait_ms"));
    }
}
