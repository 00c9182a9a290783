//! A throwaway CA and certificates, for `raftlock up --tls` and tests:
//! never for production (the CA key sits next to the certificates).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::TlsError;

fn generate_error(e: impl std::fmt::Display) -> TlsError {
    TlsError::Generate(e.to_string())
}

/// A CA that can sign certificates, and where its certificate is.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate (PEM): what clients pass as `--cacert`.
    pub cert_path: PathBuf,
}

/// Where one generated certificate and its key were written.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn write(path: &Path, text: &str) -> Result<(), TlsError> {
    std::fs::write(path, text).map_err(|source| TlsError::Read {
        what: "output file",
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a private key readable by its owner only.
fn write_key(path: &Path, text: &str) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let error = |source| TlsError::Read {
        what: "output file",
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(error)?;
    file.write_all(text.as_bytes()).map_err(error)
}

impl Ca {
    /// A new self-signed CA named `name`, written to `{dir}/ca.pem` (its
    /// key to `{dir}/ca-key.pem`).
    pub fn create(dir: &Path, name: &str) -> Result<Ca, TlsError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.remove(DnType::CommonName);
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(generate_error)?;
        let key_pem = key.serialize_pem();
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(generate_error)?;
        let cert_path = dir.join("ca.pem");
        write(&cert_path, &issuer.pem())?;
        write_key(&dir.join("ca-key.pem"), &key_pem)?;
        Ok(Ca { issuer, cert_path })
    }

    /// A member certificate for `names` (IP addresses or DNS names; the
    /// hosts peers and clients dial), good as server and as client, written
    /// to `{dir}/{stem}.pem` and `{dir}/{stem}-key.pem`.
    pub fn issue_member(&self, dir: &Path, stem: &str, names: &[&str]) -> Result<Issued, TlsError> {
        self.issue(
            dir,
            stem,
            names,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A client certificate (for `client_auth`), written like a member's.
    pub fn issue_client(&self, dir: &Path, stem: &str) -> Result<Issued, TlsError> {
        self.issue(dir, stem, &[], vec![ExtendedKeyUsagePurpose::ClientAuth])
    }

    fn issue(
        &self,
        dir: &Path,
        stem: &str,
        names: &[&str],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Result<Issued, TlsError> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).map_err(generate_error)?;
        params.distinguished_name.remove(DnType::CommonName);
        params.distinguished_name.push(DnType::CommonName, stem);
        params.extended_key_usages = usages;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(generate_error)?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(generate_error)?;
        let issued = Issued {
            cert: dir.join(format!("{stem}.pem")),
            key: dir.join(format!("{stem}-key.pem")),
        };
        write(&issued.cert, &cert.pem())?;
        write_key(&issued.key, &key.serialize_pem())?;
        Ok(issued)
    }
}
