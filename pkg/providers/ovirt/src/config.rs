//! The legacy provider's cloud config (gcfg), which it required:
//!
//! ```ini
//! [connection]
//! uri = https://engine.example.com/api     ; the engine's API entry (v3: .../api)
//! username = admin@internal               ; default admin@internal
//! password = secret
//! [filters]
//! vms = tag=kubernetes                    ; oVirt's search for the Nodes' VMs (default: all)
//! ```
//!
//! As gcfg made it for the legacy provider, an unknown section or key is an error naming it.
//! `[Hypercloud] ca-file` and `insecure` are hypercloud's (the legacy provider used Go's
//! default TLS, the system's CAs).

use std::path::PathBuf;

use hypercloud_cloudprovider::{gcfg, CloudConfig, Error, Result};

use crate::PROVIDER_NAME;

/// Upstream's default user.
pub const DEFAULT_USERNAME: &str = "admin@internal";

/// What the provider is configured with.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The API entry (`[connection] uri`), without a trailing `/`.
    pub uri: String,
    /// `[connection] username`.
    pub username: String,
    /// `[connection] password`.
    pub password: String,
    /// `[filters] vms`: the search that selects the Nodes' VMs (empty: every VM).
    pub vms_query: String,
    /// `[Hypercloud] ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `[Hypercloud] insecure`: do not verify the engine's certificate.
    pub insecure: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("uri", &self.uri)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("vms_query", &self.vms_query)
            .field("ca_file", &self.ca_file)
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl Config {
    /// Reads `--cloud-config`, which the legacy provider required.
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

    /// Parses the gcfg text; the error names the line, section or key (never a value of
    /// `password`).
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        let file = gcfg::parse(text)?;
        for s in &file.sections {
            let known = matches!(
                s.name.to_ascii_lowercase().as_str(),
                "connection" | "filters" | "hypercloud"
            );
            if !known || s.subsection.is_some() {
                return Err(format!(
                    "line {}: unknown section [{}]; the ovirt provider reads [connection], [filters] and [Hypercloud]",
                    s.line, s.name
                ));
            }
        }
        let mut uri = None;
        let mut config = Config {
            uri: String::new(),
            username: DEFAULT_USERNAME.into(),
            password: String::new(),
            vms_query: String::new(),
            ca_file: None,
            insecure: false,
        };
        for e in &file.entries {
            let at = |m: &str| format!("line {}: [{}] {}: {m}", e.line, e.section, e.key);
            let value = e.value.clone().unwrap_or_default();
            match (e.section.as_str(), e.key_lower().as_str()) {
                ("connection", "uri") => uri = Some(value),
                ("connection", "username") => config.username = value,
                ("connection", "password") => config.password = value,
                ("filters", "vms") => config.vms_query = value,
                ("hypercloud", "ca-file") => config.ca_file = Some(PathBuf::from(value)),
                ("hypercloud", "insecure") => {
                    config.insecure = gcfg::parse_bool(e.value.as_deref()).map_err(|m| at(&m))?
                }
                _ => return Err(at("unknown key")),
            }
        }
        let uri = uri.filter(|u| !u.trim().is_empty()).ok_or(
            "missing ovirt uri in cloud provider configuration ([connection] uri)".to_string(),
        )?;
        let uri = uri.trim().trim_end_matches('/');
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(format!(
                "[connection] uri: {uri:?} is not an http(s) URL of the engine's API"
            ));
        }
        if uri.contains(['?', '#']) || uri.contains(char::is_whitespace) {
            return Err(format!(
                "[connection] uri: {uri:?} must be the API entry, without a query"
            ));
        }
        config.uri = uri.to_owned();
        if config.username.contains(char::is_control) {
            return Err("[connection] username holds a control character".into());
        }
        Ok(config)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_legacy_keys_and_defaults() {
        let c = Config::parse(
            "[connection]\nuri = https://engine/api/\npassword = s3cret\n[filters]\nvms = tag=kubernetes\n",
        )
        .unwrap();
        assert_eq!(c.uri, "https://engine/api");
        assert_eq!(c.username, "admin@internal");
        assert_eq!(c.vms_query, "tag=kubernetes");
        assert!(!format!("{c:?}").contains("s3cret"));
        let e = Config::from_cloud_config(None).unwrap_err().to_string();
        assert!(e.contains("needs a cloud config file"), "{e}");
    }

    #[test]
    fn bad_input_is_named() {
        for (text, want) in [
            ("[connection]\nusername = a\n", "missing ovirt uri"),
            ("[connection]\nuri = engine/api\n", "is not an http(s) URL"),
            ("[connection]\nuri = http://e/api?x=1\n", "without a query"),
            ("[Global]\nuri = http://e/api\n", "unknown section [Global]"),
            (
                "[connection]\nuri = http://e/api\nurl = x\n",
                "[connection] url: unknown key",
            ),
            (
                "[connection]\nuri = http://e/api\n[Hypercloud]\ninsecure = maybe\n",
                "insecure",
            ),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
