//! `kubelet-helper`: the kubelet's cloud duties (upstream: the kubelet's `--cloud-provider`
//! code paths). In-tree it asks the provider for the node name, provider ID, addresses, zone
//! and instance type, registers the Node with them and keeps the addresses in sync; with
//! `--cloud-provider=external` it makes no cloud call and registers the Node with the
//! uninitialized taint for the cloud-controller-manager to initialise.

use std::time::Duration;

use anyhow::Context as _;
use hypercloud_cloudprovider::Interface;
use hypercloud_kubelet::registration::{self, Mode, NodeInput, Registered};
use hypercloud_options::GoDuration;

use crate::cloud::{self, Common, UsageError};
use crate::personality::Personality;

/// The kubelet's cloud duties: node name, provider ID, addresses and zone from the cloud;
/// with --cloud-provider=external, registration with the uninitialized taint.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub node: NodeOptions,
    #[command(flatten)]
    pub csi: CsiOptions,
}

/// The kubelet's half of a CSI driver.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "CSI flags")]
pub struct CsiOptions {
    /// The node plugin socket of a CSI driver on this node (unix:///path/csi.sock), which the
    /// kubelet learns through its plugin registration (node-driver-registrar): it registers
    /// the driver (the node's CSINode, with the migrated-plugins annotation, and the Node's
    /// topology labels) and stages and publishes the driver's volumes of its pods once their
    /// VolumeAttachments are attached. Without it no CSI driver is used.
    #[arg(long = "csi-driver-endpoint", value_name = "ENDPOINT")]
    pub csi_driver_endpoint: Option<String>,

    /// Directory path for managing kubelet files (volume mounts, etc.).
    #[arg(
        long = "root-dir",
        value_name = "DIR",
        default_value = "/var/lib/kubelet"
    )]
    pub root_dir: std::path::PathBuf,
}

/// Tools beside the kubelet's own work.
// Doc comments here are `--help` texts: `[Metadata]` is the cloud-config section, not a link.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Print what the instance metadata sources say about this machine (config drive, then
    /// metadata service, per [Metadata] search-order), as the kubelet's OpenStack code reads
    /// them; every failed source is named when none answers.
    Metadata(MetadataArgs),
    /// Run cloud-provider-azure's cloud-node-manager for this node (the external layout's node
    /// half on Azure): initialise this node's Node from the VM's instance metadata service
    /// (its provider ID, instance type, zone and region labels, addresses), remove the
    /// uninitialized taint, and keep the addresses up to date; the cloud-controller-manager
    /// then runs with --controllers=*,-cloud-node.
    CloudNodeManager(crate::cloud_node_manager::Args),
}

/// Flags of `kubelet-helper metadata`.
#[derive(clap::Args, Debug)]
pub struct MetadataArgs {
    #[command(flatten)]
    pub cloud: hypercloud_options::CloudProviderOptions,
}

/// The kubelet flags that shape the Node (upstream names and defaults).
// Doc comments here are `--help` texts: `<uuid>` is a placeholder, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Node flags")]
pub struct NodeOptions {
    /// If non-empty, will use this string as identification instead of the actual hostname.
    #[arg(long = "hostname-override", value_name = "NAME")]
    pub hostname_override: Option<String>,

    /// IP address (or comma-separated dual-stack addresses) of the node. In-tree, the cloud
    /// address equal to it is the only one reported for its type; with an external provider
    /// it is passed to the cloud-controller-manager as the alpha.kubernetes.io/provided-node-ip
    /// annotation.
    #[arg(long = "node-ip", value_name = "IP")]
    pub node_ip: Option<String>,

    /// Unique identifier of the node in the cloud provider (e.g. openstack:///<uuid>); wins
    /// over the provider's answer.
    #[arg(long = "provider-id", value_name = "ID")]
    pub provider_id: Option<String>,

    /// Labels to add when registering the node in the cluster (key=value pairs separated by
    /// ',').
    #[arg(long = "node-labels", value_name = "LABELS", value_parser = registration::parse_labels)]
    pub node_labels: Option<std::collections::BTreeMap<String, String>>,

    /// Specifies how often the node's addresses are synced with the cloud (in-tree only).
    #[arg(
        long = "node-status-update-frequency",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub node_status_update_frequency: GoDuration,

