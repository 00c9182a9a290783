//! The `[tls]` table of a cluster file (cluster-config/README.md).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Whether API clients must present a certificate signed by `ca`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// TLS only; clients identify themselves otherwise (bearer tokens).
    #[default]
    None,
    /// A client may present a certificate; if it does, it must verify.
    Optional,
    /// Every client presents a certificate signed by `ca`.
    Required,
}

/// PEM files and the client policy. With this table present the client
/// API speaks HTTPS and the Raft port mutual TLS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The cluster CA: signs every member certificate, and the clients'
    /// certificates when `client_auth` asks for them.
    pub ca: PathBuf,
    /// This member's certificate chain (leaf first).
    pub cert: PathBuf,
    /// This member's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    #[serde(default)]
    pub client_auth: ClientAuth,
}

impl TlsSettings {
    /// Makes relative paths relative to `base` (the config file's folder).
    pub fn resolve_against(&mut self, base: &Path) {
        for path in [&mut self.ca, &mut self.cert, &mut self.key] {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }
}
