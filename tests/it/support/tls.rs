//! Certificates for the `rediss://` and https tests, made in-process with
//! rcgen (no openssl): a CA, a server certificate it signs for `127.0.0.1`
//! and `localhost`, one it signs for another name only, another CA that
//! signed nothing the server shows, and a client certificate from each CA
//! (mutual TLS). Written as PEM files into a
//! temp dir that lives as long as the [`Pki`]; [`Pki::server_config`] is the
//! server side for `support::TestServer::start_https`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The files of one test's certificates.
pub struct Pki {
    dir: tempfile::TempDir,
}

/// A self-signed CA named `name`: its certificate (PEM) and its issuer.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

impl Pki {
    /// Makes the CA, the server's key and certificate, and the other CA.
    pub fn make() -> Pki {
        let dir = tempfile::Builder::new()
            .prefix("legcrawl-pki-")
            .tempdir()
            .expect("pki dir");
        let (ca_pem, issuer) = ca("legcrawl test CA");
        let (other_pem, other_issuer) = ca("legcrawl other CA");
        let key = KeyPair::generate().expect("server key");
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "legcrawl test redis");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        // A certificate of the right CA for a name that is not the server's.
        let wrong_key = KeyPair::generate().expect("wrong-name key");
        let wrong = CertificateParams::new(vec!["elsewhere.example".to_owned()])
            .expect("wrong-name params")
            .signed_by(&wrong_key, &issuer)
            .expect("wrong-name certificate");
        // Client certificates for mutual TLS: one the CA signed, one the
        // other CA did.
        let client = |issuer: &Issuer<'static, KeyPair>| {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
            params
                .distinguished_name
                .push(DnType::CommonName, "legcrawl test worker");
            let cert = params.signed_by(&key, issuer).expect("client certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (client_pem, client_key) = client(&issuer);
        let (other_client_pem, other_client_key) = client(&other_issuer);
        let pki = Pki { dir };
        for (path, text) in [
            (pki.ca(), ca_pem),
            (pki.other_ca(), other_pem),
            (pki.server_cert(), cert.pem()),
            (pki.server_key(), key.serialize_pem()),
            (pki.path("wrong-name.pem"), wrong.pem()),
            (pki.path("wrong-name.key"), wrong_key.serialize_pem()),
            (pki.path("client.pem"), client_pem),
            (pki.path("client.key"), client_key),
            (pki.path("other-client.pem"), other_client_pem),
            (pki.path("other-client.key"), other_client_key),
        ] {
            std::fs::write(path, text).expect("write a PEM file");
        }
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA that signed the server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// Another CA, which signed nothing the server shows.
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.pem")
    }

    /// The server's certificate (for 127.0.0.1 and localhost).
    pub fn server_cert(&self) -> PathBuf {
        self.path("server.pem")
    }

    /// The server certificate's key.
    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    /// A server certificate the CA signed for `elsewhere.example` only (not
    /// 127.0.0.1), and its key.
    pub fn wrong_name(&self) -> (PathBuf, PathBuf) {
        (self.path("wrong-name.pem"), self.path("wrong-name.key"))
    }

    /// A client certificate the CA signed, and its key.
    pub fn client(&self) -> (PathBuf, PathBuf) {
        (self.path("client.pem"), self.path("client.key"))
    }

    /// A client certificate the other CA signed, and its key.
    pub fn other_client(&self) -> (PathBuf, PathBuf) {
        (self.path("other-client.pem"), self.path("other-client.key"))
    }

    /// A TLS server configuration showing the server certificate (for
    /// 127.0.0.1 and localhost, signed by [`Pki::ca`]).
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let cert = CertificateDer::from_pem_file(self.server_cert()).expect("server certificate");
        let key = PrivateKeyDer::from_pem_file(self.server_key()).expect("server key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server TLS configuration");
        Arc::new(config)
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
