//! The one HTTP client configuration every provider builds its `reqwest` client from: the
//! cloud API clients (OpenStack, Compute Engine, vCenter) and the metadata clients. A provider
//! states what it wants (timeouts, user agent, a CA file named by its config key, whether TLS
//! verification is off, whether redirects are refused, whether a proxy may be used) and gets
//! a client or an error naming the failed step, the cause kept as `source`. Upstream
//! equivalent: the `http.Transport`/`tls.Config` set-up each Go provider writes by hand
//! (gophercloud's `openstack.NewClient` with `ca-file`/`tls-insecure`, govmomi's
//! `soap.NewClient` with `insecure-flag` and `ca-file`); stackable's `tls_verification.rs`
//! is the model of one typed client config.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::input::{self, InputFileError, MAX_INPUT_FILE_BYTES};

/// What a provider's HTTP client must do.
#[derive(Clone, Debug)]
pub struct HttpClientConfig {
    /// The whole of one request (connect, send, answer).
    pub request_timeout: Duration,
    /// Connecting alone; never longer than the request timeout.
    pub connect_timeout: Duration,
    /// Sent as `User-Agent` (reqwest sends none by default).
    pub user_agent: Option<&'static str>,
    /// Extra trusted roots: a PEM bundle, and the config key that named it (`[Global]
    /// ca-file`) for messages.
    pub ca_file: Option<(String, PathBuf)>,
    /// TLS certificates are not verified (`tls-insecure`, `insecure-flag`). Both upstream
    /// providers accept it without a refusal or warning; so does this.
    pub insecure: bool,
    /// Redirects are not followed (metadata servers never redirect; the caller refuses the
    /// 3xx with [`crate::http_body::refuse_redirect`]).
    pub refuse_redirects: bool,
    /// No proxy from the environment (link-local metadata servers).
    pub no_proxy: bool,
    /// The local address to connect from.
    pub local_address: Option<IpAddr>,
    /// The server certificate's fingerprint, with the config key that gave it: that certificate
    /// is trusted whoever signed it, and no other (govmomi's `SetThumbprint`, for a vCenter
    /// with a self-signed certificate); `insecure` still wins, and no CA is consulted.
    pub thumbprint: Option<(String, Thumbprint)>,
    /// A TLS client certificate and its key (PEM files), with the config keys that named
    /// them (`[Global] cert-file`, `key-file`), presented to servers that ask for one.
    pub client_identity: Option<ClientIdentity>,
}

/// A TLS client certificate: the PEM files of the certificate (chain) and its private key,
/// each with the config key that named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate's config key (`[Global] cert-file`).
    pub cert_key: String,
    /// The certificate (chain) file.
    pub cert_file: PathBuf,
    /// The private key's config key (`[Global] key-file`).
    pub key_key: String,
    /// The private key file.
    pub key_file: PathBuf,
}

/// A certificate fingerprint as vSphere prints it (`AB:CD:...`): SHA-1 (20 bytes), or SHA-256
/// (32 bytes), upper or lower case, with or without the colons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thumbprint(Vec<u8>);

impl Thumbprint {
    /// Parses `AB:CD:...`; the error says what is wrong (the text is not secret: a fingerprint
    /// of a public certificate).
    pub fn parse(s: &str) -> Result<Thumbprint, String> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        if !hex.len().is_multiple_of(2) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{s:?} is not a certificate thumbprint (hex byte pairs, AB:CD:...)"
            ));
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect();
        if bytes.len() != 20 && bytes.len() != 32 {
            return Err(format!(
                "{s:?} is {} bytes; a thumbprint is a SHA-1 (20) or SHA-256 (32) digest",
                bytes.len()
            ));
        }
        Ok(Thumbprint(bytes))
    }

    /// The same digest of `der` (SHA-1 or SHA-256 as this one is).
    fn of(&self, der: &[u8]) -> Thumbprint {
        let alg = if self.0.len() == 20 {
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY
        } else {
            &ring::digest::SHA256
        };
        Thumbprint(ring::digest::digest(alg, der).as_ref().to_vec())
    }
}

impl std::fmt::Display for Thumbprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|b| format!("{b:02X}")).collect();
        f.write_str(&parts.join(":"))
    }
}