    /// Register (or update) the Node once and exit, instead of syncing addresses until
    /// stopped.
    #[arg(long)]
    pub once: bool,
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        command,
        common,
        node,
        csi,
    } = args;
    if let Some(ep) = &csi.csi_driver_endpoint {
        hypercloud_csi::server::socket_path(ep)
            .map_err(|e| UsageError(format!("--csi-driver-endpoint: {e}")))?;
    }
    match command {
        Some(Command::Metadata(m)) => return metadata(m).await,
        Some(Command::CloudNodeManager(a)) => return crate::cloud_node_manager::run(a).await,
        None => {}
    }
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, Personality::KubeletHelper, &common, &metrics).await?;
    let cloud: Option<&dyn Interface> = cloud.as_deref().map(|c| c as _);
    print!("{}", cloud::report(invoked_as, &common.cloud, cloud));
    if let Some(c) = cloud {
        if c.instances().is_none() && c.instances_v2().is_none() {
            return Err(UsageError(format!(
                "--cloud-provider={}: the provider does not support instances, which the kubelet needs for its node name and addresses",
                common.cloud.cloud_provider
            ))
            .into());
        }
    } else if common.cloud.is_external() {
        println!(
            "external mode: no cloud calls; the Node registers with taint {}=true:NoSchedule",
            hypercloud_cloudprovider::wellknown::TAINT_UNINITIALIZED
        );
    }
    let client = common.kube.client().await?;

    let hostname = registration::hostname(node.hostname_override.as_deref());
    let node_name = registration::node_name(cloud, &hostname).await?;
    let mut input = NodeInput {
        node_name: node_name.clone(),
        hostname,
        provider_id: node.provider_id.clone(),
        node_ip: node.node_ip.clone(),
        labels: node.node_labels.clone().unwrap_or_default(),
        mode: Mode::NoCloud,
    };
    input.mode = mode(cloud, &common, &input).await?;
    let initial = registration::initial_node(&input);
    let outcome = register_with_retry(&client, &initial, &input).await?;
    let verb = match outcome {
        Registered::Created => "registered",
        Registered::UpdatedLabels => "updated the labels of existing",
        Registered::Unchanged => "found up to date",
    };
    println!("{invoked_as}: {verb} node {node_name}");
    if node.once {
        if let Some(ep) = &csi.csi_driver_endpoint {
            let reg = register_csi(&client, ep, &node_name).await?;
            println!(
                "{invoked_as}: registered CSI driver {} on node {node_name} (node ID {})",
                reg.0.driver, reg.0.node_id
            );
        }
        return Ok(());
    }
    let csi_loop = async {
        match &csi.csi_driver_endpoint {
            Some(ep) => csi_volumes(&client, ep, &node_name, &csi.root_dir).await,
            None => std::future::pending::<()>().await,
        }
    };
    let Some(cloud) = cloud else {
        // External or no cloud: no further cloud duty; the CSI driver's volumes, if any.
        csi_loop.await;
        return Ok(());
    };
    if cloud.volume_attacher().is_some() {
        let (client, node_name) = (client.clone(), node_name.clone());
        let plugin = cloud
            .volume_attacher()
            .map(|a| a.plugin_name().to_owned())
            .unwrap_or_default();
        println!("{invoked_as}: waiting for the {plugin} volumes of pods on node {node_name} to be attached to its instance");
        tokio::select! {
            () = addresses(cloud, &client, &node_name, &input, &node) => {}
            () = volumes(cloud, &client, &node_name, &plugin) => {}
            () = csi_loop => {}
        }
    } else {
        tokio::select! {
            () = addresses(cloud, &client, &node_name, &input, &node) => {}
            () = csi_loop => {}
        }
    }
    Ok(())
}

/// Connects to the CSI driver at `endpoint` and registers it on `node_name`.
async fn register_csi(
    client: &kube::Client,
    endpoint: &str,
    node_name: &str,
) -> anyhow::Result<(
    hypercloud_kubelet::csi::Registration,
    hypercloud_csi::Client,
    &'static hypercloud_csi::DriverInfo,
)> {
    use hypercloud_kubelet::csi;
    let driver = hypercloud_csi::Client::connect(endpoint).await?;
    let name = driver
        .get_plugin_info(hypercloud_csi::proto::GetPluginInfoRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("CSI GetPluginInfo at {endpoint}: {}", s.message()))?
        .name;
    let info = hypercloud_csi::drivers::for_driver(&name).ok_or_else(|| {
        anyhow::anyhow!("the CSI driver at {endpoint} is {name:?}, which stands in for no in-tree plugin this binary knows")
    })?;
    let reg = csi::register(client, &driver, info, node_name).await?;
    Ok((reg, driver, info))
}

