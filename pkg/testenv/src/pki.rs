//! Test certificates: a CA and a TLS client certificate it signed, as PEM files, for a local
//! cloud started with `--tls-client-ca` and the clients that must present a certificate to it.

use std::path::{Path, PathBuf};

/// The PEM files [`client_pki`] writes.
#[derive(Debug, Clone)]
pub struct ClientPki {
    /// The CA's certificate (what `--tls-client-ca` trusts).
    pub ca: PathBuf,
    /// The client certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl ClientPki {
    /// The certificate and key as one PEM text (`reqwest::Identity::from_pem`).
    pub fn identity_pem(&self) -> Vec<u8> {
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        [read(&self.cert), read(&self.key)].concat()
    }
}

/// A new CA named `name` and a client certificate (extended key usage clientAuth) it signed,
/// written to `dir` as `<name>-ca.pem`, `<name>.crt` and `<name>.key`.
pub fn client_pki(dir: &Path, name: &str) -> ClientPki {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} CA"));
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("client key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("client params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} client"));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).expect("client certificate");
    let pki = ClientPki {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    for (path, text) in [
        (&pki.ca, ca.pem()),
        (&pki.cert, cert.pem()),
        (&pki.key, key.serialize_pem()),
    ] {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    pki
}
