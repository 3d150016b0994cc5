//! Which servers the fetcher trusts, and why it did not trust one, in words.
//!
//! [`client_config`] builds a fetcher's rustls configuration (ring, TLS 1.2
//! and 1.3, every certificate verified) with the roots of:
//! - the built-in Mozilla roots (webpki-roots), so that a crawl works on a
//!   machine without a CA store;
//! - the system's store, read by rustls-native-certs: the files that
//!   `SSL_CERT_FILE` and `SSL_CERT_DIR` name when either is set (as with
//!   OpenSSL, they replace the system's own files), else the OS's store;
//! - the `--cacert` file (the crawl file's `cacert`): a private CA, or the CA
//!   of a proxy that inspects TLS.
//!
//! They are read once per fetcher, when a run starts. A `--cacert` or
//! `SSL_CERT_FILE` file that cannot be read or holds no certificate, and an
//! `SSL_CERT_DIR` directory that cannot be read, are errors naming the file;
//! a system store that cannot be read is a warning (the built-in roots
//! remain). [`certificate_words`] says in one line why rustls refused a
//! server's certificate.
//!
//! Depends on rustls, rustls-native-certs and webpki-roots only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{CertificateError, ClientConfig, RootCertStore};
use tracing::{debug, warn};

/// The variable naming a file of trusted CA certificates (PEM), as OpenSSL.
pub const CERT_FILE_VAR: &str = "SSL_CERT_FILE";
/// The variable naming directories of trusted CA certificates, `:`-separated.
pub const CERT_DIR_VAR: &str = "SSL_CERT_DIR";

/// A CA setting that cannot be used: which one, and why (one line naming
/// the file).
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct TrustError {
    /// `cacert`, `SSL_CERT_FILE` or `SSL_CERT_DIR`.
    pub setting: &'static str,
    /// What is wrong, naming the file or directory.
    pub reason: String,
}

/// The certificates (PEM) of the CA file at `path`, each one a root rustls
/// accepts; `Err` is one line naming the file: it cannot be read, holds no
/// PEM certificate, or none that can be used.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path)
        .map_err(|error| format!("the CA file {shown} cannot be read: {error}"))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(format!(
            "the CA file {shown} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)"
        ));
    }
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certs.iter().cloned());
    if added == 0 {
        return Err(format!(
            "the CA file {shown} holds no certificate that can be used as a root (none parses)"
        ));
    }
    Ok(certs)
}

/// The roots of the environment: `SSL_CERT_FILE` and `SSL_CERT_DIR` when
/// either is set, else the system's store.
fn environment_roots() -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let file = std::env::var_os(CERT_FILE_VAR).filter(|f| !f.is_empty());
    let dirs: Vec<PathBuf> = std::env::var_os(CERT_DIR_VAR)
        .map(|dirs| std::env::split_paths(&dirs).collect())
        .unwrap_or_default();
    let dirs: Vec<PathBuf> = dirs
        .into_iter()
        .filter(|d| !d.as_os_str().is_empty())
        .collect();
    if file.is_none() && dirs.is_empty() {
        let found = rustls_native_certs::load_native_certs();
        if let Some(error) = found.errors.first() {
            warn!(%error, "the system's CA store cannot be read in full; the built-in roots remain");
        }
        debug!(certificates = found.certs.len(), "the system's CA store");
        return Ok(found.certs);
    }
    let mut certs = Vec::new();
    if let Some(file) = file {
        let read = read_ca_file(Path::new(&file)).map_err(|reason| TrustError {
            setting: CERT_FILE_VAR,
            reason,
        })?;
        certs.extend(read);
    }
    for dir in &dirs {
        if let Err(error) = std::fs::read_dir(dir) {
            return Err(TrustError {
                setting: CERT_DIR_VAR,
                reason: format!("the CA directory {} cannot be read: {error}", dir.display()),
            });
        }
        let found = rustls_native_certs::load_certs_from_paths(None, Some(dir));
        if let Some(error) = found.errors.first() {
            warn!(%error, "{CERT_DIR_VAR}: a file cannot be read; its certificates are left out");
        }
        certs.extend(found.certs);
    }
    Ok(certs)
}

