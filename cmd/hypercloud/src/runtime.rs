//! The long-running part both controller managers share (upstream `k8s.io/cloud-provider/app`
//! `Run` and kube-controller-manager's `Run`): build the client, serve `/healthz`,
//! `/livez`, `/readyz` and `/metrics` on `--secure-port`, then, with `--leader-elect`, contend
//! for the Lease and run the controllers only while leading.
//!
//! Ends:
//! - SIGTERM / Ctrl-C: the controllers are stopped, then the Lease is released (upstream
//!   `ReleaseOnCancel`), exit 0;
//! - leadership lost (no renewal within the renew deadline): the controllers are told to stop
//!   and the process exits 1 at once, as upstream's `klog.Fatalf("leaderelection lost")`;
//! - the controllers fail: exit 1.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use hypercloud_cloudprovider::Interface;
use hypercloud_controllers::{run_controllers, ControllerConfig};
use hypercloud_leaderelection::{self as le, LeaderElector, Outcome};
use hypercloud_metrics::tls::TlsSource;
use hypercloud_metrics::{Authorizer, Checks};
use hypercloud_options::{ControllerOptions, KubeClientOptions};
use tokio::sync::watch;

/// What one controller manager runs.
pub struct Component {
    /// `cloud-controller-manager` or `kube-controller-manager`: events, certificate names.
    pub name: &'static str,
    /// The client flags.
    pub kube: KubeClientOptions,
    /// The controller-manager flags.
    pub options: ControllerOptions,
    /// Canonical names of the controllers to run.
    pub enabled: Vec<&'static str>,
    /// The provider; `None` runs no controllers (controller-manager with `external`).
    pub cloud: Option<Arc<dyn Interface>>,
    /// The registry served on `/metrics`.
    pub metrics: prometheus::Registry,
}

/// Fires on SIGTERM or SIGINT.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = term => tracing::info!("received SIGTERM, shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("received interrupt, shutting down"),
        }
        let _ = tx.send(true);
    });
    rx
}

/// The serving certificate the `--tls-*` / `--cert-dir` flags ask for: the files when both are
/// given, else a self-signed pair named `pair_name` (kept in `--cert-dir` when set).
pub(crate) fn tls_source(
    serving: &hypercloud_options::SecureServingOptions,
    pair_name: &str,
) -> TlsSource {
    match (&serving.tls_cert_file, &serving.tls_private_key_file) {
        (Some(cert), Some(key)) => TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => TlsSource::SelfSigned {
            cert_dir: serving.cert_dir.clone(),
            pair_name: pair_name.to_string(),
            bind_address: serving.bind_address,
        },
    }
}

async fn wait(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// A client for `path` (`--authentication-kubeconfig`/`--authorization-kubeconfig`), or the
/// main one.
async fn delegated_client(
    main: &kube::Client,
    kube: &KubeClientOptions,
    path: Option<&std::path::PathBuf>,
) -> anyhow::Result<kube::Client> {
    match path.filter(|p| !p.as_os_str().is_empty()) {
        None => Ok(main.clone()),
        Some(p) => {
            let opts = KubeClientOptions {
                kubeconfig: Some(p.clone()),
                master: None,
                ..kube.clone()
            };
            Ok(opts.client().await?)
        }
    }
}

/// Runs `c` until shutdown or lost leadership.
pub async fn run(c: Component) -> anyhow::Result<()> {
    let client = c.kube.client().await?;
    let shutdown = shutdown_signal();
    let checks = Checks::new();
    let started = checks.add_ready_flag("started");
    {
        let rx = shutdown.clone();
        checks.add_ready(
            "shutdown",
            Arc::new(move || {
                if *rx.borrow() {
                    Err("process is shutting down".into())
                } else {
                    Ok(())
                }
            }),
        );
    }
    hypercloud_metrics::process::ProcessCollector::new()
        .and_then(|p| Ok(c.metrics.register(Box::new(p))?))
        .context("registering process metrics")?;

    let le_opts = &c.options.leader_election;
    let elector = if le_opts.leader_elect {
        let config = le::Config {
            name: le_opts.resource_name.clone(),
            namespace: le_opts.resource_namespace.clone(),
            identity: le::default_identity(),
            lease_duration: le_opts.lease_duration.get(),
            renew_deadline: le_opts.renew_deadline.get(),
            retry_period: le_opts.retry_period.get(),
            release_on_cancel: true,
        };
        let metrics = le::Metrics::register(&c.metrics)?;
        let e = LeaderElector::new(client.clone(), config, Some(metrics))?;
        let health = e.health();
        checks.add_live("leaderElection", Arc::new(move || health.check()));
        tracing::info!(identity = %e.config().identity, "leader election identity");
        Some(e)
    } else {
        None
    };

    let serving = &c.options.secure_serving;
    let server = if serving.secure_port != 0 {
        let auth = &c.options.auth;
        let authn = delegated_client(&client, &c.kube, auth.authentication_kubeconfig.as_ref())
            .await
            .context("--authentication-kubeconfig")?;
        let authz = delegated_client(&client, &c.kube, auth.authorization_kubeconfig.as_ref())
            .await
            .context("--authorization-kubeconfig")?;
        let authorizer = Arc::new(Authorizer::new(
            authn,
            authz,
            auth.authorization_always_allow_paths.clone(),
        ));
        let tls = tls_source(serving, c.name);
        let app = hypercloud_metrics::router(c.metrics.clone(), checks.clone(), Some(authorizer));
        let config = hypercloud_metrics::ServeConfig {
            addr: SocketAddr::new(serving.bind_address, serving.secure_port),
            tls,
        };
        Some(hypercloud_metrics::serve(config, app, wait(shutdown.clone())).await?)
    } else {
        None
    };

    let Component {
        name,
        options,
        enabled,
        cloud,
        metrics,
        ..
    } = c;
    let lead = move |stop: le::StopSignal| async move {
        let stop = stop.stopped();
        match cloud {
            Some(cloud) => {
                tracing::info!(controllers = ?enabled, "starting controllers");
                let config = ControllerConfig {
                    client,
                    cloud,
                    component: name.to_string(),
                    options,
                    metrics,
                };
                run_controllers(config, &enabled, stop).await
            }
            None => {
                tracing::info!("no cloud provider: running no cloud controllers, serving health and metrics only");
                stop.await;
                Ok(())
            }
        }
    };

    started.set(true);
    let result = match elector {
        Some(e) => match e.run(wait(shutdown.clone()), lead).await {
            Ok(Outcome::Shutdown) => Ok(()),
            Ok(Outcome::Finished(r)) => r.context("running controllers"),
            Err(e) => Err(anyhow::Error::new(e)),
        },
        None => {
            let (tx, rx) = watch::channel(false);
            let sd = wait(shutdown.clone());
            let work = lead(le::StopSignal::from(rx));
            tokio::pin!(work);
            tokio::select! {
                r = &mut work => r.context("running controllers"),
                _ = sd => {
                    let _ = tx.send(true);
                    work.await.context("running controllers")
                }
            }
        }
    };
    if let Some(s) = server {
        s.task.abort();
    }
    result
}
