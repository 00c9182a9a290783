//! TLS for raftlock, in one place: the `[tls]` table of a cluster file,
//! PEM loading whose errors name the file, the rustls configs of the
//! client API (TLS, optionally with client certificates), of the Raft
//! port (always mutual TLS) and of clients, and a throwaway CA for
//! `raftlock up --tls`.
//!
//! Every config is built with rustls's `ring` provider, never a
//! process-wide default, so no build compiles aws-lc-rs's C code.
//! reqwest is built with `rustls-no-provider`: a reqwest client given
//! no ready config (plain-HTTP clients) asks for the process default
//! provider and panics without one, so every binary and test that
//! builds a reqwest client calls [`install_default_provider`] first
//! (our client constructors do it for their callers).

mod accept;
mod configs;
pub mod generate;
mod pem;
mod settings;

use std::path::PathBuf;
use std::sync::Arc;

pub use accept::{TlsConnection, TlsIncoming};
pub use configs::{api_server_config, client_config, member_client_config, member_server_config};
pub use pem::{load_certs, load_key, load_roots};
pub use rustls;
pub use settings::{ClientAuth, TlsSettings};

/// Why TLS could not be set up. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {}: {message}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("TLS setup with {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    #[error("cannot generate certificates: {0}")]
    Generate(String),
}

/// The crypto provider of every config this crate builds.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes `ring` the process-wide rustls provider, unless one is already
/// installed. Needed before building any reqwest client that is not
/// handed a ready rustls config (see the crate docs). Idempotent.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