/// The kubelet's half of the CSI driver at `endpoint`, forever: registers it (retrying until
/// the driver answers), then stages and publishes its volumes for the node's pods each
/// [`VOLUME_SYNC_PERIOD`], saying once what each pass did.
async fn csi_volumes(
    client: &kube::Client,
    endpoint: &str,
    node_name: &str,
    root_dir: &std::path::Path,
) {
    use hypercloud_kubelet::csi::VolumeManager;
    let (driver, mut manager) = loop {
        match register_csi(client, endpoint, node_name).await {
            Ok((reg, driver, info)) => {
                println!(
                    "registered CSI driver {} on node {node_name}: node ID {}, topology {:?}, migrated plugin {}",
                    reg.driver, reg.node_id, reg.topology, info.in_tree_plugin
                );
                break (driver, VolumeManager::new(*info, node_name, root_dir));
            }
            Err(e) => {
                tracing::warn!(endpoint, error = %format!("{e:#}"), "registering the CSI driver; retrying in 2s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    let mut tick = tokio::time::interval(VOLUME_SYNC_PERIOD);
    let mut last_waiting = Vec::new();
    loop {
        tick.tick().await;
        match manager.sync(client, &driver).await {
            Ok(pass) => {
                for (name, path) in &pass.staged {
                    println!("volume {name}: NodeStageVolume at {}", path.display());
                }
                for (name, path) in &pass.published {
                    println!("volume {name}: NodePublishVolume at {}", path.display());
                }
                for path in &pass.unpublished {
                    println!("NodeUnpublishVolume at {}", path.display());
                }
                for name in &pass.unstaged {
                    println!("volume {name}: NodeUnstageVolume; removed from volumesInUse, so it can be detached");
                }
                if pass.waiting != last_waiting {
                    for name in &pass.waiting {
                        println!("volume {name}: waiting for its VolumeAttachment to be attached");
                    }
                    last_waiting = pass.waiting;
                }
            }
            Err(e) => {
                tracing::warn!(node = %node_name, error = %hypercloud_cloudprovider::Chain(&e), "syncing CSI volumes");
            }
        }
    }
}

/// How often the volume manager looks at its pods' volumes (upstream's reconciler loops every
/// 100 ms over an in-memory state; this one asks the apiserver and the cloud each time).
const VOLUME_SYNC_PERIOD: Duration = Duration::from_secs(1);

/// The kubelet's cloud part of mounting (see `hypercloud_kubelet::volumes`), forever; says
/// once per change what happened and what a real kubelet would do next.
async fn volumes(cloud: &dyn Interface, client: &kube::Client, node_name: &str, plugin: &str) {
    use hypercloud_kubelet::volumes;
    // Per volume: the device path last reported (None: waiting for attach).
    let mut told: std::collections::BTreeMap<String, Option<String>> = Default::default();
    let mut tick = tokio::time::interval(VOLUME_SYNC_PERIOD);
    loop {
        tick.tick().await;
        let pass = match volumes::sync(client.clone(), cloud, node_name).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(node = %node_name, error = %hypercloud_cloudprovider::Chain(&e), "syncing volumes");
                continue;
            }
        };
        for (name, v) in &pass.volumes {
            let pods: Vec<&str> = v.pods.iter().map(|p| p.0.as_str()).collect();
            let before = told.get(name);
            match (&v.device_path, before) {
                (None, None) => println!(
                    "volume {name} (volume {:?}, pods {}): reported in use; waiting for it to be attached to this node's instance (the attach/detach controller's job)",
                    v.spec_name,
                    pods.join(", ")
                ),
                (Some(device), b) if b != Some(&Some(device.clone())) => {
                    println!(
                        "volume {name} (volume {:?}, pods {}) is attached to this node's instance at {device}; {}",
                        v.spec_name,
                        pods.join(", "),
                        v.next_steps(plugin, device)
                    );
                    tracing::info!(node = %node_name, volume = %name, device_path = %device, "MountVolume.WaitForAttach succeeded");
                }
                _ => continue,
            }
            told.insert(name.clone(), v.device_path.clone());
        }
        let gone: Vec<String> = told
            .keys()
            .filter(|k| !pass.volumes.contains_key(*k))
            .cloned()
            .collect();
        for name in gone {
            told.remove(&name);
            println!("volume {name}: no pod on this node uses it any more; a real kubelet would unmount it; removed from volumesInUse, so it can be detached");
        }
    }
}

/// Keeps the Node's addresses in sync with the cloud, forever.
async fn addresses(
    cloud: &dyn Interface,
    client: &kube::Client,
    node_name: &str,
    input: &NodeInput,
    node: &NodeOptions,
) {
    let mut tick = tokio::time::interval(
        node.node_status_update_frequency
            .get()
            .max(Duration::from_secs(1)),
    );
    tick.tick().await;
    loop {
        tick.tick().await;
        let synced = async {
            let facts =
                registration::cloud_facts(cloud, node_name, input.node_ip.as_deref()).await?;
            registration::sync_addresses(client.clone(), node_name, &facts.addresses).await
        };
        match synced.await {
            Ok(true) => tracing::info!(node = %node_name, "node addresses updated from the cloud"),
            Ok(false) => tracing::debug!(node = %node_name, "node addresses unchanged"),
            Err(e) => {
                tracing::warn!(node = %node_name, error = %hypercloud_cloudprovider::Chain(&e), "syncing node addresses")
            }
        }
    }
}

async fn mode(
    cloud: Option<&dyn Interface>,
    common: &Common,
    input: &NodeInput,
) -> anyhow::Result<Mode> {
    Ok(match cloud {
        Some(c) => Mode::InTree(
            registration::cloud_facts(c, &input.node_name, input.node_ip.as_deref())
                .await
                .context("collecting the node's facts from the cloud")?,
        ),
        None if common.cloud.is_external() => Mode::External,
        None => Mode::NoCloud,
    })
}

/// The kubelet retries registration forever with backoff; a helper started before the
/// apiserver is ready behaves the same, but gives up on errors that retrying cannot fix.
async fn register_with_retry(
    client: &kube::Client,
    node: &k8s_openapi::api::core::v1::Node,
    input: &NodeInput,
) -> anyhow::Result<Registered> {
    let mut delay = Duration::from_millis(200);
    loop {
        match registration::register(client.clone(), node, input).await {
            Ok(r) => return Ok(r),
            Err(e) if retryable(&e) => {
                tracing::warn!(node = %input.node_name, error = %hypercloud_cloudprovider::Chain(&e), "unable to register node with API server; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(7));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Connection problems and server errors are worth retrying; a rejection (403, 422) is not.
fn retryable(e: &hypercloud_kubelet::Error) -> bool {
    use hypercloud_kubelet::Error as E;
    let source = match e {
        E::CreateNode { source, .. } | E::GetNode { source, .. } | E::PatchNode { source, .. } => {
            source
        }
        _ => return false,
    };
    match source {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

/// `kubelet-helper metadata`: the OpenStack metadata reader (openstack and local providers).
#[cfg(feature = "openstack")]
async fn metadata(args: MetadataArgs) -> anyhow::Result<()> {
    use hypercloud_providers_openstack::{config, Config, MetadataReader};
    let opts = &args.cloud;
    let file = opts
        .cloud_config_path()
        .map(|p| {
            hypercloud_cloudprovider::input::read_input_text(p)
                .map(|text| (text, p.display().to_string()))
                .with_context(|| format!("--cloud-config: cannot read {}", p.display()))
        })
        .transpose()?;
    let cfg = match (opts.cloud_provider.as_str(), &file) {
        ("local", None) => config::local_defaults(),
        ("local", Some((text, origin))) => Config::parse_onto(config::local_defaults(), text, origin)?,
        ("openstack", Some((text, origin))) => Config::parse(text, origin)?,
        ("openstack", None) => {
            return Err(UsageError("--cloud-config: the openstack provider needs its cloud.conf".into()).into())
        }
        (other, _) => {
            return Err(UsageError(format!(
                "--cloud-provider={other:?}: instance metadata is read by the openstack and local providers only"
            ))
            .into())
        }
    };
    let order: Vec<&str> = cfg.metadata.search_order.iter().map(|s| s.name()).collect();
    println!("search-order: {}", order.join(","));
    let md = MetadataReader::new(cfg.metadata.clone())?.read().await?;
    println!("uuid:              {}", md.uuid);
    println!("name:              {}", md.name);
    println!("hostname:          {}", md.hostname);
    println!("availability_zone: {}", md.availability_zone);
    for d in &md.devices {
        println!(
            "device:            {} bus={} serial={} address={}",
            d.kind, d.bus, d.serial, d.address
        );
    }
    Ok(())
}

#[cfg(not(feature = "openstack"))]
async fn metadata(_args: MetadataArgs) -> anyhow::Result<()> {
    Err(
        UsageError("kubelet-helper metadata needs the openstack feature of this binary".into())
            .into(),
    )
}
