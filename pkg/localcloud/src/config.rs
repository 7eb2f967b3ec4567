//! What a local-cloud server is started with ([`ServerConfig`]) and how a configuration built
//! in code is checked the way flags are. Below the API: handlers read the configuration from
//! their shared state.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::faults::Faults;
use crate::tls::TlsFiles;
use crate::{defaults, Error, Result};

/// The longest token lifetime `--token-ttl` (and [`ServerConfig::token_ttl`]) accepts: 365 days.
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(365 * 86_400);

/// Everything a server needs to start; [`ServerConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub state_dir: PathBuf,
    /// API address; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Metadata service address; `None` runs none.
    pub metadata_listen: Option<SocketAddr>,
    /// Where config drives go (default `<state_dir>/config-drive`).
    pub config_drive_dir: Option<PathBuf>,
    /// The URL clients use, when not `http://<listen address>` (a proxy, TLS in front).
    pub public_url: Option<String>,
    pub region: String,
    pub user: String,
    pub password: String,
    pub project: String,
    /// Replaces the stored availability zones when given (they persist otherwise).
    pub availability_zones: Option<Vec<String>>,
    pub token_ttl: Duration,
    pub faults: Faults,
    /// Serve the API over TLS with these files.
    pub tls: Option<TlsFiles>,
    /// Serve the API over TLS with a certificate of the cloud's own CA, made once and kept in
    /// `<state_dir>/tls/` (`--tls-self-signed`); contradicts [`ServerConfig::tls`].
    pub tls_self_signed: bool,
    /// Require a TLS client certificate signed by a CA of this PEM bundle on the API
    /// (`--tls-client-ca`), as an OpenStack whose endpoints verify client certificates; needs
    /// [`ServerConfig::tls`] or [`ServerConfig::tls_self_signed`].
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Where load balancer VIPs come from (default 127.0.100.0/24, loopback on Linux).
    pub lb_vip_pool: crate::dataplane::VipPool,
    /// Members' Neutron security groups filter load-balancer traffic, as Neutron's firewall
    /// does (default off: the groups are bookkeeping).
    pub enforce_member_security_groups: bool,
    /// The GCE dialect's Compute Engine and IAM requests need a token (`--gce-require-tokens`;
    /// default off: Google's clients are driven with anonymous credentials).
    pub gce_require_tokens: bool,
    /// The Mesos dialect's cluster name (`--mesos-cluster`; the master's `--cluster`): the
    /// `cluster` field of `/state`, absent when `None`.
    pub mesos_cluster: Option<String>,
    /// The Photon dialect's requests need a Lightwave token (`--photon-require-tokens`; the
    /// photon provider's `authentication = true`); default off, as a Photon Controller deployed
    /// without authentication.
    pub photon_require_tokens: bool,
    /// The CloudStack dialect's async jobs never finish: `queryAsyncJobResult` answers
    /// `jobstatus` 0 for every job (the change itself is made). No flag: for tests of clients'
    /// bounded waits.
    pub cloudstack_stuck_jobs: bool,
    /// What backs volumes (default none: records only); see `--volume-backing`.
    pub volume_backing: crate::VolumeBacking,
    /// Follow the load balancers of an AWS endpoint (moto) and serve their listeners (see
    /// `--follow-aws-elb`); needs the `aws-follow` feature.
    pub follow_aws: Option<crate::AwsFollow>,
}

/// Why `name` cannot be a region or an availability zone: both are path segments of the APIs
/// (`/compute/v1/projects/P/zones/NAME`), catalog entries and config-file values, so a name is
/// letters, digits, `-`, `_` and `.`, and not a dot segment (no `/`, spaces or
/// control characters, which would only fail later, at the first request that names them), and
/// at most 63 long: zones become `topology.kubernetes.io/zone` label values, which cannot be longer.
pub(crate) fn check_location(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > 63 {
        return Err(format!("is {} bytes long; at most 63", name.len()));
    }
    if name == "." || name == ".." {
        return Err("must not be a dot segment".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "holds {:?}; only letters, digits, '-', '_' and '.' are allowed",
            c
        ));
    }
    Ok(())
}

