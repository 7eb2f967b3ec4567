//! The flags of `hypercloud local-cloud` and its subcommands (clap derive).

use super::*;
use crate::server::MAX_TOKEN_TTL;

/// `hypercloud local-cloud`: a one-machine OpenStack-compatible cloud.
#[derive(Debug, clap::Args)]
pub struct LocalCloudArgs {
    /// State directory: the durable state, lock file and config drives
    /// (default: $HOME/.local/share/hypercloud/local-cloud).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "HYPERCLOUD_LOCAL_CLOUD_STATE_DIR",
        help_heading = "Local cloud flags"
    )]
    pub state_dir: Option<PathBuf>,

    /// Password of the admin user (the server's --password).
    #[arg(long, global = true, value_name = "PASSWORD", env = "HYPERCLOUD_LOCAL_CLOUD_PASSWORD", default_value = defaults::PASSWORD, hide_default_value = true, help_heading = "Local cloud flags")]
    pub password: String,

    #[command(subcommand)]
    pub command: Command,
}

/// What `hypercloud local-cloud` does.
#[derive(Debug, clap::Subcommand)]
// Parsed once at start-up; boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the cloud (API and metadata service) in the foreground until interrupted.
    Serve(ServeArgs),
    /// Manage instances (Nova servers) through the API of the server running on the state
    /// directory, or of an in-process one when none is running.
    #[command(subcommand)]
    Instance(InstanceCommand),
    /// Manage volumes (Cinder volumes), like `instance`.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Show whether the cloud is running, where, and what it holds.
    Status(OutputArgs),
    /// Register the certificates Entra clients sign in with (the Azure dialect's certificate
    /// credentials, as an app registration's uploaded certificates): kept in
    /// `<state-dir>/azure-client-certificates/`, read at each sign-in (no restart needed).
    #[command(subcommand)]
    EntraCertificate(EntraCertificateCommand),
    /// Make service-account keys for the GCE dialect (IAM's keys.create): the JSON key file
    /// Google's clients read, its token_uri the cloud's token endpoint.
    #[command(subcommand)]
    GceServiceAccountKey(GceServiceAccountKeyCommand),
    /// Print a user's CloudStack API key and secret key (the CloudStack dialect's
    /// getUserKeys): derived from the user's ID and password, so a password change replaces
    /// them.
    CloudstackKeys(CloudStackKeysArgs),
}

