//! The serving certificate: from `--tls-cert-file`/`--tls-private-key-file`, or self-signed
//! as upstream's `MaybeDefaultWithSelfSignedCerts` (for `localhost`, `127.0.0.1` and the bind
//! address; kept in `--cert-dir/<component>.crt|.key` when a cert dir is given, so restarts
//! serve the same certificate).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::{Error, Result};

pub mod sni;
pub mod suites;

pub use sni::NamedCertKey;

/// Where the certificate comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum TlsSource {
    /// PEM files.
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
    },
    /// Generated; saved in (and reused from) `cert_dir` if given.
    SelfSigned {
        /// `--cert-dir`.
        cert_dir: Option<PathBuf>,
        /// Names the files `<pair_name>.crt`/`.key`.
        pair_name: String,
        /// Added to the certificate's IP SANs (besides 127.0.0.1).
        bind_address: IpAddr,
    },
}

/// PEM certificate and key, as served.
#[derive(Clone, Debug)]
pub struct CertPair {
    /// Certificate chain, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
}

impl TlsSource {
    /// Loads or generates the pair.
    pub fn load(&self) -> Result<CertPair> {
        match self {
            TlsSource::Files { cert, key } => Ok(CertPair {
                cert_pem: read("--tls-cert-file", cert)?,
                key_pem: read("--tls-private-key-file", key)?,
            }),
            TlsSource::SelfSigned {
                cert_dir,
                pair_name,
                bind_address,
            } => {
                if let Some(dir) = cert_dir {
                    let (c, k) = pair_paths(dir, pair_name);
                    if c.exists() && k.exists() {
                        return Ok(CertPair {
                            cert_pem: read("--cert-dir", &c)?,
                            key_pem: read("--cert-dir", &k)?,
                        });
                    }
                }
                let pair = self_signed(pair_name, *bind_address)?;
                if let Some(dir) = cert_dir {
                    let (c, k) = pair_paths(dir, pair_name);
                    write(dir, &c, &pair.cert_pem)?;
                    write(dir, &k, &pair.key_pem)?;
                    tracing::info!(cert = %c.display(), "wrote self-signed serving certificate");
                }
                Ok(pair)
            }
        }
    }
}

fn pair_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    )
}

/// A PEM file named by `flag`: a regular file of at most 1 MiB (upstream's CA bundle limit,
/// and far above any certificate chain).
pub fn read(flag: &str, path: &Path) -> Result<String> {
    hypercloud_cloudprovider::input::read_named_text(
        flag,
        path,
        hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES,
    )
    .map_err(Error::ReadTlsFile)
}

fn write(dir: &Path, path: &Path, text: &str) -> Result<()> {
    let wrap = |source| Error::WriteCertificate {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(wrap)?;
    std::fs::write(path, text).map_err(wrap)
}

/// A self-signed certificate for `localhost`, `127.0.0.1`, the host name and the bind address.
pub fn self_signed(name: &str, bind_address: IpAddr) -> Result<CertPair> {
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if !bind_address.is_unspecified() && !bind_address.is_loopback() {
        sans.push(bind_address.to_string());
    }
    if !name.is_empty() {
        sans.push(name.to_string());
    }
    let ck = rcgen::generate_simple_self_signed(sans)?;
    Ok(CertPair {
        cert_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
    })
}

/// How the handshake is done, besides the certificate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsOptions {
    /// Ask clients for a certificate (optional for them). The handshake checks only that
    /// the client holds the certificate's key; the authenticators verify the chain against
    /// their CAs ([`crate::authn`]), as upstream's `tls.RequestClientCert`.
    pub request_client_certificates: bool,
    /// `--tls-min-version`: the versions offered ([`suites::min_version`]); empty: rustls'
    /// defaults (TLS 1.2 and 1.3).
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    /// `--tls-cipher-suites` ([`suites::cipher_suites`]); `None`: rustls' defaults.
    pub cipher_suites: Option<Vec<rustls::SupportedCipherSuite>>,
    /// `--tls-sni-cert-key`: certificates chosen by SNI name ([`sni`]).
    pub sni: Vec<NamedCertKey>,
}

