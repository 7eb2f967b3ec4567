//! `--kubeconfig`, `--master`, `--kube-api-qps`, `--kube-api-burst`: how a personality reaches
//! the Kubernetes API server.

use std::path::PathBuf;

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, Result};

/// Kubernetes API client flags (upstream names and the controller-manager defaults).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Kubernetes client flags")]
pub struct KubeClientOptions {
    /// Path to a kubeconfig file with authorization and master location information. Empty:
    /// $KUBECONFIG or ~/.kube/config when present, else the in-cluster configuration.
    #[arg(
        long,
        value_name = "FILE",
        env = "HYPERCLOUD_KUBECONFIG",
        hide_env_values = true
    )]
    pub kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(
        long,
        value_name = "URL",
        env = "HYPERCLOUD_MASTER",
        hide_env_values = true
    )]
    pub master: Option<String>,

    /// QPS to use while talking with the Kubernetes API server.
    #[arg(long = "kube-api-qps", value_name = "QPS", default_value_t = 20.0)]
    pub kube_api_qps: f32,

    /// Burst to use while talking with the Kubernetes API server.
    #[arg(long = "kube-api-burst", value_name = "N", default_value_t = 30)]
    pub kube_api_burst: u32,
}

impl Default for KubeClientOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            master: None,
            kube_api_qps: 20.0,
            kube_api_burst: 30,
        }
    }
}

impl KubeClientOptions {
    /// Checks values clap cannot (upstream: qps must not be negative).
    pub fn validate(&self) -> Result<()> {
        if !self.kube_api_qps.is_finite() || self.kube_api_qps < 0.0 {
            return Err(Error::InvalidFlag {
                flag: "--kube-api-qps",
                message: format!("must be a non-negative number, got {}", self.kube_api_qps),
            });
        }
        if let Some(m) = &self.master {
            m.parse::<http::Uri>().map_err(|e| Error::ParseMaster {
                master: m.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// The client configuration these flags describe.
    pub async fn config(&self) -> Result<kube::Config> {
        self.validate()?;
        let mut config = match self
            .kubeconfig
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty())
        {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|source| Error::LoadKubeconfig {
                    path: path.clone(),
                    source,
                })?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|source| Error::LoadKubeconfig {
                        path: path.clone(),
                        source,
                    })?
            }
            None => kube::Config::infer()
                .await
                .map_err(Error::InferKubeconfig)?,
        };
        if let Some(m) = &self.master {
            config.cluster_url =
                m.parse()
                    .map_err(|e: http::uri::InvalidUri| Error::ParseMaster {
                        master: m.clone(),
                        message: e.to_string(),
                    })?;
        }
        Ok(config)
    }

    /// A client built from [`Self::config`], limited to `--kube-api-qps` requests per second
    /// with bursts of `--kube-api-burst` ([`crate::rate_limit`]).
    pub async fn client(&self) -> Result<kube::Client> {
        let builder = kube::client::ClientBuilder::try_from(self.config().await?)
            .map_err(Error::BuildClient)?;
        let limit = crate::rate_limit::RateLimitLayer::new(self.kube_api_qps, self.kube_api_burst);
        Ok(builder.with_layer(&limit).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_qps_is_rejected_naming_the_flag() {
        let o = KubeClientOptions {
            kube_api_qps: -1.0,
            ..Default::default()
        };
        let err = o.validate().expect_err("negative");
        assert!(err.to_string().starts_with("--kube-api-qps"), "{err}");
    }

    #[test]
    fn bad_master_is_rejected_naming_the_flag() {
        let o = KubeClientOptions {
            master: Some("http://bad host".into()),
            ..Default::default()
        };
        let err = o.validate().expect_err("bad url");
        assert!(err.to_string().contains("--master"), "{err}");
    }

    #[tokio::test]
    async fn missing_kubeconfig_file_is_named() {
        let o = KubeClientOptions {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            ..Default::default()
        };
        let err = o.config().await.expect_err("missing file");
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn master_overrides_the_kubeconfig_server() {
        let dir = std::env::temp_dir().join(format!("hc-opts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n\
             users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
        )
        .expect("write");
        let o = KubeClientOptions {
            kubeconfig: Some(path.clone()),
            master: Some("https://127.0.0.2:7443".into()),
            ..Default::default()
        };
        let config = o.config().await.expect("config");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.2:7443/");
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
