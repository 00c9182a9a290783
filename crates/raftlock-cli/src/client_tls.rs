//! `--cacert/--cert/--key`: HTTPS for every client-side command (flattened
//! into [`crate::inspect::Endpoints`]). With `--cacert`, `http://`
//! endpoints (the defaults too) are dialed as `https://`, trusting only
//! that CA; `--cert/--key` answer a cluster with `client_auth`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use raftlock_client::TlsFiles;

#[derive(Args, Clone, Debug, Default)]
pub struct ClientTls {
    /// CA certificate (PEM) to trust: the cluster's `[tls] ca`, or the
    /// `ca.pem` that `raftlock up --tls` prints. Given, endpoints use https.
    #[arg(long, env = "RAFTLOCK_CACERT", value_name = "PEM")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) for clusters with `client_auth`; needs
    /// --key and --cacert.
    #[arg(long, env = "RAFTLOCK_CERT", value_name = "PEM", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long, env = "RAFTLOCK_KEY", value_name = "PEM", requires = "cert")]
    pub key: Option<PathBuf>,
}

impl ClientTls {
    /// As the Rust client takes them.
    pub fn files(&self) -> TlsFiles {
        TlsFiles {
            ca: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }

    /// `endpoint` with the scheme these flags ask for: https with a CA
    /// file, as given otherwise; `host:port` gets one too.
    pub fn url(&self, endpoint: &str) -> String {
        let endpoint = endpoint.trim().trim_end_matches('/');
        let bare = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        match (bare, &self.cacert) {
            (Some(bare), Some(_)) => format!("https://{bare}"),
            (Some(_), None) => endpoint.to_string(),
            (None, Some(_)) => format!("https://{endpoint}"),
            (None, None) => format!("http://{endpoint}"),
        }
    }

    /// A reqwest builder that trusts `--cacert` and presents `--cert`.
    pub fn http(&self) -> anyhow::Result<reqwest::ClientBuilder> {
        let builder = reqwest::Client::builder();
        let Some(ca) = &self.cacert else {
            if self.cert.is_some() {
                anyhow::bail!(
                    "--cert needs --cacert (the CA that signed the cluster's certificates)"
                );
            }
            return Ok(builder);
        };
        let identity = self.cert.as_deref().zip(self.key.as_deref());
        let tls = raftlock_tls::client_config(ca, identity).context("TLS")?;
        Ok(builder.tls_backend_preconfigured(tls))
    }
}