/// The TLS configuration of a fetcher trusting the roots of the module doc,
/// `cacert` among them. ALPN is left to the connector.
pub fn client_config(cacert: Option<&Path>) -> Result<ClientConfig, TrustError> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let (_, ignored) = roots.add_parsable_certificates(environment_roots()?);
    if ignored > 0 {
        debug!(
            ignored,
            "certificates of the system's store that do not parse"
        );
    }
    if let Some(path) = cacert {
        let read = read_ca_file(path).map_err(|reason| TrustError {
            setting: "cacert",
            reason,
        })?;
        roots.add_parsable_certificates(read);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| TrustError {
            setting: "TLS",
            reason: error.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Why rustls refused the handshake, in words, when it is about the
/// server's certificate; `None` for other TLS failures.
pub fn certificate_words(error: &rustls::Error) -> Option<String> {
    let cert = match error {
        rustls::Error::InvalidCertificate(cert) => cert,
        rustls::Error::NoCertificatesPresented => {
            return Some("the server presented no certificate".into());
        }
        _ => return None,
    };
    let words = match cert {
        CertificateError::UnknownIssuer => {
            "the server's certificate is not signed by a trusted CA (give it with --cacert FILE)"
                .into()
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (is this machine's clock right?)".into()
        }
        CertificateError::NotValidForNameContext { presented, .. } if !presented.is_empty() => {
            format!(
                "the server's certificate is for another name ({})",
                presented.join(", ")
            )
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "the server's certificate is for another name".into()
        }
        CertificateError::Revoked => "the server's certificate has been revoked".into(),
        CertificateError::BadSignature => "the server's certificate has a bad signature".into(),
        CertificateError::BadEncoding => "the server's certificate cannot be parsed".into(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "the server's certificate is not meant for a TLS server (its extended key usage)".into()
        }
        CertificateError::UnhandledCriticalExtension => {
            "the server's certificate has a critical extension this build does not know".into()
        }
        CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "the server's certificate is signed with an algorithm this build does not support"
                .into()
        }
        CertificateError::Other(other) => other_words(&format!("{other:?}")),
        other => format!(
            "the server's certificate was refused ({})",
            debug_name(&format!("{other:?}"))
        ),
    };
    Some(words)
}

/// Words for the verifier errors rustls passes on as `Other` (webpki's, by
/// their names).
fn other_words(debug: &str) -> String {
    let name = debug_name(debug);
    match name.as_str() {
        "CaUsedAsEndEntity" => "the server's certificate is a CA certificate (basicConstraints CA:TRUE), which cannot serve a site: give the server a certificate that CA signed, and the CA with --cacert FILE".into(),
        "EndEntityUsedAsCa" => "the server's chain uses a server certificate as a CA".into(),
        "PathLenConstraintViolated" => "the server's chain is longer than a CA in it allows".into(),
        "NameConstraintViolation" => "the server's certificate names a host its CA may not sign for".into(),
        "MaximumPathDepthExceeded" | "MaximumPathBuildCallsExceeded" => {
            "the server's chain is too long to verify".into()
        }
        _ => format!("the server's certificate was refused ({name})"),
    }
}

/// The innermost name of a Debug text: `Other(OtherError(CaUsedAsEndEntity))`
/// gives `CaUsedAsEndEntity`.
fn debug_name(debug: &str) -> String {
    let mut name = debug;
    while let Some((_, inner)) = name.split_once('(') {
        name = inner;
    }
    name.trim_end_matches(')')
        .split([' ', '{', ','])
        .next()
        .unwrap_or(name)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_cannot_be_used_is_named() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let missing = dir.path().join("none.pem");
        let error = read_ca_file(&missing).expect_err("missing");
        assert!(
            error.contains("none.pem") && error.contains("cannot be read"),
            "{error}"
        );
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").expect("write");
        let error = read_ca_file(&junk).expect_err("junk");
        assert!(
            error.contains("junk.pem") && error.contains("holds no certificate"),
            "{error}"
        );
        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let error = read_ca_file(&bad).expect_err("bad");
        assert!(
            error.contains("bad.pem") && error.contains("none parses"),
            "{error}"
        );
        assert!(client_config(Some(&missing)).is_err());
    }

    #[test]
    fn certificate_errors_read_as_words() {
        let words = |e: CertificateError| {
            certificate_words(&rustls::Error::InvalidCertificate(e)).expect("words")
        };
        assert!(words(CertificateError::UnknownIssuer).contains("--cacert FILE"));
        assert!(words(CertificateError::Expired).contains("expired"));
        assert_eq!(
            debug_name("Other(OtherError(CaUsedAsEndEntity))"),
            "CaUsedAsEndEntity"
        );
        assert!(other_words("OtherError(CaUsedAsEndEntity)").contains("CA:TRUE"));
        assert!(other_words("OtherError(Weird { x: 1 })").ends_with("(Weird)"));
        assert!(certificate_words(&rustls::Error::DecryptError).is_none());
    }
}
