//! What every personality shares: its common flags, the provider registry of this binary,
//! the one function that builds a personality's provider, and the start-up report.

use std::fmt::Write as _;
use std::sync::Arc;

use hypercloud_cloudprovider::{
    capabilities, fake::FakeCloud, CallTracer, Instrumented, Interface, ProviderMetrics, Registry,
};
use hypercloud_options::{CloudProviderOptions, KubeClientOptions, LoggingOptions};

use crate::personality::Personality;

/// Flags every personality has.
#[derive(clap::Args, Debug)]
pub struct Common {
    #[command(flatten)]
    pub cloud: CloudProviderOptions,
    #[command(flatten)]
    pub kube: KubeClientOptions,
    #[command(flatten)]
    pub logging: LoggingOptions,
}

/// A start-up problem caused by the user's flags or files: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The providers compiled into this binary.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        "fake",
        "in-memory cloud that records every call; configured by a YAML/JSON --cloud-config",
        |config| Ok(Arc::new(FakeCloud::from_cloud_config(config)?) as Arc<dyn Interface>),
    );
    #[cfg(feature = "openstack")]
    hypercloud_providers_openstack::register(&mut r);
    #[cfg(feature = "aws")]
    hypercloud_providers_aws::register(&mut r);
    #[cfg(feature = "vsphere")]
    hypercloud_providers_vsphere::register(&mut r);
    #[cfg(feature = "gce")]
    hypercloud_providers_gce::register(&mut r);
    #[cfg(feature = "azure")]
    hypercloud_providers_azure::register(&mut r);
    #[cfg(feature = "mesos")]
    hypercloud_providers_mesos::register(&mut r);
    #[cfg(feature = "ovirt")]
    hypercloud_providers_ovirt::register(&mut r);
    #[cfg(feature = "photon")]
    hypercloud_providers_photon::register(&mut r);
    #[cfg(feature = "cloudstack")]
    hypercloud_providers_cloudstack::register(&mut r);
    r
}

/// Initialises logging, checks the client flags, and builds and initialises the provider
/// named by `--cloud-provider` for `personality`'s layout: the same steps for every
/// personality. Cloud call metrics go to `metrics`. `None`: no provider, or `external`.
pub async fn start(
    component: &str,
    personality: Personality,
    common: &Common,
    metrics: &prometheus::Registry,
) -> anyhow::Result<Option<Arc<Instrumented>>> {
    common.logging.init()?;
    common.kube.validate()?;
    let opts = &common.cloud;
    let layout = personality.layout();
    let Some(inner) = registry().init(&opts.cloud_provider, opts.cloud_config_path(), layout)?
    else {
        return Ok(None);
    };
    let cloud = instrument(component, inner, opts.trace_cloud_calls.as_deref(), metrics)?;
    // A client the component cannot build is its own start-up error later (it needs one
    // to run); the provider then only misses what it would write to the API.
    let client = if personality.gives_provider_a_client() {
        match common.kube.client().await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(component, error = %e, "the cloud provider gets no Kubernetes client");
                None
            }
        }
    } else {
        None
    };
    // A provider's `Initialize` error already says "initializing cloud provider <name>".
    cloud.initialize(client).await.map_err(|e| match e {
        e @ hypercloud_cloudprovider::Error::Initialize { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(format!(
            "initializing cloud provider {:?}",
            opts.cloud_provider
        )),
    })?;
    tracing::info!(component, provider = %opts.cloud_provider, layout = layout.name(), "cloud provider initialized");
    Ok(Some(cloud))
}

/// `inner` with the provider metrics in `metrics` and, with `--trace-cloud-calls`, every call
/// traced as `component`.
pub fn instrument(
    component: &str,
    inner: Arc<dyn Interface>,
    trace_cloud_calls: Option<&std::path::Path>,
    metrics: &prometheus::Registry,
) -> anyhow::Result<Arc<Instrumented>> {
    let provider_metrics = ProviderMetrics::register(metrics)?;
    let tracer = trace_cloud_calls
        .map(|path| CallTracer::open(path, component))
        .transpose()?;
    Ok(Arc::new(Instrumented::new(
        inner,
        Some(provider_metrics),
        tracer,
    )))
}

/// The start-up report: which provider, which config, which capabilities.
pub fn report(
    component: &str,
    opts: &CloudProviderOptions,
    cloud: Option<&dyn Interface>,
) -> String {
    let mut out = String::new();
    let Some(cloud) = cloud else {
        let mode = if opts.is_external() {
            "external (the cloud-controller-manager does the cloud work)"
        } else {
            "none"
        };
        let _ = writeln!(out, "{component}: cloud provider: {mode}");
        return out;
    };
    let config = opts
        .cloud_config_path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "none".into());
    let _ = writeln!(
        out,
        "{component}: cloud provider {:?} initialized (cloud config: {config})",
        cloud.provider_name()
    );
    let _ = writeln!(out, "capabilities:");
    for c in capabilities(cloud) {
        let state = if c.supported {
            "supported"
        } else {
            "not supported"
        };
        let _ = writeln!(out, "  {:<14} {state}", c.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lists_every_capability() {
        let cloud = FakeCloud::from_config_bytes(b"disabled: [routes]", "t").expect("config");
        let opts = CloudProviderOptions {
            cloud_provider: "fake".into(),
            ..Default::default()
        };
        let r = report("cloud-controller-manager", &opts, Some(&cloud));
        assert!(
            r.contains("cloud provider \"fake\" initialized (cloud config: none)"),
            "{r}"
        );
        assert!(r.contains("  routes         not supported"), "{r}");
        assert!(r.contains("  instances-v2   supported"), "{r}");
        let ext = CloudProviderOptions {
            cloud_provider: "external".into(),
            ..Default::default()
        };
        assert!(report("kubelet-helper", &ext, None).contains("external"));
    }

    #[test]
    fn registry_has_compiled_in_providers() {
        let mut expected = vec!["fake"];
        if cfg!(feature = "openstack") {
            expected.extend(["local", "openstack", "rackspace"]);
        }
        if cfg!(feature = "aws") {
            expected.push("aws");
        }
        if cfg!(feature = "vsphere") {
            expected.push("vsphere");
        }
        if cfg!(feature = "gce") {
            expected.push("gce");
        }
        if cfg!(feature = "azure") {
            expected.push("azure");
        }
        if cfg!(feature = "mesos") {
            expected.push("mesos");
        }
        if cfg!(feature = "ovirt") {
            expected.push("ovirt");
        }
        if cfg!(feature = "photon") {
            expected.push("photon");
        }
        if cfg!(feature = "cloudstack") {
            expected.push("cloudstack");
        }
        expected.sort();
        assert_eq!(registry().names(), expected);
    }
}
