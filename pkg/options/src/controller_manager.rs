//! Flag groups of the controller managers (upstream `k8s.io/cloud-provider/options` and
//! kube-controller-manager): which controllers run, leader election and migration, the
//! shared cloud settings, per-controller tuning, secure serving and delegated auth.
//!
//! Defaults are the cloud-controller-manager's; the controller-manager personality changes
//! the few that differ (`--secure-port` 10257, lease name `kube-controller-manager`) on its
//! command, so the flags are declared once.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::Args;

use crate::GoDuration;

/// `--controllers`, resync, and leader migration (upstream
/// `GenericControllerManagerConfigurationOptions`, which holds the leader migration options
/// too; their flags print under a heading of their own, as upstream's).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericControllerManagerOptions {
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo'
    /// enables the controller named 'foo', '-foo' disables the controller named 'foo'.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// The resync period in reflectors will be random between MinResyncPeriod and
    /// 2*MinResyncPeriod.
    #[arg(
        long = "min-resync-period",
        value_name = "DURATION",
        default_value = "12h0m0s"
    )]
    pub min_resync_period: GoDuration,

    #[command(flatten)]
    #[allow(missing_docs)]
    pub leader_migration: LeaderMigrationOptions,
}

/// Leader election on a coordination.k8s.io Lease.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Leader election flags")]
pub struct LeaderElectionOptions {
    /// Start a leader election client and gain leadership before executing the main loop.
    /// Enable this when running replicated components for high availability.
    #[arg(long = "leader-elect", value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// The duration that non-leader candidates will wait after observing a leadership renewal
    /// until attempting to acquire leadership of a led but unrenewed leader slot.
    #[arg(
        long = "leader-elect-lease-duration",
        value_name = "DURATION",
        default_value = "15s"
    )]
    pub lease_duration: GoDuration,

    /// The interval between attempts by the acting master to renew a leadership slot before
    /// it stops leading. This must be less than the lease duration.
    #[arg(
        long = "leader-elect-renew-deadline",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub renew_deadline: GoDuration,

    /// The duration the clients should wait between attempting acquisition and renewal of a
    /// leadership.
    #[arg(
        long = "leader-elect-retry-period",
        value_name = "DURATION",
        default_value = "2s"
    )]
    pub retry_period: GoDuration,

    /// The type of resource object that is used for locking during leader election.
    /// Supported options are 'leases'.
    #[arg(long = "leader-elect-resource-lock", value_name = "KIND", default_value = "leases", value_parser = ["leases"])]
    pub resource_lock: String,

    /// The name of resource object that is used for locking during leader election.
    #[arg(
        long = "leader-elect-resource-name",
        value_name = "NAME",
        default_value = "cloud-controller-manager"
    )]
    pub resource_name: String,

    /// The namespace of resource object that is used for locking during leader election.
    #[arg(
        long = "leader-elect-resource-namespace",
        value_name = "NAMESPACE",
        default_value = "kube-system"
    )]
    pub resource_namespace: String,
}

impl LeaderElectionOptions {
    /// Upstream's checks: renew deadline < lease duration, retry period > 0, renew deadline >
    /// 1.2 x retry period (client-go's `NewLeaderElector`), so the flag is named at start.
    pub fn validate(&self) -> crate::Result<()> {
        // The Lease's name and namespace as the API server validates them, so a name it
        // would refuse (empty, `../x`, upper case) is refused at start, not at the first
        // election.
        hypercloud_cloudprovider::names::dns1123_subdomain(&self.resource_name).map_err(|why| {
            crate::Error::InvalidFlag {
                flag: "--leader-elect-resource-name",
                message: format!("{:?} is not a valid Lease name: {why}", self.resource_name),
            }
        })?;
        hypercloud_cloudprovider::names::dns1123_label(&self.resource_namespace).map_err(
            |why| crate::Error::InvalidFlag {
                flag: "--leader-elect-resource-namespace",
                message: format!(
                    "{:?} is not a valid namespace name: {why}",
                    self.resource_namespace
                ),
            },
        )?;
        if self.renew_deadline >= self.lease_duration {
            return Err(crate::Error::InvalidFlag {
                flag: "--leader-elect-renew-deadline",
                message: format!(
                    "must be less than --leader-elect-lease-duration ({} >= {})",
                    self.renew_deadline, self.lease_duration
                ),
            });
        }
        if self.retry_period.get().is_zero() {
            return Err(crate::Error::InvalidFlag {
                flag: "--leader-elect-retry-period",
                message: "must be greater than zero".into(),
            });
        }
        // client-go's JitterFactor (1.2): renewals must fit in the deadline.
        if self.renew_deadline.get().as_secs_f64() <= 1.2 * self.retry_period.get().as_secs_f64() {
            return Err(crate::Error::InvalidFlag {
                flag: "--leader-elect-renew-deadline",
                message: format!(
                    "must be greater than 1.2 x --leader-elect-retry-period ({} <= 1.2 x {})",
                    self.renew_deadline, self.retry_period
                ),
            });
        }
        Ok(())
    }
}

