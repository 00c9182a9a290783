//! rustls configs: the client API's server side, the Raft port's server
//! and client sides (mutual TLS), and API clients.

use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};

use crate::members_only::MembersOnly;
use crate::{load_certs, load_key, load_roots, provider, ClientAuth, TlsError, TlsSettings};

fn config_error(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Config {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// How a server treats client certificates.
enum Clients {
    Anonymous,
    MayPresent,
    MustPresent,
    /// Must present a CA-signed certificate that is also good for
    /// serving (members_only.rs).
    Members,
}

fn server_config(settings: &TlsSettings, clients: Clients) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = load_certs(&settings.cert)?;
    let key = load_key(&settings.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(&settings.cert, e))?;
    let builder = match clients {
        Clients::Anonymous => builder.with_no_client_auth(),
        Clients::MayPresent | Clients::MustPresent | Clients::Members => {
            let roots = Arc::new(load_roots(&settings.ca)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider());
            let verifier = match clients {
                Clients::MayPresent => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| config_error(&settings.ca, e))?;
            if let Clients::Members = clients {
                builder.with_client_cert_verifier(Arc::new(MembersOnly {
                    inner: verifier,
                    roots,
                    algorithms: provider().signature_verification_algorithms,
                }))
            } else {
                builder.with_client_cert_verifier(verifier)
            }
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| config_error(&settings.key, format!("certificate and key: {e}")))?;
    Ok(Arc::new(config))
}

/// The client API's server config: this member's certificate, and client
/// certificates checked against `ca` as `client_auth` says.
pub fn api_server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let clients = match settings.client_auth {
        ClientAuth::None => Clients::Anonymous,
        ClientAuth::Optional => Clients::MayPresent,
        ClientAuth::Required => Clients::MustPresent,
    };
    server_config(settings, clients)
}

/// The Raft port's server config: a peer without a certificate signed by
/// `ca` fails the handshake, whatever `client_auth` says, and so does one
/// whose certificate is for clients only (members_only.rs).
pub fn member_server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    server_config(settings, Clients::Members)
}

/// How a member dials its peers' Raft ports: it trusts only `ca` and
/// presents its own certificate.
pub fn member_client_config(settings: &TlsSettings) -> Result<ClientConfig, TlsError> {
    client_config(&settings.ca, Some((&settings.cert, &settings.key)))
}

/// An API client's config: trusts only the certificates in `ca`, and
/// presents `identity` (certificate chain, key) when a server asks.
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<ClientConfig, TlsError> {
    let roots = load_roots(ca)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(ca, e))?
        .with_root_certificates(roots);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| config_error(key, format!("certificate and key: {e}"))),
    }
}
