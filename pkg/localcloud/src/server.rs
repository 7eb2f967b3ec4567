//! Starting and stopping the local cloud in a process: open the state directory (taking its
//! lock), seed it on first start, bind the API and metadata listeners and serve until told to
//! stop. [`Server::bind`] is what `serve`, the operator CLI's offline mode and tests use.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::{self, compute, identity, network, ApiError, Cloud};
use crate::store::{self, Read, Store};
use crate::tls::{self, PlainListener, TlsListener};
use crate::{defaults, Error, Result};

pub(crate) use crate::config::check_location;
pub use crate::config::{ServerConfig, MAX_TOKEN_TTL};

/// Entry point: see [`Server::bind`].
#[derive(Debug)]
pub struct Server;

/// A running server. Dropping it does not stop it; call [`ServerHandle::shutdown`].
#[derive(Debug)]
pub struct ServerHandle {
    api_addr: SocketAddr,
    metadata_addr: Option<SocketAddr>,
    base_url: String,
    tls_ca_file: Option<std::path::PathBuf>,
    store: Arc<Store>,
    dataplane: Arc<crate::dataplane::DataPlane>,
    backing: Arc<crate::backing::Backing>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<std::io::Result<()>>>,
}

/// Written to `<state_dir>/server.json` while a server runs, for the operator CLI.
pub(crate) const SERVER_FILE: &str = "server.json";

impl Server {
    /// Opens the state directory (refusing one another server holds), seeds it on first start,
    /// binds the listeners and starts serving in the background.
    pub async fn bind(mut config: ServerConfig) -> Result<ServerHandle> {
        config.validate()?;
        let dir = config.state_dir.clone();
        let store = tokio::task::spawn_blocking(move || Store::open(&dir))
            .await
            .map_err(|e| Error::Serve(e.to_string()))??;
        let store = Arc::new(store);

        let api_listener =
            tokio::net::TcpListener::bind(config.listen)
                .await
                .map_err(|source| Error::Bind {
                    addr: config.listen,
                    source,
                })?;
        let api_addr = api_listener.local_addr().map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
        let metadata_listener = match config.metadata_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| Error::Bind { addr, source })?,
            ),
            None => None,
        };
        let metadata_addr = match &metadata_listener {
            Some(l) => Some(l.local_addr().map_err(|source| Error::Bind {
                addr: api_addr,
                source,
            })?),
            None => None,
        };
        // The state directory is ours (locked): make or reuse its CA.
        let mut tls_ca_file = config.tls.as_ref().map(|t| t.cert_file.clone());
        if config.tls_self_signed {
            let names = serving_names(api_addr, config.public_url.as_deref());
            let made = tls::self_signed(&config.state_dir, &names)?;
            tracing::info!(
                ca = %made.ca_file.display(),
                "serving TLS with the local cloud's own CA; clients trust its certificate (REQUESTS_CA_BUNDLE)"
            );
            tls_ca_file = Some(made.ca_file);
            config.tls = Some(made.files);
        }
        let tls_config = config
            .tls
            .as_ref()
            .map(|files| tls::server_config(files, config.tls_client_ca.as_deref()))
            .transpose()?;
        let scheme = if tls_config.is_some() {
            "https"
        } else {
            "http"
        };
        let base_url = config
            .public_url
            .clone()
            .map(|u| u.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| format!("{scheme}://{api_addr}"));
        let dataplane =
            crate::dataplane::DataPlane::new(store.clone(), config.enforce_member_security_groups);
        let backing = Arc::new(crate::backing::Backing::new(
            config.volume_backing,
            &config.state_dir,
        ));
        let cloud = Arc::new(Cloud {
            backing: backing.clone(),
            dataplane: dataplane.clone(),
            store: store.clone(),
            faults: config.faults.clone(),
            requests: Default::default(),
            config,
            base_url: base_url.clone(),
        });
        seed(&cloud).await?;
        let settled = cloud
            .write(api::volume::settle_pending)
            .await
            .map_err(|e| Error::Serve(format!("settling volumes failed: {}", e.message)))?;
        if settled > 0 {
            tracing::info!(settled, "finished volume transitions a stopped server left");
        }
        {
            let (backing, store) = (backing.clone(), store.clone());
            tokio::task::spawn_blocking(move || backing.sync_all(&store))
                .await
                .map_err(|e| Error::Serve(e.to_string()))?;
        }
        let drives = cloud.config.config_drive_dir();
        let repaired = cloud
            .store
            .read(|r| crate::model::config_drive::repair(&drives, r))?;
        if repaired > 0 {
            tracing::info!(repaired, "rewrote missing or stale config drives");
        }

        // Written before serving: a client that got an answer from the API (local-up polls
        // it) may at once run `local-cloud instance create`, which reads this file; the
        // listeners are bound, so connections made before the serve tasks run just wait.
        let info = json!({
            "api_url": base_url,
            "metadata_url": metadata_addr.map(|a| format!("http://{a}")),
            "tls_cert_file": cloud.config.tls.as_ref().map(|t| t.cert_file.display().to_string()),
            // What a client trusts: the CA of --tls-self-signed, else the served certificate.
            "tls_ca_file": tls_ca_file.as_ref().map(|f| f.display().to_string()),
            "pid": std::process::id(),
            "volume_backing": backing.mode().as_str(),
            // Where a node finds `<devicesDir>/<server-id>/virtio-<volume-id[:20]>`.
            "devicesDir": backing.devices_dir(),
            "loop_devices_unavailable": backing.loop_devices_unavailable(),
        });
        let path = cloud.config.state_dir.join(SERVER_FILE);
        store::write_atomic(&path, info.to_string().as_bytes())
            .map_err(|source| Error::WriteFile { path, source })?;
        dataplane.start().await;
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        #[cfg(feature = "aws-follow")]
        if let Some(f) = cloud.config.follow_aws.clone() {
            let (cloud, stopped) = (cloud.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                api::aws::poll::follow(cloud, f, stopped).await;
                Ok(())
            }));
        }
        let app = api::router(cloud.clone());
        let mut rx = stopped.clone();
        let until_stopped = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        match tls_config {
            Some(tls_config) => {
                let listener =
                    TlsListener::new(api_listener, tls_config).map_err(|source| Error::Bind {
                        addr: api_addr,
                        source,
                    })?;
                tasks.push(tokio::spawn(async move {
                    axum::serve(listener, app.into_make_service())
                        .with_graceful_shutdown(until_stopped)
                        .await
                }));
            }
            None => tasks.push(tokio::spawn(async move {
                let listener = PlainListener::new(api_listener, "local cloud API connection");
                axum::serve(listener, app.into_make_service())
                    .with_graceful_shutdown(until_stopped)
                    .await
            })),
        }
        if let Some(listener) = metadata_listener {
            let app = crate::api::metadata_router(cloud.clone());
            let mut rx = stopped.clone();
            tasks.push(tokio::spawn(async move {
                axum::serve(
                    // tap_io: a wrapper axum gives the peer address (ConnectInfo) for.
                    axum::serve::ListenerExt::tap_io(
                        PlainListener::new(listener, "metadata service connection"),
                        |_| {},
                    ),
                    app.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await
            }));
        }
        tracing::info!(api = %base_url, metadata = ?metadata_addr, "local-cloud serving");
        Ok(ServerHandle {
            api_addr,
            metadata_addr,
            base_url,
            tls_ca_file,
            store,
            dataplane,
            backing,
            stop,
            tasks,
        })
    }
}

