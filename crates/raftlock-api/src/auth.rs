//! Who may do what: the `[[auth.tokens]]` tables of a cluster file, the
//! permissions a token grants on name prefixes, and finding the token a
//! caller presents. Every front door (the HTTP API, the ZooKeeper door)
//! checks callers against the same table (docs/security.md).
//!
//! A token is 256 random bits, shown once when it is made (`raftlock
//! token new`); the config stores only its SHA-256, so a leaked config
//! file does not leak a credential. A plain hash is enough here (no
//! argon2): the input has 256 bits of entropy, nothing to brute-force.
//! The presented token is hashed and compared with every stored digest in
//! constant time, so response timing says nothing about how close a guess
//! came.

use std::collections::HashSet;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a grant allows on its name prefix (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Read locks, elections and nodes (listings, inspect, observe,
    /// fencing checks).
    Read,
    /// Open sessions, acquire and release locks, campaign, proclaim and
    /// resign in elections.
    Lock,
    /// Create, update and delete nodes of the generic tree.
    Write,
    /// Everything above on the prefix. On the empty prefix (the whole
    /// cluster) also membership changes, backups, and every session,
    /// whoever opened it.
    Admin,
}

impl Permission {
    /// Its name in configs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Lock => "lock",
            Permission::Write => "write",
            Permission::Admin => "admin",
        }
    }
}

/// Permissions on every name that starts with `prefix` (lock, election
/// and node names alike; a node's name is its path without the leading
/// `/`). The empty prefix covers every name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Plain string prefix: `billing/` covers `billing/nightly`, not
    /// `billing` itself, nor `billing-old/x`.
    pub prefix: String,
    /// What is allowed there.
    pub allow: Vec<Permission>,
}

impl Grant {
    fn allows(&self, permission: Permission, name: &str) -> bool {
        name.starts_with(&self.prefix) && self.permits(permission)
    }

    /// Does this grant give `permission` (itself, or by `admin`), on
    /// whatever its prefix covers?
    pub fn permits(&self, permission: Permission) -> bool {
        self.allow
            .iter()
            .any(|&p| p == permission || p == Permission::Admin)
    }

    /// The byte keys this grant covers, `[prefix, end)`; `None` as the
    /// end: no end (the empty prefix covers every key). Prefixes hold
    /// only ASCII characters, so the end is the prefix with its last
    /// byte raised by one.
    fn key_interval(&self) -> (&[u8], Option<Vec<u8>>) {
        let start = self.prefix.as_bytes();
        let end = start.split_last().map(|(last, head)| {
            let mut end = head.to_vec();
            end.push(last.saturating_add(1));
            end
        });
        (start, end)
    }
}

/// One bearer token: its name (the principal that owns what it opens),
/// the SHA-256 of the token string, and its grants.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    /// The principal: shown in listings as the owner of its sessions, and
    /// counted by `api.max_sessions_per_owner`.
    pub name: String,
    /// The token's SHA-256, 64 hex digits ([`hash_token`]).
    pub sha256: String,
    /// Where it may do what.
    pub grants: Vec<Grant>,
}

impl Token {
    /// May this token do `permission` on `name`?
    pub fn allows(&self, permission: Permission, name: &str) -> bool {
        self.grants.iter().any(|g| g.allows(permission, name))
    }

    /// May this token do `permission` on the byte key `key` (an etcd
    /// key: the grants' prefixes are compared byte for byte)?
    pub fn allows_key(&self, permission: Permission, key: &[u8]) -> bool {
        self.grants
            .iter()
            .any(|g| key.starts_with(g.prefix.as_bytes()) && g.permits(permission))
    }

    /// May this token do `permission` on every byte key in `[key, end)`
    /// (`end` `None`: every key from `key` on)? The range may be covered
    /// by several grants together (`a/` and `b/` cover `[a/x, b/y)`).
    /// An empty range needs `key` itself covered.
    pub fn allows_key_range(&self, permission: Permission, key: &[u8], end: Option<&[u8]>) -> bool {
        let intervals: Vec<(&[u8], Option<Vec<u8>>)> = self
            .grants
            .iter()
            .filter(|g| g.permits(permission))
            .map(Grant::key_interval)
            .collect();
        let mut cursor = key.to_vec();
        loop {
            // The interval holding `cursor` that reaches furthest.
            let mut reach: Option<Option<&Vec<u8>>> = None;
            for (start, stop) in &intervals {
                let holds =
                    *start <= cursor.as_slice() && stop.as_ref().is_none_or(|s| cursor < *s);
                if !holds {
                    continue;
                }
                reach = match (reach, stop.as_ref()) {
                    (_, None) | (Some(None), _) => Some(None),
                    (Some(Some(far)), Some(s)) => Some(Some(if s > far { s } else { far })),
                    (None, Some(s)) => Some(Some(s)),
                };
            }
            match (reach, end) {
                (None, _) => return false,
                (Some(None), _) => return true,
                (Some(Some(far)), Some(end)) if far.as_slice() >= end => return true,
                (Some(Some(far)), _) => cursor = far.clone(),
            }
        }
    }

