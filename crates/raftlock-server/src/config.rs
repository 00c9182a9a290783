//! The API's configuration: one struct, documented defaults, loadable from
//! the `[api]` table of a cluster file.

use serde::Deserialize;

use crate::auth::{AuthConfig, AuthConfigError};

/// Limits and defaults of the HTTP API. Every field has a default
/// ([`ApiConfig::default`]); a TOML/JSON table with unknown keys is
/// refused, so a typo cannot pass silently. The session TTL bounds are
/// not here: the node enforces them (for embedders too), so they live in
/// the cluster file's `[cluster]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// How long an acquire or campaign waits when the request has no
    /// `wait_ms`. Default 30 000 (docs/api.md).
    pub default_wait_ms: u64,
    /// Largest `wait_ms` accepted; above it is `bad_request`. Default
    /// 300 000 (5 min, docs/api.md). Bounds how long a long-poll can pin a
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
    /// Sessions the cluster holds at most; an open beyond it is `429
    /// too_many_requests`. Default 500 000 (≈ 0.5 GiB of state at the
    /// measured ~1 KiB per session, on every member). Checked by the
    /// member that takes the request against its own replica before it
    /// proposes, so concurrent opens can overshoot by as many as are in
    /// flight at once (see `limits.rs`).
    pub max_sessions: usize,
    /// Sessions one owner may hold at most (`429`); absent (the default)
    /// means no limit. Without tokens the owner is the `owner` label,
    /// whatever the client says (a guard against a runaway client, not a
    /// hostile one); with tokens it is the principal (the token's name).
    /// Costs a scan of all sessions per open.
    pub max_sessions_per_owner: Option<usize>,
    /// Sessions waiting in one lock or election queue (the holder not
    /// counted) at most; one more waiting acquire or campaign is `429`.
    /// A session already queued there may always re-attach, and a
    /// try-lock (`wait_ms: 0`) never queues. Default 10 000.
    pub max_waiters_per_lock: usize,
    /// A client must send a request's complete headers within this many
    /// ms of the server starting to read them, or its connection is
    /// closed (slowloris). The clock also runs while a keep-alive
    /// connection sits idle between requests, so this is the idle
    /// timeout of client connections too. Default 10 000.
    pub header_read_timeout_ms: u64,
    /// Client connections this member serves at once; a connection
    /// accepted beyond it is answered `503 overloaded` with `Retry-After:
    /// 1` and closed before its request is read (`overflow.rs`). Bounds
    /// the memory open connections take (docs/overload.md) and, with
    /// HTTP/1, the requests in flight; the process needs a file
    /// descriptor limit (`ulimit -n`, `LimitNOFILE=`) above it. While
    /// the member falls behind its load it takes fewer (`shedding.rs`).
    /// Default 8 192.
    pub max_connections: usize,
    /// Requests this member works on at once (a long-poll counts for its
    /// whole wait); one more waits for a slot, first come first served
    /// (`admission.rs`). Keepalives of sessions that own nodes take no
    /// slot and never wait: held locks outlive an overload. Default 1 024.
    pub max_requests_in_flight: usize,
    /// How long a request waits for a slot before it is answered `503
    /// overloaded` with `Retry-After: 1` (nothing done). Default 1 000.
    pub max_queue_wait_ms: u64,
    /// A request's body must arrive completely within this many ms of its
    /// headers, or the answer is `408 request_timeout` and the connection
    /// is closed. Default 10 000.
    pub body_read_timeout_ms: u64,
    /// Bearer tokens and their grants: the cluster file's top-level
    /// `[[auth.tokens]]` tables, not part of `[api]` (read by
    /// [`ApiConfig::from_cluster_toml`]). None (the default) leaves the
    /// API open; see docs/security.md.
    #[serde(skip)]
    pub auth: AuthConfig,
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
            max_sessions: 500_000,
            max_sessions_per_owner: None,
            max_waiters_per_lock: 10_000,
            header_read_timeout_ms: 10_000,
            max_connections: 8_192,
            max_requests_in_flight: 1_024,
            max_queue_wait_ms: 1_000,
            body_read_timeout_ms: 10_000,
            auth: AuthConfig::default(),
        }
    }
}

