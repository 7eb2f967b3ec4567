//! `--cloud-provider`, `--cloud-config` and `--trace-cloud-calls`: which provider a
//! personality builds, from which configuration, and where its calls are traced.

use std::path::{Path, PathBuf};

use clap::Args;

/// Cloud provider selection, shared by every personality.
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Cloud provider flags")]
pub struct CloudProviderOptions {
    /// The provider for cloud services: a compiled-in provider name (see `hypercloud
    /// providers`), "external" when a cloud-controller-manager does the cloud work, or empty
    /// for no cloud provider.
    #[arg(
        long = "cloud-provider",
        value_name = "NAME",
        default_value = "",
        env = "HYPERCLOUD_CLOUD_PROVIDER",
        hide_env_values = true
    )]
    pub cloud_provider: String,

    /// The path to the cloud provider configuration file. Empty string for no configuration
    /// file.
    #[arg(
        long = "cloud-config",
        value_parser = path_allowing_empty,
        value_name = "FILE",
        env = "HYPERCLOUD_CLOUD_CONFIG",
        hide_env_values = true
    )]
    pub cloud_config: Option<PathBuf>,

    /// Append every cloud provider call (component, method, arguments, result, latency) as a
    /// JSON line to this file, for `hypercloud trace render` and for learning what each
    /// component asks its cloud.
    #[arg(
        long = "trace-cloud-calls",
        value_name = "FILE",
        env = "HYPERCLOUD_TRACE_CLOUD_CALLS",
        hide_env_values = true
    )]
    pub trace_cloud_calls: Option<PathBuf>,
}

/// Upstream accepts `--cloud-config=""` (no file); clap's path parser would reject it.
fn path_allowing_empty(s: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(s))
}

impl CloudProviderOptions {
    /// The config path, with an empty `--cloud-config=""` meaning none (as upstream).
    pub fn cloud_config_path(&self) -> Option<&Path> {
        self.cloud_config
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty())
    }

    /// True with `--cloud-provider=external`.
    pub fn is_external(&self) -> bool {
        self.cloud_provider == "external"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        c: CloudProviderOptions,
    }

    #[test]
    fn empty_cloud_config_means_none() {
        let t =
            T::try_parse_from(["t", "--cloud-provider=fake", "--cloud-config="]).expect("parse");
        assert_eq!(t.c.cloud_config_path(), None);
        assert!(!t.c.is_external());
        let t = T::try_parse_from(["t", "--cloud-provider", "external", "--cloud-config", "/x"])
            .expect("parse");
        assert_eq!(t.c.cloud_config_path(), Some(Path::new("/x")));
        assert!(t.c.is_external());
    }
}
