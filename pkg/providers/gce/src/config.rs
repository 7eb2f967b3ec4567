//! The gce provider's `--cloud-config`: upstream's `gce.conf` (`[global]`, read by gcfg in the
//! legacy `gce.go`), plus hypercloud's own `[Hypercloud]` keys.
//!
//! Unknown sections and keys, and upstream keys hypercloud does not implement, are start-up
//! warnings naming them (kept in [`Config::warnings`]); bad values are errors naming the line
//! and key. Everything may be left out on a GCE VM: the project, zone and network then come
//! from the metadata server, as upstream.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use hypercloud_cloudprovider::gcfg;

use crate::error::{Error, Result};

/// Compute Engine's endpoint, as the Go client's default base path.
pub const DEFAULT_API_ENDPOINT: &str = "https://compute.googleapis.com/compute/v1/";
/// The metadata server (`metadata.google.internal`).
pub const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// How API requests are authorised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// The VM's default service account, from the metadata server (`token-url` unset).
    Metadata,
    /// Application Default Credentials (`token-url = nil`, as upstream): the service-account
    /// key named by `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's well-known file
    /// (`$CLOUDSDK_CONFIG/application_default_credentials.json`, else
    /// `$HOME/.config/gcloud/application_default_credentials.json`), else the metadata
    /// server's default service account; none of them is a start-up error (see
    /// [`crate::credentials::find_default_credentials`]).
    DefaultCredentials,
    /// A service-account key file (`[Hypercloud] credentials-file`, hypercloud's own): what
    /// `GOOGLE_APPLICATION_CREDENTIALS` would name, given in the config instead.
    KeyFile(PathBuf),
    /// No token at all (`[Hypercloud] anonymous = true`, hypercloud's own): for the local
    /// cloud, whose GCE dialect asks for none unless started with `--gce-require-tokens`.
    Anonymous,
    /// `token-url` with `token-body` (upstream's `AltTokenSource`: POST the body, read
    /// `{"accessToken", "expireTime"}`).
    Alt {
        /// Where to POST.
        url: String,
        /// What to POST.
        body: String,
    },
}

/// `[global]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    /// The project; empty: the metadata server's `project/project-id`.
    pub project_id: Option<String>,
    /// The network of the cluster's routes and firewalls; empty: the metadata server's
    /// first interface's network.
    pub network_name: Option<String>,
    /// The subnetwork of internal load balancers' forwarding rules (when the Service names
    /// none).
    pub subnetwork_name: Option<String>,
    /// Network tags of the nodes: firewall targets and route tags.
    pub node_tags: Vec<String>,
    /// Instances of this cluster start with this prefix (routes to others are not ours).
    pub node_instance_prefix: Option<String>,
    /// Look for instances in every zone of the region (`multizone` or `regional`).
    pub multizone: bool,
    /// The cluster is regional (implies multizone).
    pub regional: bool,
    /// The Compute Engine v1 base URL (ends in `/`).
    pub api_endpoint: String,
    /// The zone the controller runs in; empty: the metadata server's `instance/zone`.
    pub local_zone: Option<String>,
    /// How requests are authorised.
    pub token_source: TokenSource,
}

impl Default for Global {
    fn default() -> Self {
        Global {
            project_id: None,
            network_name: None,
            subnetwork_name: None,
            node_tags: Vec::new(),
            node_instance_prefix: None,
            multizone: false,
            regional: false,
            api_endpoint: DEFAULT_API_ENDPOINT.into(),
            local_zone: None,
            token_source: TokenSource::Metadata,
        }
    }
}