/// The rustls server configuration for `pair` (HTTP/1.1).
pub fn server_config(
    pair: &CertPair,
    source: &TlsSource,
    options: &TlsOptions,
) -> Result<Arc<rustls::ServerConfig>> {
    let (cert_path, key_path) = match source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
        TlsSource::SelfSigned { .. } => ("<self-signed>".into(), "<self-signed>".into()),
    };
    let (certs, key) = parse_pair(pair, cert_path, key_path)?;
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = &options.cipher_suites {
        provider.cipher_suites = suites.clone();
    }
    let provider = Arc::new(provider);
    let versions = if options.versions.is_empty() {
        rustls::DEFAULT_VERSIONS.to_vec()
    } else {
        options.versions.clone()
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)?;
    let builder = if options.request_client_certificates {
        builder.with_client_cert_verifier(Arc::new(AnyClientCertificate {
            algorithms: provider.signature_verification_algorithms,
        }))
    } else {
        builder.with_no_client_auth()
    };
    let mut config = if options.sni.is_empty() {
        builder.with_single_cert(certs, key)?
    } else {
        let default = certified_key(certs, &key, &provider)?;
        let mut named = Vec::new();
        for n in &options.sni {
            let pair = CertPair {
                cert_pem: read("--tls-sni-cert-key", &n.cert)?,
                key_pem: read("--tls-sni-cert-key", &n.key)?,
            };
            let (certs, key) = parse_pair(&pair, n.cert.clone(), n.key.clone())?;
            named.push((certified_key(certs, &key, &provider)?, n.names.clone()));
        }
        let resolver =
            sni::SniResolver::new(default, named).map_err(|message| Error::ParseTlsFile {
                path: "--tls-sni-cert-key".into(),
                message,
            })?;
        builder.with_cert_resolver(Arc::new(resolver))
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A certificate and its key, checked to belong together.
fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: &PrivateKeyDer<'static>,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<rustls::sign::CertifiedKey>> {
    let key = provider.key_provider.load_private_key(key.clone_key())?;
    let ck = rustls::sign::CertifiedKey::new(certs, key);
    ck.keys_match()?;
    Ok(Arc::new(ck))
}

/// The PEM pair parsed; errors name the files.
fn parse_pair(
    pair: &CertPair,
    cert_path: PathBuf,
    key_path: PathBuf,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| Error::ParseTlsFile {
                path: cert_path.clone(),
                message: e.to_string(),
            })?;
    if certs.is_empty() {
        return Err(Error::ParseTlsFile {
            path: cert_path,
            message: "no CERTIFICATE block".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).map_err(|e| {
        Error::ParseTlsFile {
            path: key_path,
            message: e.to_string(),
        }
    })?;
    Ok((certs, key))
}

/// Takes any client certificate whose key the client proves it holds; the chain is
/// verified per authenticator.
#[derive(Debug)]
struct AnyClientCertificate {
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::server::danger::ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_pair_is_written_once_and_reused() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = TlsSource::SelfSigned {
            cert_dir: Some(dir.path().join("certs")),
            pair_name: "cloud-controller-manager".into(),
            bind_address: "0.0.0.0".parse().expect("ip"),
        };
        let first = src.load().expect("generate");
        assert!(dir
            .path()
            .join("certs/cloud-controller-manager.crt")
            .exists());
        let again = src.load().expect("reuse");
        assert_eq!(first.cert_pem, again.cert_pem);
        server_config(&again, &src, &TlsOptions::default()).expect("usable");
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let cert = dir.path().join("tls.crt");
        std::fs::write(&cert, "not pem").expect("write");
        let src = TlsSource::Files {
            cert: cert.clone(),
            key: dir.path().join("missing.key"),
        };
        let err = src.load().expect_err("missing key");
        assert!(err.to_string().contains("missing.key"), "{err}");
        let pair = CertPair {
            cert_pem: "not pem".into(),
            key_pem: String::new(),
        };
        let err = server_config(
            &pair,
            &TlsSource::Files {
                cert,
                key: "k".into(),
            },
            &TlsOptions::default(),
        )
        .expect_err("bad pem");
        assert!(err.to_string().contains("tls.crt"), "{err}");
    }
}