/// Trusts the one certificate whose fingerprint is `want`; the handshake's signatures are
/// still checked with rustls' own algorithms.
#[derive(Debug)]
struct PinnedCertificate {
    key: String,
    want: Thumbprint,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let got = self.want.of(end_entity.as_ref());
        if got == self.want {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "{}: the server's certificate has thumbprint {got}, not {}",
                self.key, self.want
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl HttpClientConfig {
    /// A client with these timeouts (the connect timeout capped by the request timeout) that
    /// verifies TLS, follows redirects and uses the environment's proxy.
    pub fn new(request_timeout: Duration, connect_timeout: Duration) -> Self {
        HttpClientConfig {
            request_timeout,
            connect_timeout: connect_timeout.min(request_timeout),
            user_agent: None,
            ca_file: None,
            insecure: false,
            refuse_redirects: false,
            no_proxy: false,
            local_address: None,
            thumbprint: None,
            client_identity: None,
        }
    }

    /// Presents this TLS client certificate, when given.
    pub fn client_identity(mut self, identity: Option<ClientIdentity>) -> Self {
        self.client_identity = identity;
        self
    }

    /// Sends `agent` as `User-Agent`.
    pub fn user_agent(mut self, agent: &'static str) -> Self {
        self.user_agent = Some(agent);
        self
    }

    /// Trusts the certificates of the PEM bundle `path`, named `key` in messages.
    pub fn ca_file(mut self, key: &str, path: Option<&Path>) -> Self {
        self.ca_file = path.map(|p| (key.to_owned(), p.to_owned()));
        self
    }

    /// Trusts exactly the certificate with this fingerprint (named `key` in messages), when
    /// given.
    pub fn thumbprint(mut self, key: &str, thumbprint: Option<&Thumbprint>) -> Self {
        self.thumbprint = thumbprint.map(|t| (key.to_owned(), t.clone()));
        self
    }

    /// Does not verify TLS certificates when `insecure`.
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// For a metadata server: no redirects followed, no proxy, connecting from `local`.
    pub fn metadata_server(mut self, local: Option<IpAddr>) -> Self {
        self.refuse_redirects = true;
        self.no_proxy = true;
        self.local_address = local;
        self
    }

    /// Redirects are not followed.
    pub fn refuse_redirects(mut self) -> Self {
        self.refuse_redirects = true;
        self
    }

    /// The client.
    pub fn build(&self) -> Result<reqwest::Client, HttpClientError> {
        let mut b = reqwest::Client::builder()
            .timeout(self.request_timeout)
            .connect_timeout(self.connect_timeout.min(self.request_timeout));
        if let Some(agent) = self.user_agent {
            b = b.user_agent(agent);
        }
        if self.insecure {
            b = b.danger_accept_invalid_certs(true);
        } else if let Some((key, want)) = &self.thumbprint {
            if let Some(id) = &self.client_identity {
                return Err(HttpClientError::ClientIdentity {
                    key: id.cert_key.clone(),
                    path: id.cert_file.clone(),
                    reason: format!("a client certificate with {key} is not supported"),
                });
            }
            let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
            let verifier = PinnedCertificate {
                key: key.clone(),
                want: want.clone(),
                algorithms: provider.signature_verification_algorithms,
            };
            let tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(HttpClientError::Tls)?
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
                .with_no_client_auth();
            return self.finish(b.use_preconfigured_tls(tls));
        }
        self.finish(b)
    }

    fn finish(&self, mut b: reqwest::ClientBuilder) -> Result<reqwest::Client, HttpClientError> {
        if self.refuse_redirects {
            b = b.redirect(reqwest::redirect::Policy::none());
        }
        if self.no_proxy {
            b = b.no_proxy();
        }
        if let Some(addr) = self.local_address {
            b = b.local_address(addr);
        }
        if let Some(id) = &self.client_identity {
            let mut pem = input::read_named(&id.cert_key, &id.cert_file, MAX_INPUT_FILE_BYTES)?;
            let key = input::read_named(&id.key_key, &id.key_file, MAX_INPUT_FILE_BYTES)?;
            // reqwest reads the key from the same PEM text, after the certificates.
            if !pem.ends_with(b"\n") {
                pem.push(b'\n');
            }
            pem.extend_from_slice(&key);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                HttpClientError::ClientIdentity {
                    key: format!("{} with {}", id.cert_key, id.key_key),
                    path: id.cert_file.clone(),
                    // Names what is wrong, never the key material.
                    reason: crate::Chain(&e).to_string(),
                }
            })?;
            b = b.identity(identity);
        }
        if let Some((key, path)) = self.ca_file.as_ref().filter(|_| self.thumbprint.is_none()) {
            let pem = input::read_named(key, path, MAX_INPUT_FILE_BYTES)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                HttpClientError::ParseCaFile {
                    key: key.clone(),
                    path: path.clone(),
                    source,
                }
            })?;
            for cert in certs {
                b = b.add_root_certificate(cert);
            }
        }
        b.build().map_err(HttpClientError::Build)
    }
}

