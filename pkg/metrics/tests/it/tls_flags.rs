//! The admin server's TLS flags in process: `--tls-min-version`, `--tls-cipher-suites`,
//! `--tls-sni-cert-key` and `--permit-port-sharing`, checked with a rustls client that offers
//! only what a case needs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hypercloud_metrics::tls::{suites, NamedCertKey, TlsOptions, TlsSource};
use hypercloud_metrics::{router, serve, AdminServer, Checks, ServeConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// Accepts any server certificate and remembers it.
#[derive(Debug, Default)]
struct Record(Mutex<Option<CertificateDer<'static>>>);

impl ServerCertVerifier for Record {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.0.lock().expect("lock") = Some(end_entity.clone().into_owned());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A PEM pair for `names`, written to `dir/<file>.crt|.key`.
fn pair(
    dir: &std::path::Path,
    file: &str,
    names: &[&str],
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    CertificateDer<'static>,
) {
    let ck =
        rcgen::generate_simple_self_signed(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("cert");
    let (c, k) = (
        dir.join(format!("{file}.crt")),
        dir.join(format!("{file}.key")),
    );
    std::fs::write(&c, ck.cert.pem()).expect("write");
    std::fs::write(&k, ck.signing_key.serialize_pem()).expect("write");
    (c, k, ck.cert.der().clone())
}

async fn start(
    dir: &std::path::Path,
    options: TlsOptions,
    addr: SocketAddr,
    share: bool,
) -> hypercloud_metrics::Result<AdminServer> {
    let (cert, key, _) = pair(dir, "default", &["localhost"]);
    serve(
        ServeConfig {
            addr,
            tls: TlsSource::Files { cert, key },
            options,
            permit_port_sharing: share,
        },
        router(prometheus::Registry::new(), Checks::new(), None, None),
        std::future::pending(),
    )
    .await
}

/// Handshakes with `addr` offering `versions` and `suites` for `name`: the certificate
/// served, or the handshake's error.
async fn handshake(
    addr: SocketAddr,
    name: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: Option<Vec<rustls::SupportedCipherSuite>>,
) -> Result<CertificateDer<'static>, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(s) = suites {
        provider.cipher_suites = s;
    }
    let record = Arc::new(Record::default());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(record.clone())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    connector
        .connect(ServerName::try_from(name.to_string()).expect("name"), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let cert = record.0.lock().expect("lock").clone();
    cert.ok_or_else(|| "no certificate".into())
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("addr")
}

#[tokio::test]
async fn min_version_and_cipher_suites_limit_the_handshake() {
    let dir = tempfile::tempdir().expect("tmp");
    let options = TlsOptions {
        versions: suites::min_version("VersionTLS13").expect("1.3"),
        ..Default::default()
    };
    let s = start(dir.path(), options, loopback(), false)
        .await
        .expect("serve");
    let tls12 = [&rustls::version::TLS12];
    let err = handshake(s.local_addr, "localhost", &tls12, None)
        .await
        .expect_err("1.2 refused");
    assert!(
        err.to_lowercase().contains("protocol version") || err.contains("alert"),
        "{err}"
    );
    handshake(s.local_addr, "localhost", &[&rustls::version::TLS13], None)
        .await
        .expect("1.3 served");

    let names = ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".to_string()];
    let options = TlsOptions {
        cipher_suites: suites::cipher_suites(&names).expect("suites"),
        ..Default::default()
    };
    let s = start(dir.path(), options, loopback(), false)
        .await
        .expect("serve");
    use rustls::crypto::ring::cipher_suite as cs;
    let other = vec![cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];
    handshake(s.local_addr, "localhost", &tls12, Some(other))
        .await
        .expect_err("a TLS 1.2 suite not listed");
    let listed = vec![cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384];
    handshake(s.local_addr, "localhost", &tls12, Some(listed))
        .await
        .expect("the listed suite");
    // TLS 1.3 suites stay enabled when none is named.
    handshake(s.local_addr, "localhost", &[&rustls::version::TLS13], None)
        .await
        .expect("TLS 1.3");
}

#[tokio::test]
async fn sni_names_choose_the_certificate() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c1, k1, named) = pair(dir.path(), "named", &["metrics.example.com"]);
    let (c2, k2, wildcard) = pair(dir.path(), "wildcard", &["unused.test"]);
    let options = TlsOptions {
        sni: vec![
            NamedCertKey {
                cert: c1,
                key: k1,
                names: vec![],
            },
            format!("{},{}:*.example.com", c2.display(), k2.display())
                .parse()
                .expect("flag"),
        ],
        ..Default::default()
    };
    let s = start(dir.path(), options, loopback(), false)
        .await
        .expect("serve");
    let all = [&rustls::version::TLS13, &rustls::version::TLS12];
    let got = |name: &'static str| handshake(s.local_addr, name, &all, None);
    assert_eq!(got("metrics.example.com").await.expect("named"), named);
    assert_eq!(got("other.example.com").await.expect("wildcard"), wildcard);
    let default = got("localhost").await.expect("default");
    assert!(default != named && default != wildcard);
}

#[tokio::test]
async fn port_sharing_needs_the_flag_on_both() {
    let dir = tempfile::tempdir().expect("tmp");
    let first = start(dir.path(), TlsOptions::default(), loopback(), true)
        .await
        .expect("serve");
    let second = start(dir.path(), TlsOptions::default(), first.local_addr, true)
        .await
        .expect("SO_REUSEPORT: a second listener on the same port");
    assert_eq!(second.local_addr, first.local_addr);
    let err = start(dir.path(), TlsOptions::default(), first.local_addr, false)
        .await
        .err()
        .expect("without --permit-port-sharing the port is taken");
    assert!(err.to_string().starts_with("binding 127.0.0.1:"), "{err}");
}