/// `[Hypercloud]`: what upstream does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// The metadata server (default `$GCE_METADATA_HOST`, as Google's libraries read it, else
    /// `http://169.254.169.254`).
    pub metadata_endpoint: String,
    /// The source address of metadata requests: on the local cloud the metadata server knows
    /// an instance by its address, as GCE's does (default: the OS picks).
    pub metadata_source_address: Option<IpAddr>,
    /// Timeout of one metadata request (default 5s; 100ms to 1m).
    pub metadata_timeout: Duration,
    /// How long an operation is waited for (default 5m; 1s to 1h).
    pub operation_timeout: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            metadata_endpoint: std::env::var("GCE_METADATA_HOST")
                .ok()
                .filter(|h| !h.is_empty())
                .map(|h| format!("http://{h}"))
                .unwrap_or_else(|| DEFAULT_METADATA_ENDPOINT.into()),
            metadata_source_address: None,
            metadata_timeout: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(300),
        }
    }
}

/// A parsed gce.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `[global]`.
    pub global: Global,
    /// `[Hypercloud]`.
    pub tuning: Tuning,
    /// Where the config came from, for messages.
    pub origin: String,
    /// Warnings logged while parsing.
    pub warnings: Vec<String>,
}

/// Upstream `[global]` keys that are understood but not implemented: a warning names them.
const UNIMPLEMENTED_GLOBAL: &[(&str, &str)] = &[
    (
        "network-project-id",
        "shared VPC (a network in another project) is not implemented; the network is looked up in project-id",
    ),
    (
        "secondary-range-name",
        "alias IP ranges are not implemented (routes carry pod CIDRs)",
    ),
    (
        "container-api-endpoint",
        "the provider makes no Kubernetes Engine API calls",
    ),
    ("alpha-features", "no alpha feature is implemented"),
];

fn http_url(v: &str) -> std::result::Result<String, String> {
    let url = v.trim();
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url.to_owned())
    } else {
        Err(format!("{url:?} is not an http(s) URL"))
    }
}

fn duration_in(v: &str, min: Duration, max: Duration) -> std::result::Result<Duration, String> {
    let v = v.trim();
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{v:?} is not a duration (e.g. 5s, 500ms, 2m)"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("{v:?} is not a duration (e.g. 5s, 500ms, 2m)")),
    };
    if d < min || d > max {
        return Err(format!("{v} is out of range ({min:?} to {max:?})"));
    }
    Ok(d)
}