/// Building a provider's HTTP client failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// The CA file is missing, not a regular file or over the input limit.
    #[error(transparent)]
    ReadCaFile(#[from] InputFileError),
    /// The CA file is not a PEM bundle.
    #[error("{key} {}", path.display())]
    ParseCaFile {
        /// The config key that named it.
        key: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: reqwest::Error,
    },
    /// The client certificate or its key cannot be used.
    #[error("{key} {}: {reason}", path.display())]
    ClientIdentity {
        /// The config keys that named them.
        key: String,
        /// The certificate file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the TLS configuration of a pinned certificate.
    #[error("configuring TLS for a certificate thumbprint")]
    Tls(#[source] rustls::Error),
    /// reqwest refused the configuration (no TLS backend, for instance).
    #[error("building the client")]
    Build(#[source] reqwest::Error),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Chain;

    #[test]
    fn thumbprints_parse_in_vsphere_forms_and_print_as_vsphere_does() {
        let t = Thumbprint::parse("3f:95:12:a0:2b:6c:77:e1:90:ab:cd:ef:01:23:45:67:89:ab:cd:ef")
            .unwrap();
        assert_eq!(
            t.to_string(),
            "3F:95:12:A0:2B:6C:77:E1:90:AB:CD:EF:01:23:45:67:89:AB:CD:EF"
        );
        assert_eq!(
            Thumbprint::parse(&t.to_string().replace(':', "")).unwrap(),
            t
        );
        assert_eq!(Thumbprint::parse(&"ab".repeat(32)).unwrap().0.len(), 32);
        for (bad, says) in [
            ("xyz", "not a certificate thumbprint"),
            ("ABC", "not a certificate thumbprint"),
            ("AB:CD", "2 bytes"),
            ("", "0 bytes"),
        ] {
            let e = Thumbprint::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        // The digest of the same kind as the pinned one.
        let sha256 = Thumbprint::parse(&"00".repeat(32)).unwrap();
        assert_eq!(sha256.of(b"x").0.len(), 32);
        assert_eq!(t.of(b"x").0.len(), 20);
        let c = HttpClientConfig::new(Duration::from_secs(1), Duration::from_secs(1))
            .thumbprint("[Global] thumbprint", Some(&t));
        assert!(c.build().is_ok());
    }

    #[test]
    fn connect_timeout_never_exceeds_the_request_timeout() {
        let c = HttpClientConfig::new(Duration::from_secs(2), Duration::from_secs(10));
        assert_eq!(c.connect_timeout, Duration::from_secs(2));
        assert!(c.build().is_ok());
    }

    #[test]
    fn ca_file_errors_name_the_key_and_keep_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = HttpClientConfig::new(Duration::from_secs(1), Duration::from_secs(1))
            .ca_file("[Global] ca-file", Some(&missing))
            .build()
            .unwrap_err();
        assert!(matches!(e, HttpClientError::ReadCaFile(_)), "{e:?}");
        assert!(
            e.to_string().starts_with("[Global] ca-file: cannot read"),
            "{e}"
        );

        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = HttpClientConfig::new(Duration::from_secs(1), Duration::from_secs(1))
            .ca_file("ca-file", Some(&bad))
            .build()
            .unwrap_err();
        assert_eq!(e.to_string(), format!("ca-file {}", bad.display()));
        assert!(std::error::Error::source(&e).is_some());
        assert!(Chain(&e).to_string().len() > e.to_string().len());
    }
}
