//! Optional TLS for the API listener, with rustls: from the operator's files
//! (`--tls-cert-file`, `--tls-private-key-file`) or from the cloud's own CA
//! (`--tls-self-signed`, [`self_signed`]: a CA made once and kept in `<state-dir>/tls/`, and a
//! serving certificate it signs at every start). Handshakes run in their own tasks so a slow
//! or broken client cannot stall accepting others. The metadata service stays plain HTTP, as
//! Nova's is.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hypercloud_cloudprovider::throttle::AcceptBackoff;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::{Error, Result};

/// A certificate chain and its private key, PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where `--tls-self-signed` keeps its CA and serving certificate, under the state directory.
pub(crate) const SELF_SIGNED_DIR: &str = "tls";
/// The CA's certificate: what clients trust (`REQUESTS_CA_BUNDLE`, `clouds.yaml`'s `cacert`).
pub(crate) const CA_FILE: &str = "ca.pem";
const CA_KEY_FILE: &str = "ca-key.pem";
const SERVING_CERT_FILE: &str = "server.pem";
const SERVING_KEY_FILE: &str = "server-key.pem";
/// The CA lives ten years: clients keep trusting the same file across restarts.
const CA_DAYS: i64 = 3650;
/// The serving certificate is made again at every start, so a year is plenty.
const SERVING_DAYS: i64 = 365;

/// What [`self_signed`] made or found: the serving files and the CA's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SelfSigned {
    pub files: TlsFiles,
    pub ca_file: PathBuf,
}

/// The cloud's own CA and a serving certificate for `names` (IP addresses or DNS names), in
/// `<state_dir>/tls/`. The CA is made on first use and kept, so the file clients trust stays
/// the same across restarts; the serving certificate is signed again at every start (for the
/// addresses of this start). Half a CA (the certificate without its key, or the reverse) is an
/// error, not a reason to make a new one that clients would not trust.
pub(crate) fn self_signed(state_dir: &Path, names: &[String]) -> Result<SelfSigned> {
    let dir = state_dir.join(SELF_SIGNED_DIR);
    make_private_dir(&dir)?;
    let ca_file = dir.join(CA_FILE);
    let ca_key_file = dir.join(CA_KEY_FILE);
    let (ca_pem, ca_key) = match (ca_file.exists(), ca_key_file.exists()) {
        (true, true) => {
            let limit = hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES;
            let cert = hypercloud_cloudprovider::input::read_named("the CA", &ca_file, limit)?;
            let key =
                hypercloud_cloudprovider::input::read_named("the CA's key", &ca_key_file, limit)?;
            let cert = String::from_utf8(cert).map_err(|e| load_error(&ca_file, e))?;
            let key = String::from_utf8(key).map_err(|e| load_error(&ca_key_file, e))?;
            let key = rcgen::KeyPair::from_pem(&key).map_err(|e| load_error(&ca_key_file, e))?;
            (cert, key)
        }
        (false, false) => {
            let key = rcgen::KeyPair::generate().map_err(|source| Error::MakeTls {
                path: ca_file.clone(),
                source,
            })?;
            let mut params = rcgen::CertificateParams::default();
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(
                rcgen::DnType::CommonName,
                format!(
                    "hypercloud local cloud CA {}",
                    &crate::time::new_hex_id()[..8]
                ),
            );
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
            params.key_usages = vec![
                rcgen::KeyUsagePurpose::KeyCertSign,
                rcgen::KeyUsagePurpose::CrlSign,
                rcgen::KeyUsagePurpose::DigitalSignature,
            ];
            set_validity(&mut params, CA_DAYS);
            params.serial_number = Some(serial());
            let cert = params.self_signed(&key).map_err(|source| Error::MakeTls {
                path: ca_file.clone(),
                source,
            })?;
            // The key first: a crash between the two leaves a key without a certificate,
            // which the next start reports instead of trusting a CA it cannot sign with.
            write_private(&ca_key_file, key.serialize_pem().as_bytes())?;
            write_private(&ca_file, cert.pem().as_bytes())?;
            tracing::info!(ca = %ca_file.display(), "made the local cloud's CA");
            (cert.pem(), key)
        }
        (has_cert, _) => {
            let (present, missing) = if has_cert {
                (&ca_file, &ca_key_file)
            } else {
                (&ca_key_file, &ca_file)
            };
            return Err(load_error(
                missing,
                format!(
                    "missing while {} exists: restore it, or delete both to make a new CA (clients must then trust the new {CA_FILE})",
                    present.display()
                ),
            ));
        }
    };
    let issuer =
        rcgen::Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(|e| load_error(&ca_file, e))?;
    let serving_file = dir.join(SERVING_CERT_FILE);
    let serving_key_file = dir.join(SERVING_KEY_FILE);
    let make = |source| Error::MakeTls {
        path: serving_file.clone(),
        source,
    };
    let key = rcgen::KeyPair::generate().map_err(make)?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(make)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().map_or("localhost", String::as_str),
    );
    // rustls refuses a serving certificate that could be a CA.
    params.is_ca = rcgen::IsCa::ExplicitNoCa;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, SERVING_DAYS);
    params.serial_number = Some(serial());
    let cert = params.signed_by(&key, &issuer).map_err(make)?;
    write_private(&serving_key_file, key.serialize_pem().as_bytes())?;
    // The chain, so a client that trusts the CA needs nothing else.
    let chain = format!("{}{ca_pem}", cert.pem());
    write_private(&serving_file, chain.as_bytes())?;
    Ok(SelfSigned {
        files: TlsFiles {
            cert_file: serving_file,
            key_file: serving_key_file,
        },
        ca_file,
    })
}