/// Leader migration (KEP-2436; upstream `k8s.io/controller-manager/pkg/leadermigration/options`).
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Leader migration flags")]
pub struct LeaderMigrationOptions {
    /// Whether to enable controller leader migration.
    #[arg(long = "enable-leader-migration", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_leader_migration: bool,

    /// Path to the config file for controller leader migration, or empty to use the value
    /// that reflects default configuration of the controller manager. The config file should
    /// be of type LeaderMigrationConfiguration, group controllermanager.config.k8s.io, version
    /// v1 (v1beta1 and v1alpha1 are still read).
    // An empty value is accepted (it means the default configuration), hence not clap's
    // PathBuf parser, which refuses it.
    #[arg(long = "leader-migration-config", value_name = "FILE", value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from))]
    pub leader_migration_config: Option<PathBuf>,
}

impl LeaderMigrationOptions {
    /// The configuration file, if one is named (an empty value means the default
    /// configuration, as upstream).
    pub fn config_path(&self) -> Option<&std::path::Path> {
        self.leader_migration_config
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty())
    }
}

/// Settings shared by the cloud controllers.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Cloud controller flags")]
pub struct KubeCloudSharedOptions {
    /// The instance prefix for the cluster; load balancer and route names derive from it.
    #[arg(
        long = "cluster-name",
        value_name = "NAME",
        default_value = "kubernetes"
    )]
    pub cluster_name: String,

    /// CIDR Range for Pods in cluster. Requires --allocate-node-cidrs to be true.
    #[arg(long = "cluster-cidr", value_name = "CIDR")]
    pub cluster_cidr: Option<String>,

    /// Should CIDRs for Pods be allocated and set on the cloud provider.
    #[arg(long = "allocate-node-cidrs", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub allocate_node_cidrs: bool,

    /// Type of CIDR allocator to use. Only RangeAllocator is implemented.
    #[arg(
        long = "cidr-allocator-type",
        value_name = "TYPE",
        default_value = RANGE_ALLOCATOR
    )]
    pub cidr_allocator_type: String,

    /// Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.
    #[arg(long = "configure-cloud-routes", value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub configure_cloud_routes: bool,

    /// The period for syncing NodeStatus in cloud-node-lifecycle-controller.
    #[arg(
        long = "node-monitor-period",
        value_name = "DURATION",
        default_value = "5s"
    )]
    pub node_monitor_period: GoDuration,

    /// The period for reconciling routes created for Nodes by cloud provider.
    #[arg(
        long = "route-reconciliation-period",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub route_reconciliation_period: GoDuration,

    /// If true, use individual service account credentials for each controller.
    #[arg(long = "use-service-account-credentials", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub use_service_account_credentials: bool,
}

/// The only `--cidr-allocator-type` implemented: upstream's range allocator, which cuts
/// `--cluster-cidr` into node CIDRs itself.
pub const RANGE_ALLOCATOR: &str = "RangeAllocator";

