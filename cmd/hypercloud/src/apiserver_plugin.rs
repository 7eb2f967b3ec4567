//! `apiserver-plugin`: the kube-apiserver's cloud duties as an HTTPS admission webhook
//! (upstream admission plugins PersistentVolumeLabel, PersistentVolumeClaimResize, and the
//! OpenStack rule that only cloud instances may register as Nodes); the checks live in
//! pkg/admission. The real kube-apiserver calls it through the webhook configurations in
//! deploy/apiserver-plugin/. With `--ssh-user`/`--ssh-keyfile` it also does the kube-apiserver's
//! old SSH key distribution: the public key goes to every instance through the provider's
//! `AddSSHKeyToAllInstances` (only gce implements it, as upstream).

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
    /// The user the kube-apiserver's SSH tunnels to the nodes log in as (upstream
    /// kube-apiserver --ssh-user): the public key of --ssh-keyfile is added to every instance
    /// through the cloud provider (AddSSHKeyToAllInstances; gce puts it in the project's
    /// `ssh-keys` metadata). Other providers answer NotImplemented, as upstream.
    #[arg(
        long = "ssh-user",
        value_name = "USER",
        requires = "ssh_keyfile",
        help_heading = "SSH tunnel flags"
    )]
    pub ssh_user: Option<String>,
    /// The private key of the SSH tunnels (upstream kube-apiserver --ssh-keyfile); its public
    /// key is read from the same path plus `.pub`, as ssh-keygen writes it.
    #[arg(
        long = "ssh-keyfile",
        value_name = "FILE",
        requires = "ssh_user",
        help_heading = "SSH tunnel flags"
    )]
    pub ssh_keyfile: Option<PathBuf>,
}

/// The largest `.pub` file read: a key line is at most
/// [`hypercloud_cloudprovider::ssh::MAX_KEY_LINE_BYTES`].
const MAX_PUBLIC_KEY_FILE_BYTES: u64 = 64 << 10;

/// Reads the public key of `--ssh-keyfile` (`<file>.pub`) and checks it as OpenSSH does (one
/// line, a known type whose blob names it) so nothing else reaches the cloud's key list.
/// Upstream's tunneler generates a key pair when the file is missing; here a missing key is a
/// start-up error naming the command that makes one. Returns the key as one canonical line.
fn read_public_key(keyfile: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use hypercloud_cloudprovider::ssh::SshPublicKey;
    let mut pub_path = keyfile.as_os_str().to_owned();
    pub_path.push(".pub");
    let pub_path = PathBuf::from(pub_path);
    let bytes = hypercloud_cloudprovider::input::read_named(
        "--ssh-keyfile",
        &pub_path,
        MAX_PUBLIC_KEY_FILE_BYTES,
    )
    .map_err(|e| {
        let hint = format!(
            " (make a key pair with `ssh-keygen -t ed25519 -N '' -f {}`)",
            keyfile.display()
        );
        let missing = e.source.kind() == std::io::ErrorKind::NotFound;
        UsageError(format!(
            "{}{}",
            hypercloud_cloudprovider::Chain(&e),
            if missing { hint.as_str() } else { "" }
        ))
    })?;
    let key = SshPublicKey::parse(&bytes).map_err(|e| {
        UsageError(format!(
            "--ssh-keyfile: {} is not a usable OpenSSH public key: {e}",
            pub_path.display()
        ))
    })?;
    let line = match &key.comment {
        Some(c) => format!("{} {} {c}", key.key_type, key.blob),
        None => format!("{} {}", key.key_type, key.blob),
    };
    Ok(line.into_bytes())
}

/// Adds the SSH key to every instance, retrying until the cloud takes it, as upstream's
/// tunneler; the pause doubles from 5 s to 5 min (a cloud that keeps failing is not asked
/// every 5 s forever, nor is the same warning logged that often). A provider without the
/// method is told once and left alone.
async fn distribute_ssh_key(
    cloud: Arc<dyn hypercloud_cloudprovider::Interface>,
    user: String,
    key: Vec<u8>,
) {
    let Some(instances) = cloud.instances() else {
        tracing::warn!(
            provider = cloud.provider_name(),
            "--ssh-user: the provider has no Instances; SSH keys are not distributed"
        );
        return;
    };
    const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_secs(5);
    const MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(300);
    let mut pause = FIRST_PAUSE;
    loop {
        match instances.add_ssh_key_to_all_instances(&user, &key).await {
            Ok(()) => {
                tracing::info!(%user, "SSH key added to all instances");
                return;
            }
            Err(hypercloud_cloudprovider::Error::NotImplemented) => {
                tracing::warn!(provider = cloud.provider_name(), "--ssh-user: the provider does not implement AddSSHKeyToAllInstances (only gce does, as upstream); SSH keys are not distributed");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %hypercloud_cloudprovider::Chain(&e), retry_in = ?pause, "adding the SSH key to all instances failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
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
        ssh_user,
        ssh_keyfile,
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
    let ssh = match (ssh_user, ssh_keyfile) {
        (Some(user), Some(file)) => {
            hypercloud_cloudprovider::ssh::check_user(&user)
                .map_err(|e| UsageError(format!("--ssh-user: {e}")))?;
            Some((user, read_public_key(&file)?))
        }
        _ => None,
    };
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
    let source = crate::runtime::tls_source(&serving, "apiserver-plugin")?;
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

    if let Some((user, key)) = ssh {
        tokio::spawn(distribute_ssh_key(
            cloud.clone() as Arc<dyn hypercloud_cloudprovider::Interface>,
            user,
            key,
        ));
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