/// Why `name` cannot be the Mesos cluster's name: it is free text in Mesos, but shown in
/// `/state` and returned by the mesos provider's `ListClusters`, so it is one line of at most
/// 255 bytes.
pub(crate) fn check_cluster_name(name: &str) -> std::result::Result<(), String> {
    if name.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > 255 {
        return Err(format!("is {} bytes long; at most 255", name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err("holds a control character".into());
    }
    Ok(())
}

impl ServerConfig {
    /// The defaults of [`defaults`], on the given state directory.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            state_dir: state_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8800)),
            metadata_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8801))),
            config_drive_dir: None,
            public_url: None,
            region: defaults::REGION.into(),
            user: defaults::USER.into(),
            password: defaults::PASSWORD.into(),
            project: defaults::PROJECT.into(),
            availability_zones: None,
            token_ttl: Duration::from_secs(defaults::TOKEN_TTL_SECS),
            faults: Faults::default(),
            tls: None,
            tls_self_signed: false,
            tls_client_ca: None,
            lb_vip_pool: crate::dataplane::VipPool::default(),
            enforce_member_security_groups: false,
            gce_require_tokens: false,
            mesos_cluster: None,
            photon_require_tokens: false,
            cloudstack_stuck_jobs: false,
            volume_backing: crate::VolumeBacking::None,
            follow_aws: None,
        }
    }

    /// For tests and the offline CLI: free loopback ports for both listeners.
    pub fn ephemeral(state_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metadata_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..ServerConfig::new(state_dir)
        }
    }

    /// Checks what flags check, for configurations built in code: the VIP pool inside
    /// 127.0.0.0/8, the token lifetime within 1s..=365 days, latencies within
    /// [`crate::faults::MAX_LATENCY`] and rates within 0..=1, and one source of TLS material.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field: &'static str, reason: String| Error::InvalidConfig { field, reason };
        if self.tls_self_signed && self.tls.is_some() {
            return Err(invalid(
                "tls_self_signed",
                "contradicts tls (--tls-self-signed with --tls-cert-file): give one".into(),
            ));
        }
        if self.tls_client_ca.is_some() && self.tls.is_none() && !self.tls_self_signed {
            return Err(invalid(
                "tls_client_ca",
                "client certificates need TLS (--tls-client-ca with --tls-self-signed or --tls-cert-file)".into(),
            ));
        }
        self.lb_vip_pool
            .check()
            .map_err(|r| invalid("lb_vip_pool", r))?;
        check_location(&self.region).map_err(|r| invalid("region", r))?;
        if let Some(name) = &self.mesos_cluster {
            check_cluster_name(name).map_err(|r| invalid("mesos_cluster", r))?;
        }
        if let Some(f) = &self.follow_aws {
            if !cfg!(feature = "aws-follow") {
                return Err(invalid(
                    "follow_aws",
                    "this build has no AWS follower (feature aws-follow)".into(),
                ));
            }
            check_location(&f.region).map_err(|r| invalid("follow_aws.region", r))?;
            if !(f.endpoint.starts_with("http://") || f.endpoint.starts_with("https://")) {
                return Err(invalid(
                    "follow_aws.endpoint",
                    format!("{:?} is not an http(s) URL", f.endpoint),
                ));
            }
            if f.interval < Duration::from_millis(100) || f.interval > Duration::from_secs(600) {
                return Err(invalid(
                    "follow_aws.interval",
                    format!("{:?} is outside 100ms..=10m", f.interval),
                ));
            }
        }
        for zone in self.availability_zones.iter().flatten() {
            check_location(zone).map_err(|r| invalid("availability_zones", r))?;
        }
        if self.token_ttl < Duration::from_secs(1) || self.token_ttl > MAX_TOKEN_TTL {
            return Err(invalid(
                "token_ttl",
                format!("{:?} is outside 1s..=365 days", self.token_ttl),
            ));
        }
        let latencies = self
            .faults
            .latency
            .0
            .global
            .iter()
            .chain(self.faults.latency.0.services.values());
        if let Some(d) = latencies
            .into_iter()
            .find(|d| **d > crate::faults::MAX_LATENCY)
        {
            return Err(invalid("faults.latency", format!("{d:?} is above 10m")));
        }
        for (field, rate) in [
            ("faults.error_rate", &self.faults.error_rate),
            ("faults.throttle_rate", &self.faults.throttle_rate),
            (
                "faults.operation_failure_rate",
                &self.faults.operation_failure_rate,
            ),
        ] {
            let mut all = rate.0.global.iter().chain(rate.0.services.values());
            if let Some(r) = all.find(|r| !(0.0..=1.0).contains(*r)) {
                return Err(invalid(field, format!("{r} is outside 0..=1")));
            }
        }
        if let Some(other) = self
            .faults
            .operation_failure_rate
            .0
            .services
            .keys()
            .find(|k| **k != crate::http::Service::Azure)
        {
            return Err(invalid(
                "faults.operation_failure_rate",
                format!(
                    "{} has no long-running operations that can fail here (only azure)",
                    other.name()
                ),
            ));
        }
        Ok(())
    }

    /// The config drive directory in effect.
    pub fn config_drive_dir(&self) -> PathBuf {
        self.config_drive_dir
            .clone()
            .unwrap_or_else(|| self.state_dir.join("config-drive"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_zones_are_path_safe_names() {
        for ok in ["RegionOne", "nova", "us-east1-b", "az_2.x"] {
            assert!(check_location(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "a\nb",
            "a%2Fb",
            &"x".repeat(64),
        ] {
            assert!(check_location(bad).is_err(), "{bad:?}");
        }
        let mut config = ServerConfig::ephemeral("/nonexistent");
        config.availability_zones = Some(vec!["nova".into(), "".into()]);
        let e = config.validate().unwrap_err().to_string();
        assert!(e.contains("availability_zones"), "{e}");
        config.availability_zones = None;
        config.region = "a/b".into();
        let e = config.validate().unwrap_err().to_string();
        assert!(e.contains("region"), "{e}");
    }

    #[test]
    fn one_source_of_tls_material() {
        let mut config = ServerConfig::ephemeral("/nonexistent");
        config.tls_self_signed = true;
        assert!(config.validate().is_ok());
        config.tls = Some(TlsFiles {
            cert_file: "c.pem".into(),
            key_file: "k.pem".into(),
        });
        let e = config.validate().unwrap_err().to_string();
        assert!(e.contains("--tls-self-signed with --tls-cert-file"), "{e}");
    }
}
