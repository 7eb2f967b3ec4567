//! A local cloud in process serving the Azure dialect over TLS, the `azure.json` and
//! AzureStackCloud environment file that point the provider at it (signed in as the cloud's
//! user: client ID its Keystone ID as a GUID, secret its password), and a tiny TLS server for
//! answers the local cloud never gives.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypercloud_localcloud::faults::Faults;
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_azure::config::{Config, Environment};
use hypercloud_providers_azure::{Arm, ArmOptions};
use serde_json::{json, Value};

pub const TENANT: &str = hypercloud_localcloud_defaults::AZURE_TENANT_ID;
pub const LOCATION: &str = "regionone";

/// A self-signed certificate for 127.0.0.1: its PEM and key PEM.
pub fn self_signed() -> (String, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

pub struct Cloud {
    pub handle: Option<ServerHandle>,
    pub dir: tempfile::TempDir,
    pub config: ServerConfig,
    pub url: String,
    /// The certificate the cloud serves (the CA to trust).
    pub ca: PathBuf,
    /// The cloud's user as an Entra client: its Keystone ID in GUID form.
    pub client_id: String,
    /// The project as a subscription.
    pub subscription_id: String,
}

fn guid(hex: &str) -> String {
    uuid::Uuid::try_parse(hex).unwrap().hyphenated().to_string()
}

impl Cloud {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let ca = dir.path().join("tls.crt");
        let key_file = dir.path().join("tls.key");
        std::fs::write(&ca, cert).unwrap();
        std::fs::write(&key_file, key).unwrap();
        let mut config = ServerConfig::ephemeral(dir.path().join("state"));
        config.tls = Some(hypercloud_localcloud::TlsFiles {
            cert_file: ca.clone(),
            key_file,
        });
        let handle = Server::bind(config.clone()).await.unwrap();
        // Restarts keep the address, so a client made before one still reaches the cloud.
        config.listen = handle.api_addr();
        let url = handle.api_url().to_owned();
        let http = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap(),
            )
            .build()
            .unwrap();
        let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
            "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}});
        let resp = http
            .post(format!("{url}/identity/v3/auth/tokens"))
            .json(&auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        let token: Value = resp.json().await.unwrap();
        Cloud {
            handle: Some(handle),
            client_id: guid(token["token"]["user"]["id"].as_str().unwrap()),
            subscription_id: guid(token["token"]["project"]["id"].as_str().unwrap()),
            dir,
            config,
            url,
            ca,
        }
    }

    /// Stops the cloud and starts it again on the same state and address with `faults`.
    pub async fn restart_with(&mut self, faults: Faults) {
        self.handle.take().unwrap().shutdown().await.unwrap();
        self.config.faults = faults;
        let deadline = Instant::now() + Duration::from_secs(10);
        let handle = loop {
            match Server::bind(self.config.clone()).await {
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!(handle.api_url(), self.url);
        self.handle = Some(handle);
    }

    /// `azure.json` for this cloud: `cloud: AzureStackCloud`, the user's client secret, and
    /// `extra` keys (`"cloudProviderBackoff": true, ...`).
    pub fn azure_json(&self, secret: &str, extra: &str) -> String {
        format!(
            r#"{{"cloud": "AzureStackCloud", "tenantId": "{TENANT}",
                "subscriptionId": "{}", "resourceGroup": "rg", "location": "{LOCATION}",
                "aadClientId": "{}", "aadClientSecret": "{secret}"{extra}}}"#,
            self.subscription_id, self.client_id
        )
    }

    /// Writes go-autorest's environment file for the cloud and reads `azure.json` with it, as
    /// the provider will: `AZURE_ENVIRONMENT_FILEPATH` names the file.
    pub fn config(&self, azure_json: &str) -> (Config, Environment) {
        let env_file = self.dir.path().join("azurestackcloud.json");
        std::fs::write(
            &env_file,
            json!({
                "name": "HypercloudLocal",
                "resourceManagerEndpoint": self.url,
                "activeDirectoryEndpoint": self.url,
                "serviceManagementEndpoint": "https://management.core.windows.net/",
            })
            .to_string(),
        )
        .unwrap();
        let azure_json_file = self.dir.path().join("azure.json");
        std::fs::write(&azure_json_file, azure_json).unwrap();
        let config = Config::parse(
            &std::fs::read_to_string(&azure_json_file).unwrap(),
            &azure_json_file.display().to_string(),
        )
        .unwrap();
        let path = env_file.display().to_string();
        let env = config
            .resolve_environment(
                |k| (k == "AZURE_ENVIRONMENT_FILEPATH").then(|| path.clone()),
                |p| std::fs::read_to_string(p),
            )
            .unwrap();
        (config, env)
    }

    /// Options that trust the cloud's certificate through `REQUESTS_CA_BUNDLE`.
    pub fn options(&self) -> ArmOptions {
        let ca = self.ca.display().to_string();
        ArmOptions::from_lookup(|k| (k == "REQUESTS_CA_BUNDLE").then(|| ca.clone()))
    }

    /// A client of the cloud with `extra` azure.json keys.
    pub fn arm(&self, extra: &str) -> Arm {
        let (config, env) = self.config(&self.azure_json("hypercloud", extra));
        Arm::new(&config, &env, &self.options()).unwrap()
    }

    pub async fn shutdown(mut self) {
        self.handle.take().unwrap().shutdown().await.unwrap();
    }
}

/// Serves `router` over TLS on 127.0.0.1 with a new self-signed certificate: its base URL
/// and the certificate's file (in `dir`).
pub async fn tls_server(router: axum::Router, dir: &Path) -> (String, PathBuf) {
    let (cert_pem, key_pem) = self_signed();
    let ca = dir.join("tiny-tls.crt");
    std::fs::write(&ca, &cert_pem).unwrap();
    use rustls_pki_types::pem::PemObject as _;
    let certs =
        vec![rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()];
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("https://{addr}"), ca)
}

/// Serves `router` over plain HTTP on 127.0.0.1 (an IMDS stand-in): its base URL.
pub async fn http_server(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}