/// Valid from yesterday (clocks of clients differ) for `days`.
fn set_validity(params: &mut rcgen::CertificateParams, days: i64) {
    let day = |offset: i64| {
        let date = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date()
            .checked_add(jiff::Span::new().days(offset))
            .unwrap_or(jiff::civil::Date::MAX);
        // Months and days are 1..=12 and 1..=31, so they fit a u8.
        rcgen::date_time_ymd(
            i32::from(date.year()),
            u8::try_from(date.month()).unwrap_or(1),
            u8::try_from(date.day()).unwrap_or(1),
        )
    };
    params.not_before = day(-1);
    params.not_after = day(days);
}

/// A random positive serial number (16 bytes, the top bit clear).
fn serial() -> rcgen::SerialNumber {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[0] &= 0x7f;
    rcgen::SerialNumber::from_slice(&bytes)
}

/// Creates `dir` (and its parents), readable by its owner only.
fn make_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|source| Error::WriteFile {
        path: dir.to_owned(),
        source,
    })
}

/// Writes `path` whole (write-temp + rename), readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let written = crate::store::write_atomic(path, bytes).and_then(|()| {
        #[cfg(unix)]
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        Ok(())
    });
    written.map_err(|source| Error::WriteFile {
        path: path.to_owned(),
        source,
    })
}

fn load_error(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::LoadTls {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Reads the files into a rustls server configuration (HTTP/1.1); with `client_ca`, a client
/// must present a certificate signed by one of its CAs (the handshake fails otherwise).
pub(crate) fn server_config(
    files: &TlsFiles,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>> {
    // Read by us, bounded and regular files only: rustls' own file readers would read
    // /dev/zero until memory runs out.
    let limit = hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES;
    let cert_pem =
        hypercloud_cloudprovider::input::read_named("--tls-cert-file", &files.cert_file, limit)?;
    let key_pem = hypercloud_cloudprovider::input::read_named(
        "--tls-private-key-file",
        &files.key_file,
        limit,
    )?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| load_error(&files.cert_file, e))?;
    if certs.is_empty() {
        return Err(load_error(
            &files.cert_file,
            "no PEM certificate in the file",
        ));
    }
    let key =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| load_error(&files.key_file, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| load_error(&files.cert_file, e))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = hypercloud_cloudprovider::input::read_named("--tls-client-ca", path, limit)?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| load_error(path, e))?;
                roots.add(cert).map_err(|e| load_error(path, e))?;
            }
            if roots.is_empty() {
                return Err(load_error(path, "no PEM certificate in the file"));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| load_error(path, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| load_error(&files.key_file, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener handing axum TLS streams whose handshake has completed.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor_task: JoinHandle<()>,
}

impl TlsListener {
    pub(crate) fn new(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
    ) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        let acceptor_task = tokio::spawn(async move {
            let mut backoff = AcceptBackoff::new("local cloud API TLS connection");
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(conn) => {
                        backoff.succeeded();
                        conn
                    }
                    Err(error) => {
                        // Out of file descriptors and the like: back off, do not spin.
                        backoff.failed(&error).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            ready,
            local,
            acceptor_task,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor_task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The acceptor task only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// A plain TCP listener for axum whose accept errors (the open-files limit) back off and warn
/// through the shared [`AcceptBackoff`], as every other accept loop of the process does.
pub(crate) struct PlainListener {
    tcp: TcpListener,
    backoff: AcceptBackoff,
}

impl PlainListener {
    pub(crate) fn new(tcp: TcpListener, what: &'static str) -> Self {
        Self {
            tcp,
            backoff: AcceptBackoff::new(what),
        }
    }
}

impl axum::serve::Listener for PlainListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.tcp.accept().await {
                Ok(conn) => {
                    self.backoff.succeeded();
                    return conn;
                }
                Err(error) => self.backoff.failed(&error).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
