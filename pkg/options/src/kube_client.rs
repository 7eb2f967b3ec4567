//! `--kubeconfig`, `--master`, `--kube-api-qps`, `--kube-api-burst`: how a personality reaches
//! the Kubernetes API server.

use std::path::{Path, PathBuf};

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
    #[arg(long = "kube-api-qps", value_name = "QPS", default_value_t = 20.0, value_parser = parse_qps)]
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

pub use crate::rate_limit::{MAX_BURST, QPS_RANGE};

/// `--kube-api-qps` as written: a finite number, 0 (the default) or within [`QPS_RANGE`]. A
/// value too small for a float (`1e-50`) is refused rather than read as 0, which would
/// silently mean the default.
pub fn parse_qps(s: &str) -> std::result::Result<f32, String> {
    let range = || {
        format!(
            "{s:?} is out of range (0 for the default, or {} to {})",
            QPS_RANGE.start(),
            QPS_RANGE.end()
        )
    };
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(range());
    }
    if v == 0.0 {
        // Only a literal zero means the default: `1e-400` parses as 0 but asks for more.
        let mantissa = s.split(['e', 'E']).next().unwrap_or("");
        return if mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
            Err(range())
        } else {
            Ok(0.0)
        };
    }
    if v < f64::from(*QPS_RANGE.start()) || v > f64::from(*QPS_RANGE.end()) {
        return Err(range());
    }
    Ok(v as f32)
}

impl KubeClientOptions {
    /// Checks values clap cannot: the ranges of [`QPS_RANGE`] and [`MAX_BURST`].
    pub fn validate(&self) -> Result<()> {
        let qps = self.kube_api_qps;
        if qps != 0.0 && !QPS_RANGE.contains(&qps) {
            return Err(Error::InvalidFlag {
                flag: "--kube-api-qps",
                message: format!(
                    "{qps} is out of range (0 for the default, or {} to {})",
                    QPS_RANGE.start(),
                    QPS_RANGE.end()
                ),
            });
        }
        if self.kube_api_burst > MAX_BURST {
            return Err(Error::InvalidFlag {
                flag: "--kube-api-burst",
                message: format!(
                    "{} is out of range (0 for the default, or 1 to {MAX_BURST})",
                    self.kube_api_burst
                ),
            });
        }
        if let Some(m) = &self.master {
            let uri = m.parse::<http::Uri>().map_err(|e| Error::ParseMaster {
                master: m.clone(),
                message: e.to_string(),
            })?;
            // The client speaks HTTP(S) only: `ftp://`, `unix:` or a bare host would be
            // accepted here and fail at the first request.
            let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
            if !scheme_ok || uri.host().is_none_or(str::is_empty) {
                return Err(Error::ParseMaster {
                    master: m.clone(),
                    message: "must be an http:// or https:// URL with a host".into(),
                });
            }
        }
        Ok(())
    }

    /// The client configuration these flags describe.
    pub async fn config(&self) -> Result<kube::Config> {
        self.config_named("--kubeconfig").await
    }

