//! `[tls]` for a [`ProcessCluster`]: a throwaway CA (raftlock-tls's
//! generator), a member certificate every member of the one config file
//! shares (SANs 127.0.0.1 and localhost), and HTTPS clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use raftlock_tls::generate::{Ca, Issued};

use super::ProcessCluster;

/// The PEM files of one CA and what it signed.
pub struct TestCa {
    pub ca: Ca,
    pub member: Issued,
    pub client: Issued,
}

impl TestCa {
    /// A CA named `name` in `dir` (created), with a member certificate for
    /// 127.0.0.1/localhost and a client certificate.
    pub fn create(dir: &Path, name: &str) -> TestCa {
        std::fs::create_dir_all(dir).expect("tls dir");
        let ca = Ca::create(dir, name).expect("CA");
        let member = ca
            .issue_member(dir, "member", &["127.0.0.1", "localhost"])
            .expect("member certificate");
        let client = ca.issue_client(dir, "client").expect("client certificate");
        TestCa { ca, member, client }
    }

    /// The `[tls]` table naming this CA's member files.
    pub fn table(&self, client_auth: &str) -> String {
        format!(
            "\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\nclient_auth = {client_auth:?}\n",
            self.ca.cert_path, self.member.cert, self.member.key
        )
    }

    pub fn ca_path(&self) -> PathBuf {
        self.ca.cert_path.clone()
    }
}

/// An HTTPS client trusting `ca`, presenting `identity` if given.
pub fn https_client(ca: &Path, identity: Option<&Issued>) -> reqwest::Client {
    let tls =
        raftlock_tls::client_config(ca, identity.map(|i| (i.cert.as_path(), i.key.as_path())))
            .expect("client TLS config");
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(Duration::from_secs(40))
        .build()
        .expect("https client")
}

impl ProcessCluster {
    /// Turns `[tls]` on before any member starts: writes a CA and
    /// certificates under the cluster's directory, appends the table to
    /// the config, and points the helpers (`self.http`, `self.api`) at
    /// HTTPS with the client certificate (so `client_auth = "required"`
    /// clusters work with them too).
    pub fn enable_tls(&mut self, client_auth: &str) -> TestCa {
        let tls = TestCa::create(&self.dir.path().join("tls"), "raftlock test CA");
        let mut text = std::fs::read_to_string(&self.config).expect("config");
        text += &tls.table(client_auth);
        std::fs::write(&self.config, text).expect("write config");
        for url in &mut self.api {
            *url = url.replacen("http://", "https://", 1);
        }
        self.http = https_client(&tls.ca_path(), Some(&tls.client));
        tls
    }
}
