//! `apiserver-plugin`: the kube-apiserver's cloud duties as an HTTPS admission webhook
//! (upstream admission plugins PersistentVolumeLabel, PersistentVolumeClaimResize, and the
//! OpenStack rule that only cloud instances may register as Nodes); the checks live in
//! pkg/admission. The real kube-apiserver calls it through the webhook configurations in
//! deploy/apiserver-plugin/.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Command;
use hypercloud_admission::{Webhook, PATH_NODE, PATH_PVC_RESIZE, PATH_PV_LABEL};
use hypercloud_metrics::tls::TlsSource;
use hypercloud_options::SecureServingOptions;

use crate::cloud::{self, Common, UsageError};
use crate::personality::Personality;

/// The apiserver's cloud duties as an HTTPS admission webhook: volume zone labels,
/// cloud-backed node admission, volume resize checks.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub serving: SecureServingOptions,
    /// Also write the serving certificate (the webhook configurations' caBundle) to this file.
    #[arg(
        long = "ca-bundle-file",
        value_name = "FILE",
        help_heading = "Secure serving flags"
    )]
    pub ca_bundle_file: Option<PathBuf>,
}

/// The webhook's default port (the common admission webhook port), where the controller
/// managers have theirs.
pub fn adjust(cmd: Command) -> Command {
    cmd.mut_arg("secure_port", |a| a.default_value("9443"))
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        common,
        serving,
        ca_bundle_file,
    } = args;
    if common.cloud.is_external() {
        // Upstream refuses PersistentVolumeLabel with an external provider: the labelling
        // moves to the cloud-controller-manager.
        return Err(UsageError(
            "--cloud-provider=external: the apiserver-plugin's admission checks need the cloud; with an external provider the cloud-controller-manager labels volumes instead, so do not run the apiserver-plugin".into(),
        )
        .into());
    }
    if common.cloud.cloud_provider.is_empty() {
        return Err(UsageError(
            "--cloud-provider: the apiserver-plugin needs a cloud provider name (see `hypercloud providers`)".into(),
        )
        .into());
    }
    if serving.secure_port == 0 {
        return Err(UsageError(
            "--secure-port: the apiserver-plugin serves only HTTPS; 0 would serve nothing".into(),
        )
        .into());
    }
    let options = crate::runtime::tls_options(&serving)?;
    let metrics = prometheus::Registry::new();
    let Some(cloud) =
        cloud::start(invoked_as, Personality::ApiserverPlugin, &common, &metrics).await?
    else {
        return Err(UsageError("--cloud-provider: no provider was built".into()).into());
    };
    print!(
        "{}",
        cloud::report(invoked_as, &common.cloud, Some(cloud.as_ref()))
    );
    let client = common.kube.client().await?;

    // Load (or generate) the certificate once, so the caBundle printed is the one served.
    let source = crate::runtime::tls_source(&serving, "apiserver-plugin");
    let pair = source.load().context("loading the serving certificate")?;
    let files = match source {
        TlsSource::Files { .. } => source,
        TlsSource::SelfSigned { .. } => {
            let dir = serving.cert_dir.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!(
                    "hypercloud-apiserver-plugin-{}",
                    std::process::id()
                ))
            });
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let (cert, key) = (
                dir.join("apiserver-plugin.crt"),
                dir.join("apiserver-plugin.key"),
            );
            std::fs::write(&cert, &pair.cert_pem)
                .with_context(|| format!("writing {}", cert.display()))?;
            std::fs::write(&key, &pair.key_pem)
                .with_context(|| format!("writing {}", key.display()))?;
            TlsSource::Files { cert, key }
        }
    };
    if let Some(path) = &ca_bundle_file {
        std::fs::write(path, &pair.cert_pem)
            .with_context(|| format!("--ca-bundle-file: writing {}", path.display()))?;
    }

    let webhook = Arc::new(Webhook {
        cloud: cloud as Arc<dyn hypercloud_cloudprovider::Interface>,
        client,
    });
    let server = hypercloud_metrics::serve(
        hypercloud_metrics::ServeConfig {
            addr: SocketAddr::new(serving.bind_address, serving.secure_port),
            tls: files,
            options,
            permit_port_sharing: serving.permit_port_sharing,
        },
        hypercloud_admission::router(webhook),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await?;
    let ca_bundle = serde_json::to_string(&k8s_openapi::ByteString(pair.cert_pem.into_bytes()))?;
    println!(
        "{invoked_as}: serving admission webhooks on https://{}",
        server.local_addr
    );
    println!("  {PATH_PV_LABEL:<32} MutatingWebhookConfiguration, PersistentVolume CREATE");
    println!("  {PATH_NODE:<32} ValidatingWebhookConfiguration, Node CREATE");
    println!(
        "  {PATH_PVC_RESIZE:<32} ValidatingWebhookConfiguration, PersistentVolumeClaim UPDATE"
    );
    println!("  caBundle: {}", ca_bundle.trim_matches('"'));
    server.task.await.context("webhook server")?;
    Ok(())
}
