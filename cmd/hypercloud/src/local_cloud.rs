//! `local-cloud`: the one-machine OpenStack-compatible cloud (pkg/localcloud).

use hypercloud_options::LoggingOptions;

/// A one-machine cloud that speaks the OpenStack APIs (Keystone, Nova, Neutron, Cinder,
/// metadata service), and its operator commands.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub logging: LoggingOptions,
    #[command(flatten)]
    pub local_cloud: hypercloud_localcloud::LocalCloudArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        logging,
        local_cloud,
    } = args;
    logging.init()?;
    hypercloud_localcloud::run(local_cloud).await?;
    Ok(())
}
