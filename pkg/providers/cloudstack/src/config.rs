//! The legacy provider's cloud config (gcfg):
//!
//! ```ini
//! [Global]
//! api-url = https://cloud.example.com/client/api   ; the API endpoint
//! api-key = ...                                    ; the user's API key
//! secret-key = ...                                 ; and secret key
//! ssl-no-verify = false                            ; do not verify the endpoint's certificate
//! project-id = ...                                 ; the project of the cluster's resources
//! zone = ...                                       ; the zone (else the instance's, found by host name)
//! ```
//!
//! Without `api-url`, `api-key` and `secret-key`, the legacy provider ran on the virtual
//! router's metadata alone (the kubelet's case): so does this one with `[Hypercloud]
//! metadata-url` (the legacy provider found the virtual router as its DHCP server). An unknown
//! section or key is an error naming it. `[Hypercloud] job-timeout` (how long an asynchronous
//! job may take, default 5m, go-cloudstack's) and `ca-file` are hypercloud's.

use std::path::PathBuf;
use std::time::Duration;

use hypercloud_cloudprovider::{duration, gcfg, CloudConfig, Error, Result};

use crate::PROVIDER_NAME;

/// go-cloudstack's default bound on an asynchronous job.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// What the provider is configured with.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// `[Global] api-url` (empty: metadata only).
    pub api_url: String,
    pub api_key: String,
    pub secret_key: String,
    pub ssl_no_verify: bool,
    /// `[Global] project-id` (empty: the user's own resources).
    pub project_id: String,
    /// `[Global] zone` (empty: the instance's).
    pub zone: String,
    /// `[Hypercloud] metadata-url`: the virtual router's metadata service.
    pub metadata_url: Option<String>,
    pub job_timeout: Duration,
    pub ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("api_url", &self.api_url)
            .field("api_key", &"<redacted>")
            .field("secret_key", &"<redacted>")
            .field("ssl_no_verify", &self.ssl_no_verify)
            .field("project_id", &self.project_id)
            .field("zone", &self.zone)
            .field("metadata_url", &self.metadata_url)
            .field("job_timeout", &self.job_timeout)
            .finish()
    }
}

impl Config {
    /// Whether the API is configured (else only the metadata is read).
    pub fn has_api(&self) -> bool {
        !self.api_url.is_empty()
    }

    /// Reads `--cloud-config`; the legacy provider needed one unless it ran on metadata.
    pub fn from_cloud_config(config: Option<&CloudConfig>) -> Result<Config> {
        let Some(c) = config else {
            return Err(Error::MissingCloudConfig {
                provider: PROVIDER_NAME.into(),
            });
        };
        Config::parse(c.text(PROVIDER_NAME)?).map_err(|message| Error::InvalidCloudConfig {
            provider: PROVIDER_NAME.into(),
            origin: c.origin.clone(),
            message,
        })
    }