    /// Does it have `permission` anywhere (for opening a session, which
    /// names no lock yet)?
    pub fn allows_somewhere(&self, permission: Permission) -> bool {
        self.grants.iter().any(|g| {
            g.allow
                .iter()
                .any(|&p| p == permission || p == Permission::Admin)
        })
    }

    /// `admin` on the empty prefix: membership, backups, every session.
    pub fn is_cluster_admin(&self) -> bool {
        self.grants
            .iter()
            .any(|g| g.prefix.is_empty() && g.allow.contains(&Permission::Admin))
    }
}

/// The `[auth]` table: no tokens (the default) means the API is open, as
/// for `raftlock up`; any token turns authentication on for every route
/// but `/v1/health` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `[[auth.tokens]]`, in file order.
    #[serde(default)]
    pub tokens: Vec<Token>,
}

/// A token table that cannot serve, naming the key at fault as it is
/// spelt in the file (`auth.tokens[1].sha256`, counting from 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config key `auth.{key}`: {message}")]
pub struct AuthConfigError {
    /// The key below `auth.`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// Characters of a principal name: it appears in listings, logs and
/// error messages, so nothing that needs quoting.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')
}

/// Characters of a grant prefix: those of lock and node names. In
/// particular no `%`, which is what lets the route check compare a
/// prefix with the raw, still percent-encoded request path (see
/// `policy.rs`).
fn is_prefix_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-' | '/')
}

