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
mod members_only;
mod pem;
mod settings;

use std::path::PathBuf;
use std::sync::Arc;

pub use accept::{accept_failed, TlsConnection, TlsIncoming};
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::generate::Ca;
    use super::*;

    fn settings(dir: &Path, client_auth: ClientAuth) -> TlsSettings {
        let ca = Ca::create(dir, "test CA").expect("CA");
        let member = ca
            .issue_member(dir, "member", &["127.0.0.1", "localhost"])
            .expect("member");
        TlsSettings {
            ca: ca.cert_path.clone(),
            cert: member.cert,
            key: member.key,
            client_auth,
        }
    }

    #[test]
    fn generated_files_make_every_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        for auth in [ClientAuth::None, ClientAuth::Optional, ClientAuth::Required] {
            let s = settings(dir.path(), auth);
            api_server_config(&s).expect("api config");
            member_server_config(&s).expect("member server config");
            member_client_config(&s).expect("member client config");
        }
    }

    #[test]
    fn errors_name_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = settings(dir.path(), ClientAuth::None);
        let missing = dir.path().join("nope.pem");
        s.cert = missing.clone();
        let e = api_server_config(&s).expect_err("missing cert").to_string();
        assert!(e.contains("certificate") && e.contains("nope.pem"), "{e}");

        // A key file where the certificate belongs: no CERTIFICATE block.
        let mut s = settings(dir.path(), ClientAuth::None);
        s.cert = s.key.clone();
        let e = api_server_config(&s).expect_err("no cert").to_string();
        assert!(
            e.contains("no CERTIFICATE block") && e.contains("member-key.pem"),
            "{e}"
        );

        // A certificate where the key belongs.
        let mut s = settings(dir.path(), ClientAuth::None);
        s.key = s.cert.clone();
        let e = member_server_config(&s).expect_err("no key").to_string();
        assert!(
            e.contains("no PRIVATE KEY block") && e.contains("member.pem"),
            "{e}"
        );

        // The key of another certificate.
        let mut s = settings(dir.path(), ClientAuth::None);
        let other = tempfile::tempdir().expect("tempdir");
        s.key = settings(other.path(), ClientAuth::None).key;
        let e = api_server_config(&s).expect_err("mismatch").to_string();
        assert!(e.contains("certificate and key"), "{e}");
    }

    #[test]
    fn the_tls_table_parses_and_resolves_relative_paths() {
        #[derive(serde::Deserialize)]
        struct File {
            tls: TlsSettings,
        }
        let text = "[tls]\nca = \"tls/ca.pem\"\ncert = \"/etc/m.pem\"\nkey = \"k.pem\"\n";
        let mut tls = toml_parse(text).expect("parses").tls;
        assert_eq!(tls.client_auth, ClientAuth::None);
        tls.resolve_against(Path::new("/conf"));
        assert_eq!(tls.ca, Path::new("/conf/tls/ca.pem"));
        assert_eq!(tls.cert, Path::new("/etc/m.pem"));
        assert_eq!(tls.key, Path::new("/conf/k.pem"));
        let bad = "[tls]\nca = \"a\"\ncert = \"b\"\nkey = \"c\"\nclient_auth = \"sometimes\"\n";
        assert!(toml_parse(bad).is_err());
        let typo = "[tls]\nca = \"a\"\ncert = \"b\"\nkey = \"c\"\nclientauth = \"none\"\n";
        assert!(toml_parse(typo).is_err());

        fn toml_parse(text: &str) -> Result<File, toml::de::Error> {
            toml::from_str(text)
        }
    }
}
