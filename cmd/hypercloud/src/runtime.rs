//! The long-running part both controller managers share (upstream `k8s.io/cloud-provider/app`
//! `Run` and kube-controller-manager's `Run`): build the client, serve `/healthz`,
//! `/livez`, `/readyz`, `/configz` and `/metrics` on `--secure-port`, then, with `--leader-elect`, contend
//! for the Lease and run the controllers only while leading.
//!
//! Ends:
//! - SIGTERM / Ctrl-C: the controllers are stopped, then the Lease is released (upstream
//!   `ReleaseOnCancel`), exit 0;
//! - leadership lost (no renewal within the renew deadline): the controllers are told to stop
//!   and the process exits 1 at once, as upstream's `klog.Fatalf("leaderelection lost")`;
//! - the controllers fail: exit 1.
//!
//! With leader migration (`--enable-leader-migration`, KEP-2436) the process, once it leads
//! its own Lease, starts the controllers that are not migrated and also contends for the
//! migration Lease (same namespace, same identity, as upstream); the controllers migrated to
//! it run only while it holds that Lease too. SIGTERM stops both sets and releases both
//! Leases (each only after its controllers stopped); losing either Lease exits 1.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use hypercloud_cloudprovider::Interface;
use hypercloud_cloudprovider::WebhookSpec;
use hypercloud_controllers::credentials::ServiceAccountClients;
use hypercloud_controllers::{
    names, run_plan, ControllerConfig, ControllerMetrics, Credentials, Plan,
};
use hypercloud_leaderelection::{self as le, LeaderElector, Outcome};
use hypercloud_metrics::authn::DelegatingAuthentication;
use hypercloud_metrics::tls::{TlsOptions, TlsSource};
use hypercloud_metrics::{AuthConfig, Authorizer, Checks};
use hypercloud_options::{
    CloudWebhookOptions, ControllerOptions, KubeClientOptions, WebhookServingOptions,
};
use tokio::sync::watch;

use crate::cloud::{self, Common};
use crate::leader_migration;
use crate::personality::Personality;

/// What one controller manager runs.
pub struct Component {
    /// `cloud-controller-manager` or `kube-controller-manager`: events, certificate names.
    pub name: &'static str,
    /// The client flags.
    pub kube: KubeClientOptions,
    /// The controller-manager flags.
    pub options: ControllerOptions,
    /// The controllers to run under the component's own Lease (all of them without leader
    /// migration), with why any cannot run.
    pub plan: Plan,
    /// With leader migration: the controllers to run only while also holding the migration
    /// Lease. `None` when migration is off or nothing here runs under that Lease.
    pub migration: Option<leader_migration::Migration>,
    /// The provider; `None` runs no controllers (controller-manager with `external`).
    pub cloud: Option<Arc<dyn Interface>>,
    /// The registry served on `/metrics`.
    pub metrics: prometheus::Registry,
    /// What `/configz` serves.
    pub configz: hypercloud_metrics::Configz,
    /// The cloud-controller-manager's provider webhooks to serve (`None`: the
    /// controller-manager, which has no webhook flags).
    pub webhooks: Option<WebhookServer>,
}

/// The provider webhooks `--webhooks` enabled and where to serve them.
pub struct WebhookServer {
    /// The webhook serving flags.
    pub options: WebhookServingOptions,
    /// The enabled webhooks, in the provider's order (may be empty: nothing is served).
    pub enabled: Vec<WebhookSpec>,
}

/// Fires on SIGTERM or SIGINT.
pub(crate) fn shutdown_signal() -> watch::Receiver<bool> {
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
) -> Result<TlsSource, hypercloud_metrics::Error> {
    certificate(
        [
            ("--tls-cert-file", &serving.tls_cert_file),
            ("--tls-private-key-file", &serving.tls_private_key_file),
        ],
        &serving.cert_dir,
        pair_name,
        serving.bind_address,
    )
}

/// The webhook server's certificate ([`certificate`]).
fn webhook_tls_source(o: &WebhookServingOptions) -> Result<TlsSource, hypercloud_metrics::Error> {
    certificate(
        [
            ("--webhook-tls-cert-file", &o.webhook_tls_cert_file),
            (
                "--webhook-tls-private-key-file",
                &o.webhook_tls_private_key_file,
            ),
        ],
        &o.webhook_cert_dir,
        hypercloud_options::WEBHOOK_PAIR_NAME,
        o.webhook_bind_address,
    )
}