    /// [`Self::config`], errors about the kubeconfig file naming `flag` (the delegated
    /// clients' `--authentication-kubeconfig` and `--authorization-kubeconfig`).
    pub async fn config_named(&self, flag: &'static str) -> Result<kube::Config> {
        self.validate()?;
        let given = self
            .kubeconfig
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| (flag, vec![p.clone()]));
        // Upstream's order without the flag: $KUBECONFIG, ~/.kube/config, in-cluster. Every file
        // is read here, bounded, never by kube (which would read /dev/zero until memory ran out
        // and wait forever on a FIFO).
        let found = given.or_else(|| {
            let env = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty());
            match env {
                Some(v) => Some(("KUBECONFIG", std::env::split_paths(&v).collect())),
                None => std::env::home_dir()
                    .map(|h| h.join(".kube").join("config"))
                    .filter(|p| p.exists())
                    .map(|p| ("~/.kube/config", vec![p])),
            }
        });
        let mut config = match found {
            Some((flag, paths)) => {
                let mut merged = Kubeconfig::default();
                for path in &paths {
                    let kc = read_kubeconfig(flag, path)?;
                    merged = merged.merge(kc).map_err(|source| Error::LoadKubeconfig {
                        flag,
                        path: path.clone(),
                        source,
                    })?;
                }
                let first = paths.first().cloned().unwrap_or_default();
                kube::Config::from_custom_kubeconfig(merged, &KubeConfigOptions::default())
                    .await
                    .map_err(|source| Error::LoadKubeconfig {
                        flag,
                        path: first,
                        source,
                    })?
            }
            None => {
                check_in_cluster_files()?;
                kube::Config::infer()
                    .await
                    .map_err(Error::InferKubeconfig)?
            }
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
        self.client_named("--kubeconfig").await
    }

    /// [`Self::client`], errors about the kubeconfig file naming `flag`
    /// ([`Self::config_named`]).
    pub async fn client_named(&self, flag: &'static str) -> Result<kube::Client> {
        let builder = kube::client::ClientBuilder::try_from(self.config_named(flag).await?)
            .map_err(Error::BuildClient)?;
        let limit = crate::rate_limit::RateLimitLayer::new(self.kube_api_qps, self.kube_api_burst);
        Ok(builder.with_layer(&limit).build())
    }
}

/// The in-cluster service-account files, checked before kube reads them (they are mounted by
/// the kubelet, but a wrong mount must not hang the process).
fn check_in_cluster_files() -> Result<()> {
    let limit = hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES;
    // kube's own constants (its `incluster_config` module is private).
    for file in [
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    ] {
        let path = Path::new(file);
        if path.exists() {
            hypercloud_cloudprovider::input::read_named("in-cluster service account", path, limit)?;
        }
    }
    Ok(())
}