    /// Parses the gcfg text; errors name the line and key, never a key's value.
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        let file = gcfg::parse(text)?;
        for s in &file.sections {
            let known = matches!(
                s.name.to_ascii_lowercase().as_str(),
                "global" | "hypercloud"
            );
            if !known || s.subsection.is_some() {
                return Err(format!(
                    "line {}: unknown section [{}]; the cloudstack provider reads [Global] and [Hypercloud]",
                    s.line, s.name
                ));
            }
        }
        let mut c = Config {
            api_url: String::new(),
            api_key: String::new(),
            secret_key: String::new(),
            ssl_no_verify: false,
            project_id: String::new(),
            zone: String::new(),
            metadata_url: None,
            job_timeout: DEFAULT_JOB_TIMEOUT,
            ca_file: None,
        };
        for e in &file.entries {
            let at = |m: &str| format!("line {}: [{}] {}: {m}", e.line, e.section, e.key);
            let value = e.value.clone().unwrap_or_default().trim().to_owned();
            match (e.section.as_str(), e.key_lower().as_str()) {
                ("global", "api-url") => c.api_url = value.trim_end_matches('/').to_owned(),
                ("global", "api-key") => c.api_key = value,
                ("global", "secret-key") => c.secret_key = value,
                ("global", "ssl-no-verify") => {
                    c.ssl_no_verify = gcfg::parse_bool(e.value.as_deref()).map_err(|m| at(&m))?
                }
                ("global", "project-id") => c.project_id = value,
                ("global", "zone") => c.zone = value,
                ("hypercloud", "metadata-url") => {
                    c.metadata_url = Some(value.trim_end_matches('/').to_owned())
                }
                ("hypercloud", "job-timeout") => {
                    c.job_timeout = duration::parse_in(
                        &value,
                        Duration::from_secs(1),
                        Duration::from_secs(3600),
                    )
                    .map_err(|m| at(&m))?;
                }
                ("hypercloud", "ca-file") => c.ca_file = Some(PathBuf::from(value)),
                _ => return Err(at("unknown key")),
            }
        }
        let api = [&c.api_url, &c.api_key, &c.secret_key];
        let given = api.iter().filter(|v| !v.is_empty()).count();
        if given != 0 && given != 3 {
            return Err(
                "[Global] api-url, api-key and secret-key go together: one is missing".into(),
            );
        }
        if given == 0 && c.metadata_url.is_none() {
            // Upstream's words, when it found neither.
            return Err("no cloud provider config given: [Global] api-url, api-key and secret-key (or [Hypercloud] metadata-url, for the virtual router's metadata alone)".into());
        }
        for (key, url) in [
            ("[Global] api-url", Some(&c.api_url)),
            ("[Hypercloud] metadata-url", c.metadata_url.as_ref()),
        ] {
            if let Some(u) = url.filter(|u| !u.is_empty()) {
                if !(u.starts_with("http://") || u.starts_with("https://"))
                    || u.contains(char::is_whitespace)
                {
                    return Err(format!("{key}: {u:?} is not an http(s) URL"));
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_legacy_keys() {
        let c = Config::parse(
            "[Global]\napi-url = http://cs/client/api/\napi-key = k\nsecret-key = s3cret\nproject-id = p\nzone = z1\nssl-no-verify = true\n",
        )
        .unwrap();
        assert_eq!(c.api_url, "http://cs/client/api");
        assert!(c.has_api() && c.ssl_no_verify);
        assert_eq!((c.project_id.as_str(), c.zone.as_str()), ("p", "z1"));
        assert_eq!(c.job_timeout, DEFAULT_JOB_TIMEOUT);
        assert!(!format!("{c:?}").contains("s3cret"));
        let m = Config::parse("[Hypercloud]\nmetadata-url = http://10.1.1.1\njob-timeout = 30s\n")
            .unwrap();
        assert!(!m.has_api());
        assert_eq!(m.metadata_url.as_deref(), Some("http://10.1.1.1"));
        assert_eq!(m.job_timeout, Duration::from_secs(30));
    }

    #[test]
    fn bad_input_is_named() {
        for (text, want) in [
            ("[Global]\nzone = z\n", "no cloud provider config given"),
            ("[Global]\napi-url = http://cs\napi-key = k\n", "go together"),
            ("[Global]\napi-url = cs\napi-key = k\nsecret-key = s\n", "is not an http(s) URL"),
            ("[Global]\napi-url = http://cs\napi-key = k\nsecret-key = s\nregion = r\n", "region: unknown key"),
            ("[LoadBalancer]\nx = 1\n", "unknown section [LoadBalancer]"),
            ("[Hypercloud]\nmetadata-url = http://m\njob-timeout = 2h\n", "out of range"),
            ("[Global]\nssl-no-verify = maybe\napi-url = http://cs\napi-key = k\nsecret-key = s\n", "ssl-no-verify"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains("s3cret"));
        }
    }
}