/// Node IPAM (upstream kube-controller-manager's `NodeIPAMControllerOptions`, which the
/// upstream cloud-controller-manager example registers with its node-ipam-controller). A mask
/// size of 0 means unset: the effective size then depends on the cluster CIDRs' families
/// (24 for IPv4, 64 for IPv6), as upstream.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Node IPAM controller flags")]
pub struct NodeIpamOptions {
    /// CIDR Range for Services in cluster. Only used when --allocate-node-cidrs=true; if false,
    /// this option will be ignored.
    #[arg(long = "service-cluster-ip-range", value_name = "CIDRS")]
    pub service_cluster_ip_range: Option<String>,

    /// Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.
    #[arg(long = "node-cidr-mask-size", value_name = "BITS", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=128))]
    pub node_cidr_mask_size: u8,

    /// Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.
    #[arg(long = "node-cidr-mask-size-ipv4", value_name = "BITS", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=32))]
    pub node_cidr_mask_size_ipv4: u8,

    /// Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.
    #[arg(long = "node-cidr-mask-size-ipv6", value_name = "BITS", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=128))]
    pub node_cidr_mask_size_ipv6: u8,
}

impl NodeIpamOptions {
    /// `--service-cluster-ip-range` split: at most two entries (upstream `Validate`), empty
    /// ones dropped.
    pub fn service_cidrs(&self) -> crate::Result<Vec<&str>> {
        let Some(list) = self.service_cluster_ip_range.as_deref() else {
            return Ok(Vec::new());
        };
        let entries: Vec<&str> = list.split(',').map(str::trim).collect();
        if entries.len() > 2 {
            return Err(crate::Error::InvalidFlag {
                flag: "--service-cluster-ip-range",
                message: "can not contain more than two entries".into(),
            });
        }
        Ok(entries.into_iter().filter(|e| !e.is_empty()).collect())
    }
}

/// The most workers a `--concurrent-*-syncs` flag starts: far more than any cluster needs
/// (upstream's defaults are 1 to 5), far fewer than would exhaust memory or the API server.
pub const MAX_CONCURRENT_SYNCS: u32 = 1000;

/// The cloud-node controller's tuning.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Node controller flags")]
pub struct NodeControllerOptions {
    /// Specifies how often the controller updates nodes' status.
    #[arg(
        long = "node-status-update-frequency",
        value_name = "DURATION",
        default_value = "5m0s"
    )]
    pub node_status_update_frequency: GoDuration,

    /// The number of workers concurrently synchronizing nodes (1 to 1000).
    #[arg(long = "concurrent-node-syncs", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_CONCURRENT_SYNCS as i64))]
    pub concurrent_node_syncs: u32,
}

/// The service controller's tuning.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Service controller flags")]
pub struct ServiceControllerOptions {
    /// The number of services that are allowed to sync concurrently. Larger number = more
    /// responsive service management, but more CPU (and network) load (1 to 1000).
    #[arg(long = "concurrent-service-syncs", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_CONCURRENT_SYNCS as i64))]
    pub concurrent_service_syncs: u32,
}

/// Where `/healthz`, `/readyz`, `/livez` and `/metrics` are served.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Secure serving flags")]
pub struct SecureServingOptions {
    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't
    /// serve HTTPS at all.
    #[arg(long = "secure-port", value_name = "PORT", default_value_t = 10258)]
    pub secure_port: u16,