/// Reads and parses the kubeconfig `path` (bounded, a regular file), makes the paths it names
/// absolute (relative to its directory, as kube's `read_from` does) and checks the files they
/// name the same way, so that kube, which reads them later, finds bounded regular files.
fn read_kubeconfig(flag: &'static str, path: &Path) -> Result<Kubeconfig> {
    let limit = hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES;
    let text = hypercloud_cloudprovider::input::read_named_text(flag, path, limit)?;
    let mut kc = Kubeconfig::from_yaml(&text).map_err(|source| Error::LoadKubeconfig {
        flag,
        path: path.to_owned(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let absolute = |p: &mut Option<String>| -> Result<()> {
        if let Some(file) = p.as_mut() {
            let full = dir.join(&*file);
            hypercloud_cloudprovider::input::read_named(flag, &full, limit)?;
            *file = full.to_string_lossy().into_owned();
        }
        Ok(())
    };
    for named in &mut kc.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            absolute(&mut cluster.certificate_authority)?;
        }
    }
    for named in &mut kc.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            // kube would refuse it only when sending the first request, as a header error.
            let token = auth
                .token
                .as_ref()
                .map(secrecy::ExposeSecret::expose_secret);
            if token.is_some_and(|t| t.chars().any(char::is_control)) {
                return Err(Error::InvalidFlag {
                    flag,
                    message: format!(
                        "{}: the token of user {:?} has a control character",
                        path.display(),
                        named.name
                    ),
                });
            }
            absolute(&mut auth.client_certificate)?;
            absolute(&mut auth.client_key)?;
            absolute(&mut auth.token_file)?;
            if let Some(exec) = auth.exec.as_mut() {
                if let Some(cmd) = exec.command.as_mut() {
                    if cmd.contains(std::path::MAIN_SEPARATOR) {
                        *cmd = dir.join(&*cmd).to_string_lossy().into_owned();
                    }
                }
            }
        }
    }
    Ok(kc)
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
    fn qps_and_burst_out_of_range_are_rejected_naming_the_flag_and_range() {
        for qps in [
            1e-30,
            -1.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e7,
            f32::MIN_POSITIVE,
        ] {
            let o = KubeClientOptions {
                kube_api_qps: qps,
                ..Default::default()
            };
            let err = o.validate().expect_err("out of range").to_string();
            assert!(err.starts_with("--kube-api-qps: "), "{err}");
            assert!(err.contains("0.01 to 1000000"), "{err}");
        }
        for qps in [0.0, 0.01, 20.0, 1e6] {
            let o = KubeClientOptions {
                kube_api_qps: qps,
                ..Default::default()
            };
            o.validate().expect("in range");
        }
        let o = KubeClientOptions {
            kube_api_burst: MAX_BURST + 1,
            ..Default::default()
        };
        let err = o.validate().expect_err("burst").to_string();
        assert!(err.starts_with("--kube-api-burst: "), "{err}");
    }

    #[test]
    fn bad_master_is_rejected_naming_the_flag() {
        for bad in [
            "http://bad host",
            "ftp://127.0.0.1:6443",
            "unix:///run/k8s.sock",
            "127.0.0.1:6443",
            "/api",
            "https://",
        ] {
            let o = KubeClientOptions {
                master: Some(bad.into()),
                ..Default::default()
            };
            let err = o.validate().expect_err(bad);
            assert!(err.to_string().starts_with("--master"), "{err}");
        }
        for good in ["https://127.0.0.1:6443", "http://localhost:8080/"] {
            let o = KubeClientOptions {
                master: Some(good.into()),
                ..Default::default()
            };
            o.validate().expect(good);
        }
    }

    #[test]
    fn qps_is_parsed_without_silent_underflow() {
        for bad in [
            "1e-50", "1e-400", "-0.5", "NaN", "inf", "-inf", "1e7", "0.001", "x", "",
        ] {
            let err = parse_qps(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        for (s, v) in [
            ("0", 0.0),
            ("0.0", 0.0),
            ("0e10", 0.0),
            ("-0", 0.0),
            ("20", 20.0),
            ("1e6", 1e6),
        ] {
            assert_eq!(parse_qps(s), Ok(v), "{s}");
        }
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

    #[test]
    fn kubeconfig_files_are_bounded_and_their_paths_made_absolute() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("ca.pem"), "pem").expect("write");
        let path = dir.path().join("kubeconfig");
        let text = |ca: &str| {
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1', certificate-authority: '{ca}'}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
            )
        };
        std::fs::write(&path, text("ca.pem")).expect("write");
        let kc = read_kubeconfig("--kubeconfig", &path).expect("read");
        let ca = kc.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.certificate_authority.clone());
        assert_eq!(ca, Some(dir.path().join("ca.pem").display().to_string()));
        // A CA that is a device: refused naming the flag, before kube reads it.
        std::fs::write(&path, text("/dev/zero")).expect("write");
        let err = read_kubeconfig("--authentication-kubeconfig", &path).expect_err("device");
        assert_eq!(
            hypercloud_cloudprovider::Chain(&err).to_string(),
            "--authentication-kubeconfig: cannot load /dev/zero: not a regular file (a character device)"
        );
        let err = read_kubeconfig("KUBECONFIG", Path::new("/dev/zero")).expect_err("device");
        assert!(
            err.to_string().starts_with("KUBECONFIG: cannot load"),
            "{err}"
        );
        // A token with a line break would become a header.
        std::fs::write(
            &path,
            text("ca.pem").replace("token: t", "token: \"t\\nX: y\""),
        )
        .expect("write");
        let err = read_kubeconfig("--kubeconfig", &path).expect_err("token");
        assert!(err.to_string().contains("control character"), "{err}");
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

    mod props {
        use hypercloud_cloudprovider::fuzz::{arbitrary_text, mutated, CASES};
        use proptest::prelude::*;

        const SAMPLE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: n}\ncurrent-context: x\n";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]

            /// The kubeconfig reader (kube's, which `--kubeconfig` uses) on any text and on
            /// a mutated file: parsed or an error, never a panic.
            #[test]
            fn kubeconfigs_parse_or_fail(text in prop_oneof![arbitrary_text(), mutated(SAMPLE)]) {
                if let Err(e) = kube::config::Kubeconfig::from_yaml(&text) {
                    prop_assert!(!e.to_string().is_empty());
                }
            }
        }
    }
}
