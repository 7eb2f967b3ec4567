//! Optional TLS for the API listener (`--tls-cert-file`, `--tls-private-key-file`), with rustls.
//! Handshakes run in their own tasks so a slow or broken client cannot stall accepting others.
//! The metadata service stays plain HTTP, as Nova's is.

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

fn load_error(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::LoadTls {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Reads the files into a rustls server configuration (HTTP/1.1).
pub(crate) fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>> {
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
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| load_error(&files.cert_file, e))?
        .with_no_client_auth()
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