/// An API configuration that cannot serve, naming the key at fault as it
/// is spelt in a cluster file (`api.max_wait_ms`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiConfigError {
    /// The `[api]` table does not parse (unknown key, wrong type).
    #[error("config table [api]: {0}")]
    Parse(String),
    /// A value out of range or inconsistent with another.
    #[error("config key `api.{key}`: {message}")]
    Invalid {
        /// The field, without the `api.` prefix.
        key: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The `[[auth.tokens]]` tables are inconsistent.
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
}

fn invalid(key: &'static str, message: impl Into<String>) -> ApiConfigError {
    ApiConfigError::Invalid {
        key,
        message: message.into(),
    }
}

impl ApiConfig {
    /// Reads the `[api]` table of a cluster file's text (every key
    /// optional; no table means the defaults) and validates it. The rest
    /// of the file is the node's (`NodeConfig::from_cluster_file`).
    pub fn from_cluster_toml(text: &str) -> Result<ApiConfig, ApiConfigError> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            api: ApiConfig,
            #[serde(default)]
            auth: AuthConfig,
        }
        // The other tables are checked by the node's parser; this one
        // only needs the whole file to be TOML.
        let file: File = toml::from_str(text).map_err(|e| ApiConfigError::Parse(e.to_string()))?;
        let config = ApiConfig {
            auth: file.auth,
            ..file.api
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks that the values make sense together; the error names the
    /// field at fault. [`crate::router`] tolerates a config that fails
    /// this (it clamps the default wait to the maximum), but [`crate::serve`]
    /// refuses to start with it.
    pub fn validate(&self) -> Result<(), ApiConfigError> {
        if self.default_wait_ms > self.max_wait_ms {
            return Err(invalid(
                "default_wait_ms",
                format!(
                    "{} must not exceed max_wait_ms ({})",
                    self.default_wait_ms, self.max_wait_ms
                ),
            ));
        }
        if self.max_body_bytes == 0 {
            return Err(invalid("max_body_bytes", "must be positive"));
        }
        if self.max_data_bytes > self.max_body_bytes {
            return Err(invalid(
                "max_data_bytes",
                format!(
                    "{} must not exceed max_body_bytes ({})",
                    self.max_data_bytes, self.max_body_bytes
                ),
            ));
        }
        let positive = [
            ("sse_keepalive_ms", self.sse_keepalive_ms),
            ("max_sessions", self.max_sessions as u64),
            (
                "max_sessions_per_owner",
                self.max_sessions_per_owner.map_or(1, |n| n as u64),
            ),
            ("max_waiters_per_lock", self.max_waiters_per_lock as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("max_connections", self.max_connections as u64),
            ("max_requests_in_flight", self.max_requests_in_flight as u64),
            ("max_queue_wait_ms", self.max_queue_wait_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(invalid(key, "must be positive"));
            }
        }
        self.auth.validate()?;
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
        let err = bad.validate().expect_err("default above max");
        assert!(err.to_string().contains("api.default_wait_ms"), "{err}");
    }

    #[test]
    fn the_api_table_of_a_cluster_file_sets_every_limit() {
        let text = r#"
            [cluster]
            fsync = false
            [[members]]
            id = 1
            api_addr = "127.0.0.1:7001"
            raft_addr = "127.0.0.1:7101"
            [api]
            max_wait_ms = 60000
            default_wait_ms = 1000
            max_body_bytes = 2048
            max_data_bytes = 1024
            max_owner_bytes = 16
            sse_keepalive_ms = 500
            max_sessions = 7
            max_sessions_per_owner = 2
            max_waiters_per_lock = 3
            header_read_timeout_ms = 1500
            max_connections = 40
            max_requests_in_flight = 12
            max_queue_wait_ms = 250
            body_read_timeout_ms = 2500
        "#;
        let c = ApiConfig::from_cluster_toml(text).expect("valid");
        assert_eq!(
            c,
            ApiConfig {
                default_wait_ms: 1000,
                max_wait_ms: 60_000,
                max_body_bytes: 2048,
                max_data_bytes: 1024,
                max_owner_bytes: 16,
                sse_keepalive_ms: 500,
                max_sessions: 7,
                max_sessions_per_owner: Some(2),
                max_waiters_per_lock: 3,
                header_read_timeout_ms: 1500,
                max_connections: 40,
                max_requests_in_flight: 12,
                max_queue_wait_ms: 250,
                body_read_timeout_ms: 2500,
                auth: AuthConfig::default(),
            }
        );
        // No [api] table: the defaults.
        let plain = text.split("[api]").next().expect("head");
        assert_eq!(
            ApiConfig::from_cluster_toml(plain),
            Ok(ApiConfig::default())
        );
    }

    #[test]
    fn the_bundled_config_documents_the_defaults() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../cluster-config/local-3.toml"
        );
        let text = std::fs::read_to_string(path).expect("local-3.toml");
        assert!(text.contains("[api]"), "local-3.toml documents [api]");
        assert_eq!(
            ApiConfig::from_cluster_toml(&text),
            Ok(ApiConfig::default())
        );
        let all_keys_uncommented =
            text.replace("# max_sessions_per_owner", "max_sessions_per_owner");
        let c = ApiConfig::from_cluster_toml(&all_keys_uncommented).expect("valid");
        assert_eq!(c.max_sessions_per_owner, Some(1000));
    }

    #[test]
    fn the_production_config_defines_its_tokens() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../cluster-config/production-5.toml"
        );
        let text = std::fs::read_to_string(path).expect("production-5.toml");
        let c = ApiConfig::from_cluster_toml(&text).expect("valid");
        let names: Vec<&str> = c.auth.tokens.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["ops", "billing-jobs", "dashboards"]);
        assert!(c.auth.tokens[0].is_cluster_admin());
        let billing = &c.auth.tokens[1];
        assert!(billing.allows(crate::auth::Permission::Write, "billing/x"));
        assert!(!billing.allows(crate::auth::Permission::Write, "x"));
        let bad = text.replace("allow = [\"read\"] }]", "allow = [\"reed\"] }]");
        assert!(ApiConfig::from_cluster_toml(&bad).is_err());
        let twice = text.replace("name = \"dashboards\"", "name = \"ops\"");
        let err = ApiConfig::from_cluster_toml(&twice).expect_err("a name twice");
        assert!(err.to_string().contains("auth.tokens[2].name"), "{err}");
    }

    #[test]
    fn bad_values_fail_naming_the_key() {
        let cases = [
            ("max_sessions = 0", "api.max_sessions"),
            ("max_sessions_per_owner = 0", "api.max_sessions_per_owner"),
            ("max_waiters_per_lock = 0", "api.max_waiters_per_lock"),
            ("header_read_timeout_ms = 0", "api.header_read_timeout_ms"),
            ("body_read_timeout_ms = 0", "api.body_read_timeout_ms"),
            ("max_requests_in_flight = 0", "api.max_requests_in_flight"),
            ("max_queue_wait_ms = 0", "api.max_queue_wait_ms"),
            ("max_data_bytes = 4194304", "api.max_data_bytes"),
            ("default_wait_ms = 400000", "api.default_wait_ms"),
            ("max_sesions = 5", "max_sesions"),
            ("max_sessions = \"many\"", "max_sessions"),
            ("max_sessions = -1", "max_sessions"),
        ];
        for (line, key) in cases {
            let text = format!("[api]\n{line}\n");
            let err = ApiConfig::from_cluster_toml(&text).expect_err(line);
            assert!(err.to_string().contains(key), "{err} should name {key}");
        }
    }
}