    /// The IP address on which to listen for the --secure-port port.
    #[arg(long = "bind-address", value_name = "IP", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    /// The directory where the TLS certs are located. If --tls-cert-file and
    /// --tls-private-key-file are provided, this flag will be ignored.
    #[arg(long = "cert-dir", value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS. If not provided, a self-signed
    /// certificate is generated.
    #[arg(
        long = "tls-cert-file",
        value_name = "FILE",
        requires = "tls_private_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(
        long = "tls-private-key-file",
        value_name = "FILE",
        requires = "tls_cert_file"
    )]
    pub tls_private_key_file: Option<PathBuf>,

    /// Comma-separated list of cipher suites for the server. If omitted, the default rustls
    /// cipher suites will be used. Values: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
    /// TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    /// TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305(_SHA256),
    /// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    /// TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305(_SHA256). Upstream's CBC, RC4, 3DES and RSA
    /// key-exchange suites are refused: rustls does not implement them. TLS 1.3 suites stay
    /// enabled unless some are named.
    #[arg(
        long = "tls-cipher-suites",
        value_name = "SUITES",
        value_delimiter = ','
    )]
    pub tls_cipher_suites: Vec<String>,

    /// Minimum TLS version supported. Possible values: VersionTLS12, VersionTLS13
    /// (VersionTLS10 and VersionTLS11 are refused: rustls implements neither).
    #[arg(long = "tls-min-version", value_name = "VERSION")]
    pub tls_min_version: Option<String>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed with a
    /// list of domain patterns which are fully qualified domain names, possibly with prefixed
    /// wildcard segments. If no domain patterns are provided, the names of the certificate
    /// are extracted. Non-wildcard matches trump over wildcard matches, explicit domain
    /// patterns trump over extracted names. For multiple key/certificate pairs, use the
    /// --tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or
    /// "foo.crt,foo.key:*.foo.com,foo.com".
    #[arg(long = "tls-sni-cert-key", value_name = "CERT,KEY[:NAMES]")]
    pub tls_sni_cert_key: Vec<String>,

    /// If true, SO_REUSEPORT will be used when binding the port, which allows more than one
    /// instance to bind on the same address and port.
    #[arg(long = "permit-port-sharing", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub permit_port_sharing: bool,

    /// If true, SO_REUSEADDR will be used when binding the port. Here it always is, as Go's
    /// listeners (and so upstream's with either value) set it on Linux: binding does not wait
    /// for sockets in TIME_WAIT.
    #[arg(long = "permit-address-sharing", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub permit_address_sharing: bool,
}

/// Delegated authentication and authorization (TokenReview / SubjectAccessReview).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Authentication and authorization flags")]
pub struct AuthOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// tokenreviews.authentication.k8s.io. Empty: the main client's.
    #[arg(long = "authentication-kubeconfig", value_name = "FILE")]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// subjectaccessreviews.authorization.k8s.io. Empty: the main client's.
    #[arg(long = "authorization-kubeconfig", value_name = "FILE")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without
    /// contacting the 'core' kubernetes server.
    #[arg(
        long = "authorization-always-allow-paths",
        value_name = "PATHS",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(
        long = "authorization-webhook-cache-authorized-ttl",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,

    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(
        long = "authorization-webhook-cache-unauthorized-ttl",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,

    /// The duration to cache responses from the webhook token authenticator.
    #[arg(
        long = "authentication-token-webhook-cache-ttl",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub authentication_token_webhook_cache_ttl: GoDuration,

    /// If false, the authentication-kubeconfig will be used to lookup missing authentication
    /// configuration from the cluster (ConfigMap kube-system/extension-apiserver-authentication).
    #[arg(long = "authentication-skip-lookup", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub authentication_skip_lookup: bool,

    /// If true, failures to look up missing authentication configuration from the cluster are
    /// not considered fatal. Note that this can result in authentication that treats all
    /// requests as anonymous.
    #[arg(long = "authentication-tolerate-lookup-failure", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub authentication_tolerate_lookup_failure: bool,

    /// If set, any request presenting a client certificate signed by one of the authorities
    /// in the client-ca-file is authenticated with an identity corresponding to the
    /// CommonName of the client certificate (groups: its Organizations).
    #[arg(long = "client-ca-file", value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,

    /// Root certificate bundle to use to verify client certificates on incoming requests
    /// before trusting usernames in headers specified by --requestheader-username-headers.
    /// WARNING: generally do not depend on authorization being already done for incoming
    /// requests.
    #[arg(long = "requestheader-client-ca-file", value_name = "FILE")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// List of client certificate common names to allow to provide usernames in headers
    /// specified by --requestheader-username-headers. If empty, any client certificate
    /// validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(
        long = "requestheader-allowed-names",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub requestheader_allowed_names: Vec<String>,

    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(
        long = "requestheader-username-headers",
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-user"
    )]
    pub requestheader_username_headers: Vec<String>,

    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(
        long = "requestheader-uid-headers",
        value_name = "HEADERS",
        value_delimiter = ','
    )]
    pub requestheader_uid_headers: Vec<String>,

    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(
        long = "requestheader-group-headers",
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-group"
    )]
    pub requestheader_group_headers: Vec<String>,

    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(
        long = "requestheader-extra-headers-prefix",
        value_name = "PREFIXES",
        value_delimiter = ',',
        default_value = "x-remote-extra-"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,
}