/// Flags of `cloudstack-keys`.
#[derive(Debug, Clone, clap::Args)]
pub struct CloudStackKeysArgs {
    /// The user (its Keystone name).
    #[arg(long, default_value = defaults::USER)]
    pub user: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `entra-certificate` commands.
// `<state-dir>` is a placeholder in clap's help, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, clap::Subcommand)]
pub enum EntraCertificateCommand {
    /// Register the certificates of a PEM file for a client; a private key in the file is
    /// not kept. Prints each certificate's thumbprint.
    Add {
        /// The client: an application credential's ID or the user's ID (GUID or 32 hex digits).
        client_id: String,
        /// PEM file holding the certificate (cert.pem, or the cert+key file a client uses).
        file: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Unregister a client's certificate (by thumbprint: hex SHA-1 or x5t), or all of them.
    Remove {
        /// The client (GUID or 32 hex digits).
        client_id: String,
        /// The certificate's thumbprint (default: every certificate of the client).
        thumbprint: Option<String>,
    },
    /// List the registered certificates.
    List(OutputArgs),
}

/// `gce-service-account-key` commands.
#[derive(Debug, clap::Subcommand)]
pub enum GceServiceAccountKeyCommand {
    /// Make a key and write its JSON key file (mode 0600); prints the key's ID.
    Create {
        /// The service account (e.g. ccm@local.iam.gserviceaccount.com).
        #[arg(long)]
        email: String,
        /// The project (its Keystone name).
        #[arg(long, default_value = defaults::PROJECT)]
        project: String,
        /// Where to write the key file.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// The key file's token_uri (default: the running server's token endpoint, or
        /// http://<default listen address>/token when none runs).
        #[arg(long, value_name = "URL")]
        token_uri: Option<String>,
    },
    /// List the keys of a service account (IDs and creation times; no key material).
    List {
        /// The service account.
        #[arg(long)]
        email: String,
        /// The project (its Keystone name).
        #[arg(long, default_value = defaults::PROJECT)]
        project: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// Flags of `serve`.
// These doc comments are clap's `--help` texts, where `<state-dir>` is the usual placeholder
// notation, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// API listen address (all services, DevStack-style path prefixes).
    #[arg(long, default_value = defaults::API_LISTEN, env = "HYPERCLOUD_LOCAL_CLOUD_LISTEN")]
    pub listen: SocketAddr,
    /// Metadata service listen address (the role of 169.254.169.254).
    #[arg(long, default_value = defaults::METADATA_LISTEN)]
    pub metadata_listen: SocketAddr,
    /// Do not run the metadata service.
    #[arg(long)]
    pub no_metadata: bool,
    /// Where config drives are written (default: <state-dir>/config-drive).
    #[arg(long, value_name = "DIR")]
    pub config_drive_dir: Option<PathBuf>,
    /// URL clients use to reach the API, if not http://<listen> (e.g. behind a proxy).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Region name in the service catalog (letters, digits, '-', '_', '.').
    #[arg(long, default_value = defaults::REGION, value_parser = parse_location)]
    pub region: String,
    /// Availability zones, comma-separated (replaces the stored set; kept across restarts);
    /// each as a region name.
    #[arg(long, value_delimiter = ',', value_name = "ZONES", value_parser = parse_location)]
    pub availability_zones: Option<Vec<String>>,
    /// Token lifetime (e.g. 1h is Keystone's default; 90s, 5m), 1s to 8760h.
    #[arg(long, default_value = "3600s", value_parser = parse_ttl)]
    pub token_ttl: Duration,
    /// Added latency, globally and/or per service: `200ms` or `compute=2s,network=50ms`; at
    /// most 10m each.
    #[arg(long, value_name = "[SERVICE=]DURATION,...")]
    pub inject_latency: Option<Latency>,
    /// Share of requests answered 500, globally and/or per service: `0.1` or `volume=0.5`.
    #[arg(long, value_name = "[SERVICE=]RATE,...")]
    pub inject_error_rate: Option<Rate>,
    /// Share of requests answered 429 with Retry-After, globally and/or per service.
    #[arg(long, value_name = "[SERVICE=]RATE,...")]
    pub inject_throttle_rate: Option<Rate>,
    /// Share of long-running operations that fail (the change is not made; polling the
    /// operation reports Failed): `0.2` or `azure=0.2` (only the Azure dialect's).
    #[arg(long, value_name = "[azure=]RATE")]
    pub inject_operation_failure_rate: Option<Rate>,
    /// PEM certificate (chain): serve the API over HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Serve the API over HTTPS with a certificate of the cloud's own CA: the CA is made on
    /// first start and kept in <state-dir>/tls/ca.pem (trust that file, e.g.
    /// REQUESTS_CA_BUNDLE); the serving certificate, for the --listen address, localhost and
    /// the --public-url host, is signed again at every start.
    #[arg(long, conflicts_with = "tls_cert_file")]
    pub tls_self_signed: bool,
    /// Require a TLS client certificate signed by a CA of this PEM bundle on the API (as an
    /// OpenStack whose endpoints verify client certificates: cloud.conf cert-file/key-file,
    /// clouds.yaml cert/key); a connection without one fails its handshake. Needs
    /// --tls-self-signed or --tls-cert-file.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Loopback addresses load balancer VIPs are allocated from (listeners bind there); must
    /// lie inside 127.0.0.0/8, prefix /8 to /30.
    #[arg(long, value_name = "CIDR", default_value = "127.0.100.0/24")]
    pub lb_vip_pool: crate::dataplane::VipPool,
    /// Enforce members' Neutron security groups in the load-balancer data plane, as Neutron
    /// does: a member whose port's groups do not open its port to the load balancer's subnet
    /// gets no traffic (default: groups are bookkeeping, every member is reached).
    #[arg(long)]
    pub enforce_member_security_groups: bool,
    /// Require a token on the GCE dialect's Compute Engine and IAM requests, as Google does:
    /// `Authorization: Bearer` from its token endpoint (POST /token, a service-account key's
    /// signed assertion; keys from `gce-service-account-key create`) or a Keystone token
    /// (default: requests are not authenticated).
    #[arg(long)]
    pub gce_require_tokens: bool,
    /// The Mesos dialect's cluster name, as a Mesos master's --cluster: the `cluster` field of
    /// /state (absent without it; the mesos provider then calls the cluster "mesos").
    #[arg(long, value_name = "NAME", value_parser = parse_mesos_cluster)]
    pub mesos_cluster: Option<String>,
    /// Require a token on the Photon dialect's /v1 requests, as a Photon Controller with
    /// authentication enabled: `Authorization: Bearer` from Lightwave's token endpoint
    /// (POST /openidconnect/token, a local-cloud user's password grant; GET /v1/auth says where)
    /// (default: requests are not authenticated, as the photon provider's `authentication =
    /// false`).
    #[arg(long)]
    pub photon_require_tokens: bool,
    /// What backs volumes: none (records only) or sparse-file (a sparse file per volume in
    /// <state-dir>/volumes, a loop device per attached volume, linked as the instance's
    /// <state-dir>/devices/<server-id>/virtio-<first 20 characters of the volume id>; loop devices need root).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = crate::VolumeBacking::None)]
    pub volume_backing: crate::VolumeBacking,
    /// Follow the classic ELBs and NLBs of this AWS endpoint (moto, e.g. http://127.0.0.1:5000)
    /// and serve their listeners here: each load balancer gets a VIP, its DNS name is mapped in
    /// <state-dir>/aws-elb-hosts, its registered instances are the members, its health check
    /// decides which get traffic.
    #[arg(long, value_name = "URL", help_heading = "AWS load balancer follower")]
    pub follow_aws_elb: Option<String>,
    /// Region the follower's requests are signed for.
    #[arg(long, value_name = "REGION", default_value = "us-east-1", value_parser = parse_location, requires = "follow_aws_elb", help_heading = "AWS load balancer follower")]
    pub follow_aws_region: String,
    /// Where instances' private addresses are reached: FROM_CIDR=TO_CIDR (same prefix length,
    /// TO in 127.0.0.0/8), comma-separated or repeated, first match wins; addresses no map
    /// covers are used as they are.
    #[arg(
        long,
        value_name = "FROM=TO,...",
        value_delimiter = ',',
        requires = "follow_aws_elb",
        help_heading = "AWS load balancer follower"
    )]
    pub follow_aws_address_map: Vec<crate::AddressMap>,
    /// Time between two polls of the endpoint, 100ms to 10m.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_follow_interval, requires = "follow_aws_elb", help_heading = "AWS load balancer follower")]
    pub follow_aws_interval: Duration,
}

pub(super) fn parse_follow_interval(s: &str) -> std::result::Result<Duration, String> {
    faults::parse_duration(s)
        .ok()
        .filter(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_secs(600))
        .ok_or_else(|| format!("{s:?} is not a duration within 100ms..=10m"))
}

/// A region or availability zone name, checked by [`crate::server::check_location`].
pub(super) fn parse_location(s: &str) -> std::result::Result<String, String> {
    crate::server::check_location(s)?;
    Ok(s.to_owned())
}

pub(super) fn parse_mesos_cluster(s: &str) -> std::result::Result<String, String> {
    crate::config::check_cluster_name(s)?;
    Ok(s.to_owned())
}

pub(super) fn parse_ttl(s: &str) -> std::result::Result<Duration, String> {
    let range = || {
        format!(
            "{s:?} is not a duration in the allowed range 1s to {}h",
            MAX_TOKEN_TTL.as_secs() / 3600
        )
    };
    let d = match s.strip_suffix('h') {
        Some(h) => faults::parse_duration(&format!("{h}s"))
            .map_err(|_| range())?
            .checked_mul(3600)
            .ok_or_else(range)?,
        None => faults::parse_duration(s).map_err(|_| range())?,
    };
    if d < Duration::from_secs(1) || d > MAX_TOKEN_TTL {
        return Err(range());
    }
    Ok(d)
}

/// Instance commands.
#[derive(Debug, clap::Subcommand)]
pub enum InstanceCommand {
    /// Create an instance (ACTIVE at once, with a port on the network and a config drive).
    Create {
        /// Instance name.
        name: String,
        /// Availability zone.
        #[arg(long, default_value = defaults::AVAILABILITY_ZONE, value_parser = parse_location)]
        zone: String,
        /// Flavor name or ID.
        #[arg(long, default_value = defaults::FLAVOR)]
        flavor: String,
        /// Fixed IP on the network (default: the next free one).
        #[arg(long)]
        address: Option<String>,
        /// Network name or ID.
        #[arg(long, default_value = defaults::NETWORK)]
        network: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete an instance (its ports go, its volumes are detached).
    Delete {
        /// Instance name or ID.
        name: String,
    },
    /// Stop an instance (status SHUTOFF).
    Stop {
        /// Instance name or ID.
        name: String,
    },
    /// Start a stopped instance (status ACTIVE).
    Start {
        /// Instance name or ID.
        name: String,
    },
    /// List instances.
    List(OutputArgs),
}

/// Volume commands.
#[derive(Debug, clap::Subcommand)]
pub enum VolumeCommand {
    /// Create a volume.
    Create {
        /// Volume name.
        name: String,
        /// Size in GiB.
        #[arg(long, default_value_t = 1)]
        size: u64,
        /// Availability zone.
        #[arg(long, default_value = defaults::AVAILABILITY_ZONE, value_parser = parse_location)]
        zone: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a volume (it must not be attached).
    Delete {
        /// Volume name or ID.
        name: String,
    },
    /// List volumes.
    List(OutputArgs),
}

/// `--output table|json`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Top {
        #[command(flatten)]
        args: LocalCloudArgs,
    }