/// The certificate and key files when both are given, else a self-signed pair named
/// `pair_name` (kept in `cert_dir` when set): the admin server's and the webhook server's rule.
/// Given files are read once here (bounded, regular files only), so a bad one fails start-up
/// naming its flag rather than when the server starts.
fn certificate(
    files: [(&'static str, &Option<PathBuf>); 2],
    cert_dir: &Option<PathBuf>,
    pair_name: &str,
    bind_address: std::net::IpAddr,
) -> Result<TlsSource, hypercloud_metrics::Error> {
    match files {
        [(cert_flag, Some(cert)), (key_flag, Some(key))] => {
            hypercloud_metrics::tls::read(cert_flag, cert)?;
            hypercloud_metrics::tls::read(key_flag, key)?;
            Ok(TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            })
        }
        _ => Ok(TlsSource::SelfSigned {
            cert_dir: cert_dir.clone(),
            pair_name: pair_name.to_string(),
            bind_address,
        }),
    }
}

/// The authentication flags as the admin server takes them (empty list entries dropped).
fn delegating_authentication(auth: &hypercloud_options::AuthOptions) -> DelegatingAuthentication {
    use hypercloud_options::non_empty_entries as list;
    DelegatingAuthentication {
        client_ca_file: auth.client_ca_file().map(Into::into),
        requestheader_client_ca_file: auth.requestheader_client_ca_file().map(Into::into),
        requestheader_allowed_names: list(&auth.requestheader_allowed_names),
        requestheader_username_headers: list(&auth.requestheader_username_headers),
        requestheader_uid_headers: list(&auth.requestheader_uid_headers),
        requestheader_group_headers: list(&auth.requestheader_group_headers),
        requestheader_extra_headers_prefix: list(&auth.requestheader_extra_headers_prefix),
        skip_lookup: auth.authentication_skip_lookup,
        tolerate_lookup_failure: auth.authentication_tolerate_lookup_failure,
    }
}

/// The TLS flags (`--tls-min-version`, `--tls-cipher-suites`, `--tls-sni-cert-key`) checked
/// and turned into the server's settings; an unusable value is a usage error naming its flag.
pub(crate) fn tls_options(
    serving: &hypercloud_options::SecureServingOptions,
) -> Result<TlsOptions, cloud::UsageError> {
    use hypercloud_metrics::tls::suites;
    let versions = suites::min_version(serving.tls_min_version.as_deref().unwrap_or(""))
        .map_err(|e| cloud::UsageError(format!("--tls-min-version: {e}")))?;
    let cipher_suites = suites::cipher_suites(&serving.tls_cipher_suites)
        .map_err(|e| cloud::UsageError(format!("--tls-cipher-suites: {e}")))?;
    let sni = serving
        .tls_sni_cert_key
        .iter()
        .map(|v| {
            v.parse()
                .map_err(|e| cloud::UsageError(format!("--tls-sni-cert-key {v:?}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    Ok(TlsOptions {
        request_client_certificates: false,
        versions,
        cipher_suites,
        sni,
    })
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
    flag: &'static str,
) -> anyhow::Result<kube::Client> {
    match path.filter(|p| !p.as_os_str().is_empty()) {
        None => Ok(main.clone()),
        Some(p) => {
            let opts = KubeClientOptions {
                kubeconfig: Some(p.clone()),
                master: None,
                ..kube.clone()
            };
            Ok(opts.client_named(flag).await?)
        }
    }
}

/// What both controller managers do once their own flag checks passed: resolve `--controllers`
/// against `table`, plan leader migration, start the provider, print the start-up report and
/// which controller runs under which Lease, then [`run`]. Without a provider (only
/// `controller-manager --cloud-provider=external` gets here without one) it runs no cloud
/// controller and says so.
pub async fn start_and_run(
    component: &'static str,
    personality: Personality,
    table: &'static [names::ControllerName],
    common: Common,
    controllers: ControllerOptions,
    webhooks: Option<CloudWebhookOptions>,
    invoked_as: &str,
) -> anyhow::Result<()> {
    controllers.validate()?;
    if let Some(w) = &webhooks {
        w.validate(controllers.secure_serving.secure_port)?;
    }
    tls_options(&controllers.secure_serving)?;
    // Every file flag is read here too, before anything starts.
    tls_source(&controllers.secure_serving, component)?;
    if let Some(w) = &webhooks {
        webhook_tls_source(&w.serving)?;
    }
    // Every CIDR flag is checked here, before anything starts, not when a controller does.
    if let Some(cidrs) = controllers
        .kube_cloud_shared
        .cluster_cidr
        .as_deref()
        .filter(|c| !c.is_empty())
    {
        hypercloud_controllers::route::cluster_cidrs(cidrs)
            .map_err(|e| cloud::UsageError(format!("--cluster-cidr: {e}")))?;
    }
    // Node IPAM's flags together (dual-stack, mask sizes, service range), with
    // --allocate-node-cidrs=true: a usage error naming the flag.
    hypercloud_controllers::node_ipam::IpamConfig::from_options(&controllers)
        .map_err(|e| cloud::UsageError(e.to_string()))?;
    let enabled = names::resolve(table, &controllers.generic.controllers)?;
    let enabled_names: Vec<&'static str> = enabled.iter().map(|c| c.name()).collect();
    let migration = leader_migration::plan(
        component,
        table,
        &enabled_names,
        &controllers.generic.leader_migration,
    )?;
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, personality, &common, &metrics).await?;
    print!(
        "{}",
        cloud::report(invoked_as, &common.cloud, cloud.as_deref().map(|c| c as _))
    );
    // The one decision of what runs, which the report and the runner both read.
    let plan = match &cloud {
        None => {
            println!("cloud controllers: none (no in-tree cloud provider; with --cloud-provider=external the cloud-controller-manager runs them)");
            if let Some(plan) = &migration {
                print!("{}", leader_migration::report(plan, &controllers, false));
            }
            Plan::default()
        }
        Some(c) => {
            let plan = hypercloud_controllers::plan(c.as_ref(), &controllers, &enabled);
            leader_migration::print_plan(&plan, &controllers, migration.as_ref());
            plan
        }
    };
    let configz = crate::configz::configz(
        component,
        &common,
        &controllers,
        webhooks.as_ref(),
        migration.as_ref(),
    );
    // --webhooks against the provider's webhooks: an unknown name stops start-up (exit 2).
    let webhooks = match webhooks {
        None => None,
        Some(w) => {
            let all = cloud
                .as_deref()
                .and_then(|c| c.webhooks())
                .map(|h| h.webhooks())
                .unwrap_or_default();
            let enabled =
                hypercloud_admission::provider_webhooks::enabled(&all, &w.webhook.webhooks)
                    .map_err(|e| cloud::UsageError(e.to_string()))?;
            Some(WebhookServer {
                options: w.serving,
                enabled,
            })
        }
    };
    let (plan, migration) = leader_migration::apply(migration.as_ref(), &plan, cloud.is_some());
    run(Component {
        name: component,
        kube: common.kube,
        options: controllers,
        plan,
        migration,
        cloud: cloud.map(|c| c as Arc<dyn Interface>),
        metrics,
        configz,
        webhooks,
    })
    .await
}

/// Starts the provider webhook server (upstream `WebhookSecureServing.Serve`, on every
/// replica, leading or not) unless `--webhook-secure-port=0` or no webhook is enabled; prints
/// where each webhook is served.
async fn serve_webhooks(
    server: &WebhookServer,
    cloud: Option<&Arc<dyn Interface>>,
    metrics: &prometheus::Registry,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Option<hypercloud_metrics::AdminServer>> {
    let o = &server.options;
    let webhook_metrics =
        hypercloud_admission::provider_webhooks::WebhookMetrics::register(metrics)
            .context("registering webhook metrics")?;
    let names: Vec<&str> = server.enabled.iter().map(|w| w.name).collect();
    let cloud = match cloud {
        Some(c) if o.webhook_secure_port != 0 && !server.enabled.is_empty() => c,
        _ => {
            if o.webhook_secure_port == 0 && !server.enabled.is_empty() {
                println!(
                    "webhooks: not serving {} (--webhook-secure-port=0)",
                    names.join(", ")
                );
            }
            return Ok(None);
        }
    };
    let tls = webhook_tls_source(o)?;
    let app = hypercloud_admission::provider_webhooks::router(
        cloud.clone(),
        &server.enabled,
        Some(webhook_metrics),
    );
    let config = hypercloud_metrics::ServeConfig {
        addr: SocketAddr::new(o.webhook_bind_address, o.webhook_secure_port),
        tls,
        options: TlsOptions::default(),
        permit_port_sharing: false,
    };
    let served = hypercloud_metrics::serve(config, app, wait(shutdown))
        .await
        .context("--webhook-secure-port")?;
    println!("webhooks: serving on https://{}", served.local_addr);
    for w in &server.enabled {
        println!("  {:<32} {}", w.name, w.path);
    }
    Ok(Some(served))
}

/// Runs `c` until shutdown or lost leadership.
pub async fn run(c: Component) -> anyhow::Result<()> {
    let client = c.kube.client().await?;
    // --use-service-account-credentials: each controller acts as its own ServiceAccount
    // (tokens requested with the process's client, on the process's server and CA).
    let credentials = if c.options.kube_cloud_shared.use_service_account_credentials {
        Credentials::ServiceAccounts(std::sync::Arc::new(ServiceAccountClients::new(
            client.clone(),
            c.kube.config().await?,
            c.kube.kube_api_qps,
            c.kube.kube_api_burst,
        )))
    } else {
        Credentials::Shared
    };
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
    if let Some(cloud) = c.cloud.clone() {
        checks.add_ready(
            "cloud-credentials",
            Arc::new(move || cloud.credentials_health()),
        );
    }
    hypercloud_metrics::process::ProcessCollector::new()
        .and_then(|p| Ok(c.metrics.register(Box::new(p))?))
        .context("registering process metrics")?;

    let le_opts = &c.options.leader_election;
    let (elector, migration_elector) = if le_opts.leader_elect {
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
        // Upstream passes the main identity to the migration lock too, so the holder of
        // either Lease names the same process.
        let migration_elector = match &c.migration {
            Some(m) => {
                let config = le::Config {
                    name: m.lease.clone(),
                    ..config.clone()
                };
                let e = LeaderElector::new(client.clone(), config, Some(metrics.clone()))?;
                let health = e.health();
                checks.add_live("leaderMigration", Arc::new(move || health.check()));
                Some((e, m.plan.clone()))
            }
            None => None,
        };
        let e = LeaderElector::new(client.clone(), config, Some(metrics))?;
        let health = e.health();
        checks.add_live("leaderElection", Arc::new(move || health.check()));
        tracing::info!(identity = %e.config().identity, "leader election identity");
        (Some(e), migration_elector)
    } else {
        (None, None)
    };

    let serving = &c.options.secure_serving;
    let server = if serving.secure_port != 0 {
        let auth = &c.options.auth;
        let authn = delegated_client(
            &client,
            &c.kube,
            auth.authentication_kubeconfig.as_ref(),
            "--authentication-kubeconfig",
        )
        .await?;
        let authz = delegated_client(
            &client,
            &c.kube,
            auth.authorization_kubeconfig.as_ref(),
            "--authorization-kubeconfig",
        )
        .await?;
        let certificates = delegating_authentication(auth).build(&authn).await?;
        for (what, ca) in [
            ("client certificates", certificates.client_ca.as_ref()),
            (
                "request-header (front-proxy) certificates",
                certificates.request_header.as_ref().map(|r| &r.ca),
            ),
        ] {
            match ca {
                Some(ca) => tracing::info!(source = ca.source(), "authenticating {what}"),
                None => tracing::info!("not authenticating {what}: no CA given or found"),
            }
        }
        let config = AuthConfig {
            always_allow: auth.authorization_always_allow_paths.clone(),
            certificates,
            token_cache_ttl: auth.authentication_token_webhook_cache_ttl.get(),
            authorized_ttl: auth.authorization_webhook_cache_authorized_ttl.get(),
            unauthorized_ttl: auth.authorization_webhook_cache_unauthorized_ttl.get(),
        };
        let authorizer = Arc::new(Authorizer::new(authn, authz, config));
        let tls = tls_source(serving, c.name)?;
        let options = TlsOptions {
            request_client_certificates: authorizer.wants_client_certificates(),
            ..tls_options(serving)?
        };
        let app = hypercloud_metrics::router(
            c.metrics.clone(),
            checks.clone(),
            Some(authorizer),
            Some(c.configz.clone()),
        );
        let config = hypercloud_metrics::ServeConfig {
            addr: SocketAddr::new(serving.bind_address, serving.secure_port),
            tls,
            options,
            permit_port_sharing: serving.permit_port_sharing,
        };
        Some(hypercloud_metrics::serve(config, app, wait(shutdown.clone())).await?)
    } else {
        None
    };

    let webhook_server = match &c.webhooks {
        Some(w) => serve_webhooks(w, c.cloud.as_ref(), &c.metrics, shutdown.clone()).await?,
        None => None,
    };

    let Component {
        name,
        options,
        mut plan,
        migration,
        cloud,
        metrics,
        ..
    } = c;
    if elector.is_none() {
        // Without leader election there is no migration Lease (upstream `leadermigration.Enabled`
        // needs both): everything runs at once.
        if let Some(m) = &migration {
            plan = plan.with(&m.plan);
        }
    }
    let main_lease = options.leader_election.resource_name.clone();
    let lead = move |stop: le::StopSignal| async move {
        let Some(cloud) = cloud else {
            tracing::info!(
                "no cloud provider: running no cloud controllers, serving health and metrics only"
            );
            stop.stopped().await;
            return Ok(());
        };
        let controller_metrics =
            ControllerMetrics::register(&metrics).context("starting controllers")?;
        let config = move || ControllerConfig {
            client: client.clone(),
            credentials: credentials.clone(),
            cloud: cloud.clone(),
            component: name.to_string(),
            options: options.clone(),
            metrics: metrics.clone(),
        };
        match migration_elector {
            None => {
                tracing::info!(controllers = %plan, "starting controllers");
                run_plan(config(), controller_metrics, &plan, stop.stopped())
                    .await
                    .context("running controllers")
            }
            Some((migration_elector, migrated)) => {
                tracing::info!(lease = %main_lease, controllers = %plan, "leader migration: starting main controllers");
                lead_with_migration(
                    config,
                    controller_metrics,
                    &plan,
                    migration_elector,
                    migrated,
                    stop,
                )
                .await
            }
        }
    };

    started.set(true);
    let result = match elector {
        Some(e) => match e.run(wait(shutdown.clone()), lead).await {
            Ok(Outcome::Shutdown) => Ok(()),
            Ok(Outcome::Finished(r)) => r,
            Err(e) => Err(anyhow::Error::new(e)),
        },
        None => {
            let (tx, rx) = watch::channel(false);
            let sd = wait(shutdown.clone());
            let work = lead(le::StopSignal::from(rx));
            tokio::pin!(work);
            tokio::select! {
                r = &mut work => r,
                _ = sd => {
                    let _ = tx.send(true);
                    work.await
                }
            }
        }
    };
    for s in [server, webhook_server].into_iter().flatten() {
        s.task.abort();
    }
    result
}

/// The main Lease is held: runs the main controllers and, under the migration Lease, the
/// migrated ones (upstream starts the migration lock's election once the main lock is
/// acquired). Whatever ends first — `stop` (shutdown or the main Lease lost), a controller
/// set failing, the migration Lease lost — stops both sets; the migration Lease is released
/// only after the migrated controllers stopped.
async fn lead_with_migration(
    config: impl Fn() -> ControllerConfig,
    metrics: ControllerMetrics,
    main: &Plan,
    elector: LeaderElector,
    migrated: Plan,
    stop: le::StopSignal,
) -> anyhow::Result<()> {
    let (halt_tx, halt_rx) = watch::channel(false);
    let main_work = run_plan(config(), metrics.clone(), main, wait(halt_rx.clone()));
    let migrated_config = config();
    let lease = elector.config().name.clone();
    let migration_work = elector.run(wait(halt_rx), move |migration_stop| async move {
        tracing::info!(%lease, controllers = %migrated, "leader migration: starting migrated controllers");
        run_plan(migrated_config, metrics, &migrated, migration_stop.stopped()).await
    });
    let outer = stop.stopped();
    tokio::pin!(outer, main_work, migration_work);
    let (mut main_done, mut migration_done) = (None, None);
    while main_done.is_none() || migration_done.is_none() {
        tokio::select! {
            () = &mut outer, if !*halt_tx.borrow() => {}
            r = &mut main_work, if main_done.is_none() => main_done = Some(r),
            r = &mut migration_work, if migration_done.is_none() => migration_done = Some(r),
        }
        // Before halting, nothing ends on its own except by failing or losing the Lease:
        // either way both sets stop.
        let _ = halt_tx.send(true);
    }
    let migration = match migration_done {
        Some(Ok(Outcome::Shutdown)) | None => Ok(()),
        Some(Ok(Outcome::Finished(r))) => r.context("running migrated controllers"),
        Some(Err(e)) => {
            tracing::error!(error = %hypercloud_cloudprovider::Chain(&e), "migration leaderelection lost");
            Err(anyhow::Error::new(e).context("leader migration"))
        }
    };
    let main = main_done.unwrap_or(Ok(())).context("running controllers");
    migration.and(main)
}
