//! The legacy provider's cloud config (gcfg), which it required. Both shapes it had are read:
//!
//! ```ini
//! [Global]
//! target = https://10.0.0.10:443   ; the Photon Controller endpoint (required)
//! project = 4b1f...                ; the project's ID (v1.8-v1.13)
//! ; tenant = prod                  ; v1.6-v1.7: with a tenant, `project` is a name in it
//! overrideIP = false               ; Node names are the VMs' IPs (kubelet --hostname-override)
//! vmID = 2c0e...                   ; the VM of this kubelet (v1.8-v1.13)
//! authentication = false           ; log in to Lightwave with /etc/kubernetes/pc_login_info
//! ignoreCertificate = false        ; do not verify the endpoint's certificate
//! ```
//!
//! As gcfg made it for the legacy provider, an unknown section or key is an error naming it.
//! `[Hypercloud] login-info-file` (where the `authentication` user and password are, default
//! upstream's `/etc/kubernetes/pc_login_info`) and `ca-file` are hypercloud's.

use std::path::PathBuf;

use hypercloud_cloudprovider::{gcfg, CloudConfig, Error, Result};

use crate::PROVIDER_NAME;

/// Where upstream read the Lightwave user (first line) and password (second line).
pub const DEFAULT_LOGIN_INFO_FILE: &str = "/etc/kubernetes/pc_login_info";

/// How the provider finds its project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProjectRef {
    /// `project` is the project's ID (v1.8-v1.13).
    Id(String),
    /// `tenant` and `project` are names, looked up at start (v1.6-v1.7 `getProjIDbyName`).
    Named { tenant: String, project: String },
}

/// What the provider is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `[Global] target`, without a trailing `/`.
    pub target: String,
    pub project: ProjectRef,
    /// `[Global] overrideIP`: Node names are the VMs' IP addresses.
    pub override_ip: bool,
    /// `[Global] vmID`: the VM this process runs on (the kubelet's own Node).
    pub vm_id: Option<String>,
    /// `[Global] authentication`: log in to Lightwave with the login info file.
    pub authentication: bool,
    /// `[Global] ignoreCertificate`.
    pub ignore_certificate: bool,
    /// `[Hypercloud] login-info-file`.
    pub login_info_file: PathBuf,
    /// `[Hypercloud] ca-file`.
    pub ca_file: Option<PathBuf>,
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

    /// Parses the gcfg text; the error names the line, section or key.
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        let file = gcfg::parse(text)?;
        for s in &file.sections {
            let known = matches!(
                s.name.to_ascii_lowercase().as_str(),
                "global" | "hypercloud"
            );
            if !known || s.subsection.is_some() {
                return Err(format!(
                    "line {}: unknown section [{}]; the photon provider reads [Global] and [Hypercloud]",
                    s.line, s.name
                ));
            }
        }
        let (mut target, mut tenant, mut project, mut vm_id) = (None, None, None, None);
        let mut config = Config {
            target: String::new(),
            project: ProjectRef::Id(String::new()),
            override_ip: false,
            vm_id: None,
            authentication: false,
            ignore_certificate: false,
            login_info_file: PathBuf::from(DEFAULT_LOGIN_INFO_FILE),
            ca_file: None,
        };
        for e in &file.entries {
            let at = |m: &str| format!("line {}: [{}] {}: {m}", e.line, e.section, e.key);
            let value = e.value.clone().unwrap_or_default().trim().to_owned();
            let flag = || gcfg::parse_bool(e.value.as_deref()).map_err(|m| at(&m));
            match (e.section.as_str(), e.key_lower().as_str()) {
                ("global", "target") => target = Some(value),
                ("global", "tenant") => tenant = Some(value).filter(|t| !t.is_empty()),
                ("global", "project") => project = Some(value),
                ("global", "overrideip") => config.override_ip = flag()?,
                ("global", "vmid") => vm_id = Some(value).filter(|v| !v.is_empty()),
                ("global", "authentication") => config.authentication = flag()?,
                ("global", "ignorecertificate") => config.ignore_certificate = flag()?,
                ("hypercloud", "login-info-file") => config.login_info_file = PathBuf::from(value),
                ("hypercloud", "ca-file") => config.ca_file = Some(PathBuf::from(value)),
                _ => return Err(at("unknown key")),
            }
        }
        // Upstream's words for a missing endpoint.
        let target = target
            .filter(|t| !t.is_empty())
            .ok_or("Photon Controller endpoint was not specified ([Global] target)".to_string())?;
        let target = target.trim_end_matches('/');
        if !(target.starts_with("http://") || target.starts_with("https://"))
            || target.contains(['?', '#'])
            || target.contains(char::is_whitespace)
        {
            return Err(format!(
                "[Global] target: {target:?} is not an http(s) URL of the Photon Controller endpoint"
            ));
        }
        config.target = target.to_owned();
        let project = project
            .filter(|p| !p.is_empty())
            .ok_or("[Global] project is required: the Photon Controller project of the cluster's VMs (its ID; its name when [Global] tenant is set)".to_string())?;
        config.project = match tenant {
            Some(tenant) => ProjectRef::Named { tenant, project },
            None => ProjectRef::Id(project),
        };
        config.vm_id = vm_id;
        Ok(config)
    }
}

