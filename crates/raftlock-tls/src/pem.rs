//! PEM files to rustls types, with errors that name the file and what
//! was expected in it.

use std::path::Path;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn bad(what: &'static str, path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Pem {
        what,
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Every `CERTIFICATE` block of a PEM file, in order (a chain: leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    load_certs_as("certificate", path)
}

fn load_certs_as(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(what, path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(what, path, "no CERTIFICATE block in this PEM file"));
    }
    Ok(certs)
}

/// The private key of a PEM file (the first key block).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let what = "private key";
    let bytes = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => bad(
            what,
            path,
            "no PRIVATE KEY block (PKCS#8, RSA or EC) in this PEM file",
        ),
        e => bad(what, path, format!("not valid PEM: {e}")),
    })
}

/// The CA file as a trust store: every certificate in it is trusted.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let what = "CA certificate";
    let mut roots = RootCertStore::empty();
    for cert in load_certs_as(what, path)? {
        roots
            .add(cert)
            .map_err(|e| bad(what, path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}