impl ServerHandle {
    /// The bound API address.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// The bound metadata address, if a metadata service runs.
    pub fn metadata_addr(&self) -> Option<SocketAddr> {
        self.metadata_addr
    }

    /// The API base URL (`http://127.0.0.1:8800`); Keystone is at `<url>/identity/v3`.
    pub fn api_url(&self) -> &str {
        &self.base_url
    }

    /// The certificate clients trust when the API is served over TLS: the cloud's own CA
    /// (`<state-dir>/tls/ca.pem`) with `--tls-self-signed`, else `--tls-cert-file`.
    pub fn tls_ca_file(&self) -> Option<&std::path::Path> {
        self.tls_ca_file.as_deref()
    }

    /// The state store (for in-process users such as a data plane).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Where the instances' device links are (`<dir>/<server-id>/virtio-<volume-id[:20]>`),
    /// when volumes are backed (`--volume-backing=sparse-file`).
    pub fn devices_dir(&self) -> Option<&std::path::Path> {
        self.backing.devices_dir()
    }

    /// The sparse file backing a volume (whether or not volumes are backed).
    pub fn volume_file(&self, volume_id: &str) -> std::path::PathBuf {
        self.backing.file(volume_id)
    }

    /// Whether a listener stopped on its own (an error).
    pub fn is_finished(&self) -> bool {
        self.tasks.iter().any(JoinHandle::is_finished)
    }

    /// Stops accepting, finishes in-flight requests, and releases the state directory.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.dataplane.stop();
        let mut first_error = None;
        for task in self.tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_error = first_error.or(Some(Error::Serve(e.to_string()))),
                Err(e) => first_error = first_error.or(Some(Error::Serve(e.to_string()))),
            }
        }
        let backing = self.backing;
        let _ = tokio::task::spawn_blocking(move || backing.release_all()).await;
        let _ = std::fs::remove_file(self.store.dir().join(SERVER_FILE));
        first_error.map_or(Ok(()), Err)
    }
}

/// The names a self-made serving certificate is for: the API's address (the loopback address
/// when it listens on all), `localhost`, and the host of `--public-url`.
fn serving_names(api_addr: SocketAddr, public_url: Option<&str>) -> Vec<String> {
    let ip = match api_addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let mut names = vec![ip.to_string(), "localhost".to_owned()];
    let public_host = public_url
        .and_then(|u| reqwest::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()));
    if let Some(host) = public_host {
        if !names.contains(&host) {
            names.push(host);
        }
    }
    names
}

pub(crate) async fn seed(cloud: &Arc<Cloud>) -> Result<()> {
    let config = cloud.config.clone();
    let result = cloud
        .write(move |tx| {
            identity::seed(tx, &config)?;
            let project_id = tx
                .list::<identity::Project>(identity::PROJECTS)
                .into_iter()
                .find(|p| p.name == config.project)
                .map(|p| p.id)
                .unwrap_or_default();
            network::seed(tx, &project_id)?;
            for project in tx.list::<identity::Project>(identity::PROJECTS) {
                network::ensure_default_group(tx, &project.id)?;
            }
            if let Some(zones) = &config.availability_zones {
                for old in tx.list::<serde_json::Value>(compute::ZONES) {
                    if let Some(name) = old["name"].as_str() {
                        if !zones.iter().any(|z| z == name) {
                            tx.delete(compute::ZONES, name);
                        }
                    }
                }
                for z in zones {
                    tx.put(compute::ZONES, z, &json!({"name": z}))?;
                }
            } else if tx.list::<serde_json::Value>(compute::ZONES).is_empty() {
                tx.put(
                    compute::ZONES,
                    defaults::AVAILABILITY_ZONE,
                    &json!({"name": defaults::AVAILABILITY_ZONE}),
                )?;
            }
            Ok(())
        })
        .await;
    result.map_err(|e: ApiError| Error::Serve(format!("seeding the state failed: {}", e.message)))
}