/// The Lightwave user and password of a login info file: its first two lines, as upstream read
/// them; the error says which is missing, never a value.
pub fn read_login_info(path: &std::path::Path) -> std::result::Result<(String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "authentication is enabled but found no username/password at {}: {e}",
            path.display()
        )
    })?;
    let mut lines = text.lines();
    let user = lines
        .next()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| format!("empty username inside {} (its first line)", path.display()))?;
    let password = lines
        .next()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("empty password inside {} (its second line)", path.display()))?;
    Ok((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn both_legacy_shapes_and_the_defaults() {
        let c = Config::parse(
            "[Global]\ntarget = https://pc:443/\nproject = p-1\nvmID = vm-1\noverrideIP = true\n",
        )
        .unwrap();
        assert_eq!(c.target, "https://pc:443");
        assert_eq!(c.project, ProjectRef::Id("p-1".into()));
        assert_eq!(c.vm_id.as_deref(), Some("vm-1"));
        assert!(c.override_ip && !c.authentication && !c.ignore_certificate);
        assert_eq!(c.login_info_file, PathBuf::from(DEFAULT_LOGIN_INFO_FILE));
        let old = Config::parse(
            "[Global]\ntarget = http://pc\ntenant = prod\nproject = k8s\nignoreCertificate = true\n",
        )
        .unwrap();
        assert_eq!(
            old.project,
            ProjectRef::Named {
                tenant: "prod".into(),
                project: "k8s".into()
            }
        );
        assert!(old.ignore_certificate);
        let e = Config::from_cloud_config(None).unwrap_err().to_string();
        assert!(e.contains("needs a cloud config file"), "{e}");
    }

    #[test]
    fn bad_input_is_named() {
        for (text, want) in [
            ("[Global]\nproject = p\n", "endpoint was not specified"),
            (
                "[Global]\ntarget = pc:443\nproject = p\n",
                "is not an http(s) URL",
            ),
            (
                "[Global]\ntarget = http://pc\n",
                "[Global] project is required",
            ),
            (
                "[Global]\ntarget = http://pc\nproject = p\nzone = a\n",
                "zone: unknown key",
            ),
            (
                "[Global]\ntarget = http://pc\nproject = p\noverrideIP = maybe\n",
                "overrideIP",
            ),
            (
                "[VirtualCenter]\ntarget = http://pc\n",
                "unknown section [VirtualCenter]",
            ),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn login_info_is_two_lines() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pc_login_info");
        std::fs::write(&f, "admin@photon.local\ns3cret\n").unwrap();
        assert_eq!(
            read_login_info(&f).unwrap(),
            ("admin@photon.local".into(), "s3cret".into())
        );
        std::fs::write(&f, "admin\n").unwrap();
        assert!(read_login_info(&f).unwrap_err().contains("empty password"));
        std::fs::write(&f, "").unwrap();
        assert!(read_login_info(&f).unwrap_err().contains("empty username"));
        let e = read_login_info(&dir.path().join("none")).unwrap_err();
        assert!(e.contains("found no username/password"), "{e}");
    }
}