impl AuthConfig {
    /// True when tokens are defined, so requests must present one.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Checks names, digests and grants; the error names the key.
    pub fn validate(&self) -> Result<(), AuthConfigError> {
        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        for (i, token) in self.tokens.iter().enumerate() {
            let err = |field: &str, message: String| AuthConfigError {
                key: format!("tokens[{i}].{field}"),
                message,
            };
            let name = &token.name;
            if name.is_empty() || name.len() > 64 || !name.chars().all(is_name_char) {
                return Err(err(
                    "name",
                    format!("{name:?} must be 1-64 of A-Z a-z 0-9 - _ . : @"),
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(err("name", format!("{name:?} is defined twice")));
            }
            let digest = &token.sha256;
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err(
                    "sha256",
                    "must be 64 hex digits (the token's SHA-256; `raftlock token new` prints it)"
                        .into(),
                ));
            }
            if !digests.insert(digest.to_ascii_lowercase()) {
                return Err(err(
                    "sha256",
                    "the same token is defined twice (one token, one principal)".into(),
                ));
            }
            if token.grants.is_empty() {
                return Err(err("grants", "a token needs at least one grant".into()));
            }
            for (j, grant) in token.grants.iter().enumerate() {
                if !grant.prefix.chars().all(is_prefix_char) {
                    return Err(err(
                        &format!("grants[{j}].prefix"),
                        format!(
                            "{:?} may only hold the characters of lock names (A-Z a-z 0-9 . _ : - /)",
                            grant.prefix
                        ),
                    ));
                }
                if grant.allow.is_empty() {
                    return Err(err(
                        &format!("grants[{j}].allow"),
                        "allow at least one of read, lock, write, admin".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The token whose digest matches `presented`'s.
    pub fn find(&self, presented: &str) -> Option<&Token> {
        self.position(presented).map(|i| &self.tokens[i])
    }

    /// The index of the token whose digest matches `presented`'s,
    /// comparing with every stored digest in constant time (no early
    /// exit either).
    pub fn position(&self, presented: &str) -> Option<usize> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (i, token) in self.tokens.iter().enumerate() {
            // Validated as 64 hex digits; a digest that does not decode
            // matches nothing.
            let stored = decode_hex(&token.sha256).unwrap_or([0; 32]);
            if bool::from(stored.ct_eq(&digest)) && found.is_none() {
                found = Some(i);
            }
        }
        found
    }
}

/// The hex SHA-256 of a token string: what the config stores.
pub fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let pair = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<AuthConfig, String> {
        #[derive(Deserialize)]
        struct File {
            auth: AuthConfig,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        file.auth.validate().map_err(|e| e.to_string())?;
        Ok(file.auth)
    }

    #[test]
    fn tokens_are_found_by_digest_and_grant_by_prefix() {
        let text = format!(
            r#"
            [[auth.tokens]]
            name = "billing-jobs"
            sha256 = "{}"
            grants = [ {{ prefix = "billing/", allow = ["read", "lock", "write"] }},
                       {{ prefix = "", allow = ["read"] }} ]
            [[auth.tokens]]
            name = "ops"
            sha256 = "{}"
            grants = [ {{ prefix = "", allow = ["admin"] }} ]
            "#,
            hash_token("secret-b"),
            hash_token("secret-o").to_uppercase(),
        );
        let auth = config(&text).expect("valid");
        assert!(auth.enabled());
        let billing = auth.find("secret-b").expect("billing token");
        assert_eq!(billing.name, "billing-jobs");
        assert!(billing.allows(Permission::Lock, "billing/nightly"));
        assert!(billing.allows(Permission::Read, "other/x"));
        assert!(!billing.allows(Permission::Lock, "other/x"));
        assert!(!billing.allows(Permission::Lock, "billing"));
        assert!(!billing.allows(Permission::Admin, "billing/x"));
        assert!(!billing.is_cluster_admin());
        assert!(billing.allows_somewhere(Permission::Lock));
        let ops = auth.find("secret-o").expect("upper-case hex matches too");
        assert!(ops.is_cluster_admin());
        assert!(ops.allows(Permission::Write, "anything"));
        assert!(auth.find("secret-x").is_none());
        assert!(auth.find("").is_none());
        assert!(!AuthConfig::default().enabled());
    }

    #[test]
    fn byte_ranges_are_covered_by_one_grant_or_several() {
        let token = Token {
            name: "t".into(),
            sha256: hash_token("t"),
            grants: vec![
                Grant {
                    prefix: "a/".into(),
                    allow: vec![Permission::Read, Permission::Write],
                },
                Grant {
                    prefix: "b/".into(),
                    allow: vec![Permission::Read],
                },
                Grant {
                    prefix: "c".into(),
                    allow: vec![Permission::Admin],
                },
            ],
        };
        let (r, w) = (Permission::Read, Permission::Write);
        assert!(token.allows_key(w, b"a/x"));
        assert!(!token.allows_key(w, b"b/x"));
        assert!(token.allows_key(r, b"b/x"));
        assert!(!token.allows_key(r, b"a"));
        assert!(token.allows_key(w, b"c\xff"), "admin covers write");
        // [a/, a0) is the prefix a/ exactly.
        assert!(token.allows_key_range(w, b"a/", Some(b"a0")));
        assert!(!token.allows_key_range(w, b"a/", Some(b"a1")));
        // a/ and b/ are not adjacent: a0.. lies between them.
        assert!(!token.allows_key_range(r, b"a/x", Some(b"b/y")));
        assert!(token.allows_key_range(r, b"b/", Some(b"b0")));
        // b/ then c (reads): [b/, b0) and [c, d) leave b0..c uncovered.
        assert!(!token.allows_key_range(r, b"b/", Some(b"c\x01")));
        assert!(token.allows_key_range(r, b"c", Some(b"d")));
        assert!(!token.allows_key_range(r, b"c", None));
        let all = Token {
            grants: vec![
                Grant {
                    prefix: "".into(),
                    allow: vec![Permission::Read],
                },
                Grant {
                    prefix: "x".into(),
                    allow: vec![Permission::Write],
                },
            ],
            ..token
        };
        assert!(all.allows_key_range(r, b"\0", None));
        assert!(all.allows_key_range(w, b"x", Some(b"y")));
        assert!(!all.allows_key_range(w, b"x", Some(b"y\0")));
        assert!(!all.allows_key_range(w, b"x", None));
    }

    #[test]
    fn bad_tables_fail_naming_the_key() {
        let digest = hash_token("t");
        let cases = [
            (
                format!(
                    r#"name = "" sha256 = "{digest}" grants = [{{prefix = "", allow = ["read"]}}]"#
                ),
                "auth.tokens[0].name",
            ),
            (
                r#"name = "a" sha256 = "abc" grants = [{prefix = "", allow = ["read"]}]"#.into(),
                "auth.tokens[0].sha256",
            ),
            (
                format!(r#"name = "a" sha256 = "{digest}" grants = []"#),
                "auth.tokens[0].grants",
            ),
            (
                format!(
                    r#"name = "a" sha256 = "{digest}" grants = [{{prefix = "a%2F", allow = ["read"]}}]"#
                ),
                "auth.tokens[0].grants[0].prefix",
            ),
            (
                format!(r#"name = "a" sha256 = "{digest}" grants = [{{prefix = "", allow = []}}]"#),
                "auth.tokens[0].grants[0].allow",
            ),
            (
                format!(
                    r#"name = "a" sha256 = "{digest}" grants = [{{prefix = "", allow = ["rwx"]}}]"#
                ),
                "rwx",
            ),
        ];
        for (body, key) in cases {
            let text = format!(
                "[[auth.tokens]]\n{}\n",
                body.replace("\" ", "\"\n").replace("] ", "]\n")
            );
            let err = config(&text).expect_err(&text);
            assert!(err.contains(key), "{err} should name {key}");
        }
        let twice = format!(
            "[[auth.tokens]]\nname = \"a\"\nsha256 = \"{digest}\"\ngrants = [{{prefix = \"\", allow = [\"read\"]}}]\n\
             [[auth.tokens]]\nname = \"b\"\nsha256 = \"{digest}\"\ngrants = [{{prefix = \"\", allow = [\"read\"]}}]\n"
        );
        let err = config(&twice).expect_err("same digest twice");
        assert!(err.contains("auth.tokens[1].sha256"), "{err}");
    }

    #[test]
    fn the_digest_is_sha256_hex() {
        // SHA-256 of "abc" (FIPS 180-2 test vector).
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