impl AuthOptions {
    /// `--client-ca-file`, unless empty.
    pub fn client_ca_file(&self) -> Option<&std::path::Path> {
        non_empty(self.client_ca_file.as_deref())
    }

    /// `--requestheader-client-ca-file`, unless empty.
    pub fn requestheader_client_ca_file(&self) -> Option<&std::path::Path> {
        non_empty(self.requestheader_client_ca_file.as_deref())
    }
}

fn non_empty(p: Option<&std::path::Path>) -> Option<&std::path::Path> {
    p.filter(|p| !p.as_os_str().is_empty())
}

/// A list flag without its empty entries (`--requestheader-uid-headers=` means none).
pub fn non_empty_entries(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every controller-manager group, for personalities that flatten them all.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct ControllerOptions {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub generic: GenericControllerManagerOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub leader_election: LeaderElectionOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub kube_cloud_shared: KubeCloudSharedOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub node_controller: NodeControllerOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub service_controller: ServiceControllerOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub node_ipam: NodeIpamOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub secure_serving: SecureServingOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub auth: AuthOptions,
}

impl ControllerOptions {
    /// Cross-flag checks (upstream `Validate`).
    pub fn validate(&self) -> crate::Result<()> {
        self.leader_election.validate()?;
        let shared = &self.kube_cloud_shared;
        if shared.allocate_node_cidrs && shared.cluster_cidr.as_deref().unwrap_or("").is_empty() {
            return Err(crate::Error::InvalidFlag {
                flag: "--cluster-cidr",
                message: "must be set when --allocate-node-cidrs=true".into(),
            });
        }
        // Upstream fails on the other types only when it starts node IPAM, and runs
        // CloudAllocator there; here no other type exists, so any is refused at once rather
        // than accepted and ignored.
        if shared.cidr_allocator_type != RANGE_ALLOCATOR {
            return Err(crate::Error::InvalidFlag {
                flag: "--cidr-allocator-type",
                message: format!(
                    "{:?} is not supported: only {RANGE_ALLOCATOR} is implemented (CloudAllocator, IPAMFromCluster and IPAMFromCloud would take node CIDRs from the cloud, which no hypercloud provider offers)",
                    shared.cidr_allocator_type
                ),
            });
        }
        self.node_ipam.service_cidrs()?;
        let migration = &self.generic.leader_migration;
        if migration.enable_leader_migration && !self.leader_election.leader_elect {
            return Err(crate::Error::InvalidFlag {
                flag: "--enable-leader-migration",
                message: "requires --leader-elect=true".into(),
            });
        }
        // KEP-2436: a configuration without migration enabled is a fatal error, not ignored.
        if !migration.enable_leader_migration && migration.config_path().is_some() {
            return Err(crate::Error::InvalidFlag {
                flag: "--leader-migration-config",
                message: "requires --enable-leader-migration=true".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use std::time::Duration;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        c: ControllerOptions,
    }

    #[test]
    fn clap_definition_is_consistent() {
        T::command().debug_assert();
    }

    #[test]
    fn defaults_are_upstream() {
        let t = T::try_parse_from(["t"]).expect("parse");
        let c = t.c;
        assert_eq!(c.generic.controllers, vec!["*"]);
        assert!(!c.generic.leader_migration.enable_leader_migration);
        assert_eq!(c.generic.leader_migration.config_path(), None);
        assert!(c.leader_election.leader_elect);
        assert_eq!(
            c.leader_election.lease_duration.get(),
            Duration::from_secs(15)
        );
        assert_eq!(
            c.leader_election.renew_deadline.get(),
            Duration::from_secs(10)
        );
        assert_eq!(c.leader_election.retry_period.get(), Duration::from_secs(2));
        assert_eq!(c.leader_election.resource_name, "cloud-controller-manager");
        assert_eq!(c.leader_election.resource_namespace, "kube-system");
        assert_eq!(c.kube_cloud_shared.cluster_name, "kubernetes");
        assert!(c.kube_cloud_shared.configure_cloud_routes);
        assert!(!c.kube_cloud_shared.allocate_node_cidrs);
        assert_eq!(c.kube_cloud_shared.cidr_allocator_type, "RangeAllocator");
        assert_eq!(c.node_ipam.service_cluster_ip_range, None);
        assert_eq!(
            (
                c.node_ipam.node_cidr_mask_size,
                c.node_ipam.node_cidr_mask_size_ipv4,
                c.node_ipam.node_cidr_mask_size_ipv6
            ),
            (0, 0, 0),
            "unset: the family decides (24 or 64)"
        );
        assert_eq!(
            c.kube_cloud_shared.node_monitor_period.get(),
            Duration::from_secs(5)
        );
        assert_eq!(
            c.kube_cloud_shared.route_reconciliation_period.get(),
            Duration::from_secs(10)
        );
        assert_eq!(
            c.node_controller.node_status_update_frequency.get(),
            Duration::from_secs(300)
        );
        assert_eq!(c.service_controller.concurrent_service_syncs, 1);
        assert_eq!(c.secure_serving.secure_port, 10258);
        assert_eq!(c.secure_serving.tls_min_version, None);
        assert!(c.secure_serving.tls_cipher_suites.is_empty());
        assert!(c.secure_serving.tls_sni_cert_key.is_empty());
        assert!(!c.secure_serving.permit_port_sharing);
        assert!(!c.secure_serving.permit_address_sharing);
        assert_eq!(
            c.auth.authorization_always_allow_paths,
            vec!["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(
            (
                c.auth.authentication_token_webhook_cache_ttl.get(),
                c.auth.authorization_webhook_cache_authorized_ttl.get(),
                c.auth.authorization_webhook_cache_unauthorized_ttl.get()
            ),
            (
                Duration::from_secs(10),
                Duration::from_secs(10),
                Duration::from_secs(10)
            )
        );
        assert!(!c.auth.authentication_skip_lookup);
        assert!(!c.auth.authentication_tolerate_lookup_failure);
        assert_eq!(c.auth.client_ca_file(), None);
        assert_eq!(c.auth.requestheader_username_headers, ["x-remote-user"]);
        assert_eq!(c.auth.requestheader_group_headers, ["x-remote-group"]);
        assert_eq!(
            c.auth.requestheader_extra_headers_prefix,
            ["x-remote-extra-"]
        );
        assert!(non_empty_entries(&c.auth.requestheader_uid_headers).is_empty());
        assert!(c.auth.requestheader_allowed_names.is_empty());
        c.validate().expect("defaults are valid");
    }

    #[test]
    fn go_style_booleans_and_lists() {
        let t = T::try_parse_from([
            "t",
            "--leader-elect=false",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16",
            "--controllers=*,-route",
        ])
        .expect("parse");
        assert!(!t.c.leader_election.leader_elect);
        assert!(t.c.kube_cloud_shared.allocate_node_cidrs);
        assert_eq!(t.c.generic.controllers, vec!["*", "-route"]);
        t.c.validate().expect("valid");
        let t = T::try_parse_from([
            "t",
            "--enable-leader-migration",
            "--leader-migration-config=",
        ])
        .expect("parse");
        let m = &t.c.generic.leader_migration;
        assert!(m.enable_leader_migration);
        assert_eq!(
            m.config_path(),
            None,
            "empty means the default configuration"
        );
        t.c.validate().expect("valid");
        let t = T::try_parse_from([
            "t",
            "--enable-leader-migration=true",
            "--leader-migration-config=/etc/lm.yaml",
        ])
        .expect("parse");
        assert_eq!(
            t.c.generic.leader_migration.config_path(),
            Some(std::path::Path::new("/etc/lm.yaml"))
        );
        t.c.validate().expect("valid");
    }

    #[test]
    fn inconsistent_flags_are_named() {
        let t = T::try_parse_from(["t", "--allocate-node-cidrs=true"]).expect("parse");
        assert!(t
            .c
            .validate()
            .expect_err("no cidr")
            .to_string()
            .starts_with("--cluster-cidr"));
        let t = T::try_parse_from(["t", "--leader-elect-renew-deadline=20s"]).expect("parse");
        assert!(t
            .c
            .validate()
            .expect_err("deadline")
            .to_string()
            .starts_with("--leader-elect-renew-deadline"));
        let t = T::try_parse_from(["t", "--leader-elect=false", "--enable-leader-migration"])
            .expect("parse");
        assert!(t
            .c
            .validate()
            .expect_err("migration")
            .to_string()
            .starts_with("--enable-leader-migration"));
        let t = T::try_parse_from(["t", "--leader-migration-config=/etc/lm.yaml"]).expect("parse");
        assert_eq!(
            t.c.validate()
                .expect_err("config without enable")
                .to_string(),
            "--leader-migration-config: requires --enable-leader-migration=true"
        );
        let t = T::try_parse_from(["t", "--cidr-allocator-type=CloudAllocator"]).expect("parse");
        let err = t.c.validate().expect_err("cloud allocator").to_string();
        assert!(
            err.starts_with("--cidr-allocator-type: \"CloudAllocator\" is not supported"),
            "{err}"
        );
        let t = T::try_parse_from([
            "t",
            "--service-cluster-ip-range=10.96.0.0/12,fd00::/108,10.0.0.0/24",
        ])
        .expect("parse");
        assert_eq!(
            t.c.validate().expect_err("three").to_string(),
            "--service-cluster-ip-range: can not contain more than two entries"
        );
        let t = T::try_parse_from(["t", "--service-cluster-ip-range=10.96.0.0/12,fd00::/108"])
            .expect("parse");
        assert_eq!(
            t.c.node_ipam.service_cidrs().expect("two"),
            ["10.96.0.0/12", "fd00::/108"]
        );
        assert!(T::try_parse_from(["t", "--node-cidr-mask-size-ipv4=33"]).is_err());
        assert!(T::try_parse_from(["t", "--node-cidr-mask-size-ipv6=129"]).is_err());
        assert!(T::try_parse_from(["t", "--node-cidr-mask-size=-1"]).is_err());
        assert!(T::try_parse_from(["t", "--concurrent-service-syncs=0"]).is_err());
        for flag in ["--concurrent-service-syncs", "--concurrent-node-syncs"] {
            let err = T::try_parse_from(["t", &format!("{flag}=1000000")])
                .expect_err("above the maximum")
                .to_string();
            assert!(err.contains(flag) && err.contains("1000"), "{err}");
            T::try_parse_from(["t", &format!("{flag}={MAX_CONCURRENT_SYNCS}")]).expect("maximum");
        }
        for (flag, value) in [
            ("--leader-elect-resource-name", ""),
            ("--leader-elect-resource-name", "../../etc/x"),
            ("--leader-elect-resource-name", "Upper"),
            ("--leader-elect-resource-namespace", ""),
            ("--leader-elect-resource-namespace", "a/b"),
            ("--leader-elect-resource-namespace", "kube.system"),
        ] {
            let t = T::try_parse_from(["t", &format!("{flag}={value}")]).expect("parse");
            let err = t.c.validate().expect_err(value).to_string();
            assert!(err.starts_with(&format!("{flag}: ")), "{err}");
        }
        assert!(T::try_parse_from(["t", "--leader-elect-resource-lock=endpoints"]).is_err());
        assert!(T::try_parse_from(["t", "--node-monitor-period=5"]).is_err());
        assert!(T::try_parse_from(["t", "--tls-cert-file=/x"]).is_err());
        let t = T::try_parse_from([
            "t",
            "--tls-sni-cert-key=a.crt,a.key",
            "--tls-sni-cert-key=b.crt,b.key:*.b.com,b.com",
            "--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384",
        ])
        .expect("repeatable and lists");
        assert_eq!(t.c.secure_serving.tls_sni_cert_key.len(), 2);
        assert_eq!(t.c.secure_serving.tls_cipher_suites.len(), 2);
    }
}