    #[test]
    fn clap_definition_is_valid() {
        Top::command().debug_assert();
    }

    #[test]
    fn region_and_zone_names_are_checked_at_parse() {
        for ok in ["RegionOne", "nova", "us-central1-a", "zone_b.1"] {
            assert_eq!(parse_location(ok).as_deref(), Ok(ok));
        }
        for bad in ["", "a/b", "..", ".", "a b", "a\nb", "é", &"z".repeat(64)] {
            assert!(parse_location(bad).is_err(), "{bad:?}");
        }
        for args in [
            &["local-cloud", "serve", "--region="][..],
            &["local-cloud", "serve", "--availability-zones=nova,"],
            &["local-cloud", "serve", "--availability-zones=nova,a/b"],
        ] {
            let err = Top::try_parse_from(args).expect_err("refused").to_string();
            assert!(
                err.contains(args[2].split('=').next().unwrap_or("")),
                "{err}"
            );
        }
    }

    #[test]
    fn parses_serve_flags_and_global_state_dir() {
        let top = Top::try_parse_from([
            "local-cloud",
            "serve",
            "--state-dir",
            "/tmp/x",
            "--listen",
            "127.0.0.1:9000",
            "--inject-error-rate",
            "compute=0.5",
            "--availability-zones",
            "nova,az2",
            "--token-ttl",
            "2h",
        ])
        .unwrap();
        assert_eq!(top.args.state_dir, Some(PathBuf::from("/tmp/x")));
        let Command::Serve(serve) = top.args.command else {
            panic!("not serve")
        };
        assert_eq!(serve.listen, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            serve.availability_zones,
            Some(vec!["nova".into(), "az2".into()])
        );
        assert_eq!(serve.token_ttl, Duration::from_secs(7200));
        assert_eq!(
            serve
                .inject_error_rate
                .unwrap()
                .0
                .for_service(crate::Service::Compute),
            Some(0.5)
        );
        assert!(Top::try_parse_from(["local-cloud", "serve", "--inject-error-rate", "2"]).is_err());
        let e = Top::try_parse_from([
            "local-cloud",
            "serve",
            "--tls-self-signed",
            "--tls-cert-file=c.pem",
            "--tls-private-key-file=k.pem",
        ])
        .expect_err("contradictory TLS flags")
        .to_string();
        assert!(
            e.contains("--tls-self-signed") && e.contains("--tls-cert-file"),
            "{e}"
        );
        for (flag, value) in [
            ("--token-ttl", "0s"),
            ("--token-ttl", "1e300h"),
            ("--token-ttl", "1e17h"),
            ("--token-ttl", "9000h"),
            ("--token-ttl", "NaN"),
            ("--inject-latency", "1e300s"),
            ("--inject-latency", "compute=11m"),
            ("--inject-throttle-rate", "NaN"),
            ("--lb-vip-pool", "10.0.0.0/24"),
            ("--lb-vip-pool", "0.0.0.0/8"),
            ("--region", ""),
            ("--region", "Region/One"),
            ("--region", ".."),
            ("--region", "a b"),
            ("--availability-zones", "nova,,az2"),
            ("--availability-zones", "nova,az/2"),
            ("--availability-zones", "az\n2"),
            ("--follow-aws-address-map", "10.0.0.0/16=10.1.0.0/16"),
            ("--follow-aws-interval", "0s"),
            ("--tls-cert-file", "c.pem"),
        ] {
            let e = Top::try_parse_from(["local-cloud", "serve", flag, value])
                .expect_err(value)
                .to_string();
            assert!(e.contains(flag), "{flag} {value}: {e}");
        }
        for command in ["instance", "volume"] {
            for zone in ["", "a/b", "."] {
                let e =
                    Top::try_parse_from(["local-cloud", command, "create", "x", "--zone", zone])
                        .expect_err(zone)
                        .to_string();
                assert!(e.contains("--zone"), "{command} --zone {zone:?}: {e}");
            }
        }
    }
}