impl Config {
    /// Parses the file; warnings are logged and kept.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let file = gcfg::parse(text).map_err(|message| Error::ParseCloudConfig {
            origin: origin.into(),
            message,
        })?;
        let mut cfg = Config {
            origin: origin.into(),
            ..Config::default()
        };
        for s in &file.sections {
            if !["global", "hypercloud"].contains(&s.name.to_ascii_lowercase().as_str()) {
                cfg.warn(format!(
                    "{origin}: line {}: unknown section [{}] ignored",
                    s.line, s.name
                ));
            }
        }
        let mut token_url: Option<String> = None;
        let mut token_body: Option<String> = None;
        let mut credentials_file: Option<PathBuf> = None;
        let mut anonymous = false;
        for e in &file.entries {
            let err = |m: String| Error::ParseCloudConfig {
                origin: origin.into(),
                message: format!("line {}: [{}] {}: {m}", e.line, e.section, e.key),
            };
            let v = e.value.clone().unwrap_or_default();
            let some = || Some(v.trim().to_owned()).filter(|v| !v.is_empty());
            let key = e.key_lower();
            match (e.section.as_str(), key.as_str()) {
                ("global", "project-id") => cfg.global.project_id = some(),
                ("global", "network-name") => cfg.global.network_name = some(),
                ("global", "subnetwork-name") => cfg.global.subnetwork_name = some(),
                // gcfg multi-value key: one tag per line.
                ("global", "node-tags") => {
                    if let Some(t) = some() {
                        if !cfg.global.node_tags.contains(&t) {
                            cfg.global.node_tags.push(t);
                        }
                    }
                }
                ("global", "node-instance-prefix") => cfg.global.node_instance_prefix = some(),
                ("global", "multizone") => {
                    cfg.global.multizone = gcfg::parse_bool(e.value.as_deref()).map_err(err)?
                }
                ("global", "regional") => {
                    cfg.global.regional = gcfg::parse_bool(e.value.as_deref()).map_err(err)?
                }
                ("global", "api-endpoint") => {
                    let mut url = http_url(&v).map_err(err)?;
                    if !url.ends_with('/') {
                        url.push('/');
                    }
                    cfg.global.api_endpoint = url;
                }
                ("global", "local-zone") => cfg.global.local_zone = some(),
                ("global", "token-url") => token_url = some(),
                ("global", "token-body") => token_body = Some(v.clone()),
                ("global", k) if UNIMPLEMENTED_GLOBAL.iter().any(|(n, _)| *n == k) => {
                    let why = UNIMPLEMENTED_GLOBAL
                        .iter()
                        .find(|(n, _)| *n == k)
                        .map_or("", |(_, w)| *w);
                    cfg.warn(format!(
                        "{origin}: line {}: [global] {} is not implemented by hypercloud and is ignored: {why}",
                        e.line, e.key
                    ))
                }
                ("hypercloud", "metadata-endpoint") => {
                    cfg.tuning.metadata_endpoint =
                        http_url(&v).map_err(err)?.trim_end_matches('/').into()
                }
                ("hypercloud", "credentials-file") => {
                    credentials_file = some().map(PathBuf::from);
                }
                ("hypercloud", "anonymous") => {
                    anonymous = gcfg::parse_bool(e.value.as_deref()).map_err(err)?
                }
                ("hypercloud", "metadata-source-address") => {
                    cfg.tuning.metadata_source_address = Some(
                        v.trim()
                            .parse()
                            .map_err(|_| err(format!("{v:?} is not an IP address")))?,
                    )
                }
                ("hypercloud", "metadata-timeout") => {
                    cfg.tuning.metadata_timeout =
                        duration_in(&v, Duration::from_millis(100), Duration::from_secs(60))
                            .map_err(err)?
                }
                ("hypercloud", "operation-timeout") => {
                    cfg.tuning.operation_timeout =
                        duration_in(&v, Duration::from_secs(1), Duration::from_secs(3600))
                            .map_err(err)?
                }
                ("global" | "hypercloud", _) => cfg.warn(format!(
                    "{origin}: line {}: unknown key {:?} in [{}] ignored",
                    e.line, e.key, e.section
                )),
                _ => {} // in an unknown section, already warned about
            }
        }
        cfg.global.token_source =
            cfg.token_source(token_url, token_body, credentials_file, anonymous)?;
        Ok(cfg)
    }

    /// Which credentials the token keys choose; keys a choice overrides are warned about by
    /// name, never dropped silently.
    fn token_source(
        &mut self,
        token_url: Option<String>,
        token_body: Option<String>,
        credentials_file: Option<PathBuf>,
        anonymous: bool,
    ) -> Result<TokenSource> {
        let origin = self.origin.clone();
        if anonymous {
            for (set, key) in [
                (token_url.is_some(), "[global] token-url"),
                (token_body.is_some(), "[global] token-body"),
                (credentials_file.is_some(), "[Hypercloud] credentials-file"),
            ] {
                if set {
                    self.warn(format!(
                        "{origin}: {key} is ignored: [Hypercloud] anonymous = true sends no token"
                    ));
                }
            }
            return Ok(TokenSource::Anonymous);
        }
        if let Some(path) = credentials_file {
            for (set, key) in [
                (token_url.is_some(), "[global] token-url"),
                (token_body.is_some(), "[global] token-body"),
            ] {
                if set {
                    self.warn(format!(
                        "{origin}: {key} is ignored: [Hypercloud] credentials-file gives the credentials"
                    ));
                }
            }
            return Ok(TokenSource::KeyFile(path));
        }
        Ok(match (token_url, token_body) {
            (None, None) => TokenSource::Metadata,
            (None, Some(_)) => {
                self.warn(format!(
                    "{origin}: [global] token-body without token-url is ignored"
                ));
                TokenSource::Metadata
            }
            (Some(u), body) if u == "nil" => {
                if body.is_some() {
                    self.warn(format!(
                        "{origin}: [global] token-body is ignored with token-url = nil (Application Default Credentials)"
                    ));
                }
                TokenSource::DefaultCredentials
            }
            (Some(u), body) => TokenSource::Alt {
                url: http_url(&u).map_err(|m| Error::ParseCloudConfig {
                    origin: origin.clone(),
                    message: format!("[global] token-url: {m}"),
                })?,
                body: body.unwrap_or_default(),
            },
        })
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    /// Whether instances are looked for in every zone of the region.
    pub fn multizone(&self) -> bool {
        self.global.multizone || self.global.regional
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn upstream_keys_parse() {
        let c = Config::parse(
            "[global]\nproject-id = demo\nnetwork-name = private\nnode-tags = a\nnode-tags = b\n\
             node-instance-prefix = kubernetes-minion\nmultizone = true\nlocal-zone = us-central1-a\n\
             api-endpoint = http://127.0.0.1:8800/compute/v1\ntoken-url = nil\n",
            "gce.conf",
        )
        .unwrap();
        assert_eq!(c.global.project_id.as_deref(), Some("demo"));
        assert_eq!(c.global.node_tags, ["a", "b"]);
        assert!(c.multizone());
        assert_eq!(c.global.api_endpoint, "http://127.0.0.1:8800/compute/v1/");
        assert_eq!(c.global.token_source, TokenSource::DefaultCredentials);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn token_url_with_body_is_the_alt_source() {
        let c = Config::parse(
            "[global]\ntoken-url = http://127.0.0.1:1/token\ntoken-body = \"{\\\"a\\\": 1}\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(
            c.global.token_source,
            TokenSource::Alt {
                url: "http://127.0.0.1:1/token".into(),
                body: "{\"a\": 1}".into()
            }
        );
    }

    #[test]
    fn hypercloud_credentials_keys_override_token_url_with_a_warning() {
        let c = Config::parse(
            "[global]\ntoken-url = nil\n[Hypercloud]\nanonymous = true\ncredentials-file = /k.json\n",
            "gce.conf",
        )
        .unwrap();
        assert_eq!(c.global.token_source, TokenSource::Anonymous);
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("token-url is ignored")),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("credentials-file is ignored")),
            "{:?}",
            c.warnings
        );
        let c = Config::parse(
            "[global]\ntoken-url = nil\n[Hypercloud]\ncredentials-file = /k.json\n",
            "gce.conf",
        )
        .unwrap();
        assert_eq!(
            c.global.token_source,
            TokenSource::KeyFile("/k.json".into())
        );
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        let c = Config::parse("[Hypercloud]\nanonymous = false\n", "gce.conf").unwrap();
        assert_eq!(c.global.token_source, TokenSource::Metadata);
    }

    #[test]
    fn unknown_and_unimplemented_keys_are_warned_by_name() {
        let c = Config::parse(
            "[global]\nnetwork-project-id = other\nbogus = 1\n[Elsewhere]\nx = 1\n",
            "gce.conf",
        )
        .unwrap();
        assert!(c.warnings.iter().any(|w| w.contains("network-project-id")));
        assert!(c.warnings.iter().any(|w| w.contains("\"bogus\"")));
        assert!(c.warnings.iter().any(|w| w.contains("[Elsewhere]")));
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        for (text, want) in [
            ("[global]\nmultizone = maybe\n", "multizone"),
            ("[global]\napi-endpoint = ftp://x\n", "api-endpoint"),
            ("[Hypercloud]\nmetadata-timeout = 2h\n", "metadata-timeout"),
            (
                "[Hypercloud]\nmetadata-source-address = x\n",
                "metadata-source-address",
            ),
        ] {
            let e = Config::parse(text, "gce.conf").unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    const SAMPLE: &str = "[global]\nproject-id = demo\nnetwork-name = private\nnode-tags = a\nnode-tags = b\nnode-instance-prefix = kubernetes-minion\nmultizone = true\nlocal-zone = us-central1-a\napi-endpoint = http://127.0.0.1:8800/compute/v1\ntoken-url = nil\n";

    hypercloud_cloudprovider::config_fuzz!(Config::parse, "fuzz.conf", mutated_sample => SAMPLE);
}
