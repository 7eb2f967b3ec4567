//! `apiserver-plugin`: the kube-apiserver's cloud duties as an admission webhook (upstream
//! admission plugins PersistentVolumeLabel, the OpenStack node restriction, and
//! PersistentVolumeClaimResize). This build starts the provider and reports it.

use crate::cloud::{self, Common, UsageError};

/// The apiserver's cloud duties as an HTTPS admission webhook: volume zone labels,
/// cloud-backed node admission, volume resize checks.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args { common } = args;
    if common.cloud.is_external() {
        // Upstream refuses PersistentVolumeLabel with an external provider: the labelling
        // moves to the cloud-controller-manager.
        return Err(UsageError(
            "--cloud-provider=external: the apiserver-plugin's admission checks need the cloud; with an external provider the cloud-controller-manager labels volumes instead, so do not run the apiserver-plugin".into(),
        )
        .into());
    }
    if common.cloud.cloud_provider.is_empty() {
        return Err(UsageError("--cloud-provider: the apiserver-plugin needs a cloud provider name (see `hypercloud providers`)".into()).into());
    }
    // Served on /metrics once the personality serves (cloud-controller-manager issue).
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, &common, &metrics).await?;
    print!(
        "{}",
        cloud::report(invoked_as, &common.cloud, cloud.as_deref().map(|c| c as _))
    );
    Ok(())
}
