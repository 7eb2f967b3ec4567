//! `kubelet-helper`: the kubelet's cloud duties (upstream: the kubelet's `--cloud-provider`
//! code paths: node name, provider ID, addresses and zone at registration; in external mode
//! registration with the uninitialized taint). This build starts the provider and reports
//! what the kubelet would be able to ask it.

use crate::cloud::{self, Common, UsageError};

/// The kubelet's cloud duties: node name, provider ID, addresses and zone from the cloud;
/// with --cloud-provider=external, registration with the uninitialized taint.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args { common } = args;
    // Served on /metrics once the personality serves (cloud-controller-manager issue).
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, &common, &metrics).await?;
    print!(
        "{}",
        cloud::report(invoked_as, &common.cloud, cloud.as_deref().map(|c| c as _))
    );
    if let Some(c) = &cloud {
        use hypercloud_cloudprovider::Interface as _;
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
    Ok(())
}
