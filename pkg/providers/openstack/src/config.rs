//! `cloud.conf`, the INI file of the upstream OpenStack provider (`[Global]`, `[LoadBalancer]`,
//! `[BlockStorage]`, `[Route]`, `[Metadata]`), with `[Global] use-clouds` pointing at a
//! `clouds.yaml`, plus hypercloud's own tuning keys in `[Hypercloud]`.
//!
//! The file is read by [`hypercloud_cloudprovider::gcfg`], as upstream reads it with gcfg:
//! section and key names are case-insensitive, `;` and `#` start comments outside double
//! quotes, a key without `=` is a boolean `true`, a section may carry a quoted subsection
//! (`[LoadBalancerClass "name"]`). Unknown sections and keys are warnings, as a typo should not stop a cluster,
//! but malformed lines and bad values are errors naming the line. Every key upstream documents
//! (OCCM v1.34 and the legacy in-tree provider) is either implemented, or a warning naming it
//! and saying why it has no effect here, or (where ignoring it would change security or
//! identity) an error: none is accepted and silently ignored ([`DOCUMENTED_KEYS`] lists them
//! with their treatment; a test checks each). Upstream equivalent:
//! `pkg/openstack/openstack.go` `ReadConfig` and the legacy in-tree `openstack.go` `Config`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use hypercloud_cloudprovider::credential_secret::SecretRef;
use hypercloud_cloudprovider::gcfg::parse_bool;
use serde::Deserialize;

use crate::error::{Error, Result};

/// A secret value: its `Debug` and `Display` never show it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `[Global]`: where Keystone is and who we are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Global {
    pub auth_url: Option<String>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub user_domain_id: Option<String>,
    pub user_domain_name: Option<String>,
    /// `tenant-id` is the older spelling.
    pub project_id: Option<String>,
    /// `tenant-name` is the older spelling.
    pub project_name: Option<String>,
    pub project_domain_id: Option<String>,
    pub project_domain_name: Option<String>,
    /// Legacy `domain-id`/`domain-name`: the default for both user and project domains.
    pub domain_id: Option<String>,
    pub domain_name: Option<String>,
    pub region: Option<String>,
    pub application_credential_id: Option<String>,
    pub application_credential_name: Option<String>,
    pub application_credential_secret: Option<Secret>,
    /// `trust-id`: authenticate as the trustee of this Keystone trust, getting a
    /// trust-scoped token (the trust's project and roles), as OCCM does.
    pub trust_id: Option<String>,
    /// `trustee-id`: the trustee's user ID (default: `user-id`, or `username` with its domain).
    pub trustee_id: Option<String>,
    /// `trustee-password`: the trustee's password (default: `password`).
    pub trustee_password: Option<Secret>,
    pub ca_file: Option<PathBuf>,
    /// `cert-file`/`key-file`: a TLS client certificate (PEM) and its key, presented to
    /// Keystone and the services (OCCM; clouds.yaml `cert`/`key`).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub tls_insecure: bool,
    /// Catalog interface (`os-endpoint-type`/`interface`): `public` (default), `internal`, `admin`.
    pub interface: Option<String>,
    pub use_clouds: bool,
    pub clouds_file: Option<PathBuf>,
    pub cloud: Option<String>,
    /// The legacy provider's `secret-name`: a Secret whose `clouds.conf` (or OCCM's
    /// `cloud.conf`) key holds `[Global]` credentials over the file's, followed while running
    /// (see [`Config::with_credentials_from`]).
    pub secret_name: Option<String>,
    /// Its namespace (`secret-namespace`, required with `secret-name`).
    pub secret_namespace: Option<String>,
    /// `kubeconfig-path`: the kubeconfig the Secret is read with by a component that has no
    /// Kubernetes client of its own (the kubelet-helper, the apiserver-plugin); unset, such a
    /// component uses the in-cluster configuration, as upstream.
    pub kubeconfig_path: Option<PathBuf>,
    /// Rackspace's API key (`[Global] api-key` of the `rackspace` provider): signs in to
    /// Keystone v2.0 with `RAX-KSKEY:apiKeyCredentials` instead of the password.
    pub api_key: Option<Secret>,
}

impl Global {
    /// Whether `auth-url` is a Keystone v2.0 (Rackspace's identity): `.../v2.0`.
    pub fn identity_v2(&self) -> bool {
        self.auth_url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
            .ends_with("/v2.0")
    }

    /// The Keystone base URL: `.../v2.0` as given (Rackspace's), else v3 (`.../v3`) from
    /// `auth-url` with or without the version.
    pub fn keystone_url(&self) -> String {
        let url = self.auth_url.as_deref().unwrap_or_default();
        let url = url.trim_end_matches('/');
        if url.ends_with("/v3") || url.ends_with("/v2.0") {
            url.to_owned()
        } else {
            format!("{url}/v3")
        }
    }
}

/// `[LoadBalancer]`: the Octavia load balancers of Services (see `loadbalancer.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadBalancerConfig {
    pub floating_network_id: Option<String>,
    pub floating_subnet_id: Option<String>,
    pub subnet_id: Option<String>,
    pub network_id: Option<String>,
    pub lb_method: Option<String>,
    pub lb_provider: Option<String>,
    pub create_monitor: bool,
    pub monitor_delay: Option<Duration>,
    pub monitor_timeout: Option<Duration>,
    pub monitor_max_retries: Option<u32>,
    pub monitor_max_retries_down: Option<u32>,
    pub internal_lb: bool,
    /// A security group per load balancer opening the node ports to it (OCCM).
    pub manage_security_groups: bool,
    /// `false`: no LoadBalancer capability, even when the catalog has Octavia.
    pub enabled: Option<bool>,
    /// The members' subnet when a Service's `member-subnet-id` annotation does not say.
    pub member_subnet_id: Option<String>,
    /// The members' node selector when a Service's `node-selector` annotation does not say.
    pub node_selector: Option<String>,
    /// The Octavia flavor of new load balancers when a Service's `flavor-id` does not say.
    pub flavor_id: Option<String>,
    /// The Octavia availability zone of new load balancers, likewise.
    pub availability_zone: Option<String>,
    /// How many Services may share one load balancer (OCCM's default 2): see
    /// [`LoadBalancerConfig::max_shared_lb`].
    pub max_shared_lb: Option<u32>,
    /// `provider-requires-serial-api-calls` (OCCM): create the load balancer, then each
    /// listener, pool, member list and monitor in its own call, for an Octavia provider
    /// that refuses the single-call create of the whole tree.
    pub provider_requires_serial_api_calls: bool,
}

impl LoadBalancerConfig {
    /// `max-shared-lb`, OCCM's default 2 when unset.
    pub fn max_shared_lb(&self) -> u32 {
        self.max_shared_lb.unwrap_or(2)
    }
}

/// `[BlockStorage]`: of the Cinder volumes the controllers create, extend, attach, detach and
/// label (`volumes.rs`), only `ignore-volume-az` changes anything (no zone labels); the other
/// keys tune node-side or scheduler work of the in-tree plugin and are warnings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockStorageConfig {
    pub bs_version: Option<String>,
    pub trust_device_path: bool,
    pub ignore_volume_az: bool,
    pub node_volume_attach_limit: Option<u32>,
    pub rescan_on_resize: bool,
}

/// `[Networking]`: which networks' addresses are internal or external.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetworkingConfig {
    /// Fixed addresses on these networks are ExternalIP.
    pub public_network_name: Vec<String>,
    /// When set, only fixed addresses on these networks are InternalIP.
    pub internal_network_name: Vec<String>,
    pub ipv6_support_disabled: bool,
}

/// `[Route]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteConfig {
    /// The Neutron router whose extra routes carry pod CIDRs; without it, no Routes.
    pub router_id: Option<String>,
}

/// Where instance metadata comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataSource {
    /// A config drive (`config-2` block device; here a directory).
    ConfigDrive,
    /// The metadata service (`http://169.254.169.254`).
    MetadataService,
}

impl MetadataSource {
    /// As spelled in `search-order`.
    pub fn name(self) -> &'static str {
        match self {
            MetadataSource::ConfigDrive => "configDrive",
            MetadataSource::MetadataService => "metadataService",
        }
    }
}

/// The metadata service address on a real cloud.
pub const DEFAULT_METADATA_URL: &str = "http://169.254.169.254";

/// `[Metadata]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataConfig {
    /// Default `configDrive,metadataService`.
    pub search_order: Vec<MetadataSource>,
    pub request_timeout: Duration,
    /// hypercloud: a directory holding the mounted config drive (`openstack/latest/...`) or
    /// one config drive per instance (`<instance>/openstack/latest/...`), instead of mounting
    /// a `config-2` block device.
    pub config_drive_dir: Option<PathBuf>,
    /// hypercloud: the metadata service base URL (default `http://169.254.169.254`).
    pub metadata_url: String,
    /// hypercloud: names the instance to the metadata service (`X-Instance-ID`) and picks its
    /// config drive, for hosts that are not really that instance (the local cloud's demo).
    pub instance_id: Option<String>,
}

impl Default for MetadataConfig {
    fn default() -> Self {
        MetadataConfig {
            search_order: vec![MetadataSource::ConfigDrive, MetadataSource::MetadataService],
            request_timeout: Duration::from_secs(5),
            config_drive_dir: None,
            metadata_url: DEFAULT_METADATA_URL.into(),
            instance_id: None,
        }
    }
}

/// `[Hypercloud]`: tuning that upstream does not have.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// How long one `GET /servers/detail` answers look-ups for every node (default 5s).
    pub server_cache_ttl: Duration,
    /// Attempts per request on 5xx/429/connection errors (default 6).
    pub max_attempts: u32,
    /// First backoff delay, doubled per attempt, capped at 5s (default 200ms).
    pub retry_base_delay: Duration,
    /// Timeout of one HTTP request (default 30s).
    pub request_timeout: Duration,
    /// The longest `Retry-After` honoured on 429/503 (default and maximum 60s); longer
    /// values from the cloud are clamped to it.
    pub max_retry_after: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            server_cache_ttl: Duration::from_secs(5),
            max_attempts: 6,
            retry_base_delay: Duration::from_millis(200),
            request_timeout: Duration::from_secs(30),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

/// A parsed `cloud.conf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub global: Global,
    pub load_balancer: LoadBalancerConfig,
    pub block_storage: BlockStorageConfig,
    pub networking: NetworkingConfig,
    pub route: RouteConfig,
    pub metadata: MetadataConfig,
    pub tuning: Tuning,
    /// Where the config came from, for messages.
    pub origin: String,
    /// Unknown sections and keys, duplicate keys; each was logged as a warning.
    pub warnings: Vec<String>,
}

impl Config {
    /// Parses `cloud.conf` text; warnings are logged and kept in [`Config::warnings`].
    /// Does not validate: see [`Config::validate`].
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        Self::parse_onto(
            Config {
                origin: origin.into(),
                ..Config::default()
            },
            text,
            origin,
        )
    }

    /// Parses `text` over `base` (a preset): keys in `text` win.
    pub fn parse_onto(mut base: Config, text: &str, origin: &str) -> Result<Self> {
        base.origin = origin.into();
        let file = hypercloud_cloudprovider::gcfg::parse(text).map_err(|message| {
            Error::ParseCloudConfig {
                origin: origin.into(),
                message,
            }
        })?;
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        // Section headers and entries in file order, so warnings come in the order of the lines.
        let mut headers = file.sections.iter().peekable();
        for entry in &file.entries {
            while let Some(h) = headers.next_if(|h| h.line < entry.line) {
                base.audit_section(h, origin);
            }
            let line = entry.line;
            let sec = entry.section.as_str();
            if entry.subsection.is_some() || !SECTIONS.contains(&sec) {
                continue;
            }
            let key = entry.key.as_str();
            let key_lower = entry.key_lower();
            let multi = sec == "networking" && key_lower.ends_with("-network-name");
            if let Some(prev) = seen
                .insert((sec.to_owned(), key_lower.clone()), line)
                .filter(|_| !multi)
            {
                base.warn(format!(
                    "{origin}: line {line}: [{sec}] {key} set again (first on line {prev}); the last value wins"
                ));
            }
            match base.set(sec, &key_lower, entry.value.as_deref()) {
                Ok(Setting::Applied) => {}
                Ok(Setting::Unknown) => base.warn(format!(
                    "{origin}: line {line}: unknown key {key:?} in [{}] ignored",
                    section_title(sec)
                )),
                Ok(Setting::NoEffect(why)) => base.warn(format!(
                    "{origin}: line {line}: [{}] {key} has no effect in hypercloud: {why}",
                    section_title(sec)
                )),
                Err(m) => {
                    return Err(Error::ParseCloudConfig {
                        origin: origin.into(),
                        message: format!("line {line}: [{}] {key}: {m}", section_title(sec)),
                    })
                }
            }
        }
        for h in headers {
            base.audit_section(h, origin);
        }
        Ok(base)
    }

    /// Warns about a section header hypercloud does not read: `[LoadBalancerClass "name"]`
    /// (not implemented), a subsection of a section that has none, or an unknown section.
    fn audit_section(&mut self, header: &hypercloud_cloudprovider::gcfg::Section, origin: &str) {
        let line = header.line;
        let name = &header.name;
        let lower = name.to_ascii_lowercase();
        if lower == "loadbalancerclass" {
            let class = header.subsection.as_deref().unwrap_or_default();
            self.warn(format!(
                "{origin}: line {line}: [{name} {class:?}] has no effect in hypercloud: load-balancer classes (loadbalancer.openstack.org/class) are not implemented; its keys are ignored"
            ));
        } else if let Some(sub) = header.subsection.as_deref() {
            self.warn(format!(
                "{origin}: line {line}: unknown section [{name} {sub:?}] ignored ([{name}] has no subsections)"
            ));
        } else if !SECTIONS.contains(&lower.as_str()) {
            self.warn(format!(
                "{origin}: line {line}: unknown section [{name}] ignored"
            ));
        }
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    /// Sets one key; says whether it was applied, is unknown, or has no effect here.
    fn set(&mut self, section: &str, key: &str, value: Option<&str>) -> Result<Setting, String> {
        let v = value.unwrap_or_default();
        let s = || Some(v.to_owned());
        let g = &mut self.global;
        match (section, key) {
            ("global", "auth-url") => g.auth_url = s(),
            ("global", "user-id") => g.user_id = s(),
            ("global", "username") => g.username = s(),
            ("global", "password") => g.password = Some(Secret::new(v)),
            ("global", "user-domain-id") => g.user_domain_id = s(),
            ("global", "user-domain-name") => g.user_domain_name = s(),
            ("global", "tenant-id" | "project-id") => g.project_id = s(),
            ("global", "tenant-name" | "project-name") => g.project_name = s(),
            ("global", "tenant-domain-id" | "project-domain-id") => g.project_domain_id = s(),
            ("global", "tenant-domain-name" | "project-domain-name") => g.project_domain_name = s(),
            ("global", "domain-id") => g.domain_id = s(),
            ("global", "domain-name") => g.domain_name = s(),
            ("global", "region") => g.region = s(),
            ("global", "application-credential-id") => g.application_credential_id = s(),
            ("global", "application-credential-name") => g.application_credential_name = s(),
            ("global", "application-credential-secret") => {
                g.application_credential_secret = Some(Secret::new(v))
            }
            ("global", "ca-file") => g.ca_file = Some(PathBuf::from(v)),
            ("global", "tls-insecure") => g.tls_insecure = parse_bool(value)?,
            ("global", "os-endpoint-type" | "interface") => g.interface = s(),
            ("global", "use-clouds") => g.use_clouds = parse_bool(value)?,
            ("global", "clouds-file") => g.clouds_file = Some(PathBuf::from(v)),
            ("global", "cloud") => g.cloud = s(),
            ("global", "trust-id") => g.trust_id = s().filter(|v| !v.is_empty()),
            ("global", "trustee-id") => g.trustee_id = s().filter(|v| !v.is_empty()),
            ("global", "trustee-password") => g.trustee_password = Some(Secret::new(v)),
            ("global", "cert-file") => {
                g.cert_file = Some(PathBuf::from(v)).filter(|_| !v.is_empty())
            }
            ("global", "key-file") => g.key_file = Some(PathBuf::from(v)).filter(|_| !v.is_empty()),
            ("global", "secret-name") => g.secret_name = s().filter(|v| !v.is_empty()),
            ("global", "secret-namespace") => g.secret_namespace = s().filter(|v| !v.is_empty()),
            ("global", "kubeconfig-path") => {
                g.kubeconfig_path = Some(PathBuf::from(v)).filter(|_| !v.is_empty())
            }
            ("loadbalancer", k) => return self.set_lb(k, value),
            ("blockstorage", "bs-version") => {
                self.block_storage.bs_version = s();
                return Ok(Setting::NoEffect(
                    "the Cinder endpoint is the catalog's (block-storage, volumev3 or volume) and is always sent v3 requests",
                ));
            }
            ("blockstorage", "trust-device-path") => {
                self.block_storage.trust_device_path = parse_bool(value)?;
                return Ok(Setting::NoEffect(
                    "the device path is the one Cinder records for the attachment; hypercloud does not look devices up on the node",
                ));
            }
            ("blockstorage", "ignore-volume-az") => {
                self.block_storage.ignore_volume_az = parse_bool(value)?
            }
            ("blockstorage", "node-volume-attach-limit") => {
                self.block_storage.node_volume_attach_limit = Some(parse_num_in(v, 1..=256)?);
                return Ok(Setting::NoEffect(
                    "no per-node attach limit is reported to the scheduler; Nova's own limit applies when attaching",
                ));
            }
            ("blockstorage", "rescan-on-resize") => {
                self.block_storage.rescan_on_resize = parse_bool(value)?;
                return Ok(Setting::NoEffect(
                    "volumes are extended in Cinder, but the rescan of the block device after a resize is node-side work hypercloud does not do",
                ));
            }
            ("networking", "public-network-name") => {
                self.networking.public_network_name.push(v.to_owned())
            }
            ("networking", "internal-network-name") => {
                self.networking.internal_network_name.push(v.to_owned())
            }
            ("networking", "ipv6-support-disabled") => {
                self.networking.ipv6_support_disabled = parse_bool(value)?
            }
            ("networking", "address-sort-order") => {
                return Ok(Setting::NoEffect(
                    "node addresses keep the cloud's order (sorting by CIDR is not implemented)",
                ))
            }
            ("route", "router-id") => self.route.router_id = s(),
            ("metadata", "search-order") => self.metadata.search_order = parse_search_order(v)?,
            ("metadata", "request-timeout") => {
                self.metadata.request_timeout =
                    parse_duration_in(v, MIN_TIMEOUT, MAX_CONFIG_DURATION)?
            }
            ("metadata", "config-drive-dir") => {
                self.metadata.config_drive_dir = Some(PathBuf::from(v))
            }
            ("metadata", "metadata-url") => {
                self.metadata.metadata_url = v.trim_end_matches('/').to_owned()
            }
            ("metadata", "instance-id") => self.metadata.instance_id = s(),
            ("hypercloud", "server-cache-ttl") => self.tuning.server_cache_ttl = parse_duration(v)?,
            ("hypercloud", "max-attempts") => self.tuning.max_attempts = parse_num_in(v, 1..=100)?,
            ("hypercloud", "retry-base-delay") => self.tuning.retry_base_delay = parse_duration(v)?,
            ("hypercloud", "max-retry-after") => {
                self.tuning.max_retry_after = parse_duration_in(v, Duration::ZERO, MAX_RETRY_AFTER)?
            }
            ("hypercloud", "request-timeout") => {
                self.tuning.request_timeout =
                    parse_duration_in(v, MIN_TIMEOUT, MAX_CONFIG_DURATION)?
            }
            _ => return Ok(Setting::Unknown),
        }
        Ok(Setting::Applied)
    }

    fn set_lb(&mut self, key: &str, value: Option<&str>) -> Result<Setting, String> {
        let v = value.unwrap_or_default();
        let s = || Some(v.to_owned());
        let lb = &mut self.load_balancer;
        match key {
            "floating-network-id" => lb.floating_network_id = s(),
            "subnet-id" => lb.subnet_id = s(),
            "network-id" => lb.network_id = s(),
            "lb-method" => lb.lb_method = s(),
            "lb-provider" => lb.lb_provider = s(),
            "create-monitor" => lb.create_monitor = parse_bool(value)?,
            // Octavia counts health monitor times in whole seconds, retries 1 to 10.
            "monitor-delay" => {
                lb.monitor_delay = Some(parse_duration_in(
                    v,
                    Duration::from_secs(1),
                    MAX_CONFIG_DURATION,
                )?)
            }
            "monitor-timeout" => {
                lb.monitor_timeout = Some(parse_duration_in(
                    v,
                    Duration::from_secs(1),
                    MAX_CONFIG_DURATION,
                )?)
            }
            "monitor-max-retries" => lb.monitor_max_retries = Some(parse_num_in(v, 1..=10)?),
            "monitor-max-retries-down" => {
                lb.monitor_max_retries_down = Some(parse_num_in(v, 1..=10)?)
            }
            "internal-lb" => lb.internal_lb = parse_bool(value)?,
            "enabled" => lb.enabled = Some(parse_bool(value)?),
            "floating-subnet-id" => lb.floating_subnet_id = s(),
            // What hypercloud always does: Octavia, API v2, cascade deletes, one call at a
            // time. The other value is a warning, not silence.
            "use-octavia" if parse_bool(value)? => {}
            "use-octavia" => {
                return Ok(Setting::NoEffect(
                    "Neutron LBaaS v2 is not supported; Octavia is always used",
                ))
            }
            "lb-version" if v.is_empty() || v == "v2" => {}
            "lb-version" => return Err(format!("{v:?} is not supported (only v2)")),
            "cascade-delete" if parse_bool(value)? => {}
            "cascade-delete" => {
                return Ok(Setting::NoEffect(
                    "load balancers are always deleted with cascade=true",
                ))
            }
            "provider-requires-serial-api-calls" => {
                lb.provider_requires_serial_api_calls = parse_bool(value)?;
            }
            "manage-security-groups" => lb.manage_security_groups = parse_bool(value)?,
            "floating-subnet" | "floating-subnet-tags" => {
                return Ok(Setting::NoEffect(
                    "choosing the floating subnet by name or tags is not implemented; use floating-subnet-id",
                ))
            }
            "member-subnet-id" => lb.member_subnet_id = s().filter(|v| !v.is_empty()),
            "node-selector" => lb.node_selector = s().filter(|v| !v.is_empty()),
            "node-security-group" => {
                return Ok(Setting::NoEffect(
                    "the nodes' own security group is never edited; manage-security-groups puts a group per load balancer on the nodes' ports instead, as OCCM",
                ))
            }
            "flavor-id" => lb.flavor_id = s().filter(|v| !v.is_empty()),
            "availability-zone" => lb.availability_zone = s().filter(|v| !v.is_empty()),
            "enable-ingress-hostname" | "ingress-hostname-suffix" => {
                return Ok(Setting::NoEffect(
                    "the PROXY protocol is not implemented, so ingress hostnames are never needed",
                ))
            }
            "default-tls-container-ref" | "container-store" => {
                return Ok(Setting::NoEffect(
                    "TERMINATED_HTTPS listeners (Barbican) are not implemented",
                ))
            }
            // 0: no Service may share another's load balancer.
            "max-shared-lb" => lb.max_shared_lb = Some(parse_num_in(v, 0..=1000)?),
            _ => return Ok(Setting::Unknown),
        }
        Ok(Setting::Applied)
    }

    /// Reads `clouds.yaml` when `[Global] use-clouds` is set (values in `cloud.conf` win, as
    /// upstream), then checks that what is needed to authenticate is there.
    pub fn resolve(mut self) -> Result<Self> {
        if self.global.use_clouds {
            self.apply_clouds_yaml()?;
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks that the config can authenticate, or names a credentials Secret that will say
    /// how ([`Config::credentials_secret`]); errors name the key and the file.
    pub fn validate(&self) -> Result<()> {
        let g = &self.global;
        match (&g.cert_file, &g.key_file) {
            (Some(_), None) => {
                return Err(Error::ParseCloudConfig {
                    origin: self.origin.clone(),
                    message:
                        "[Global] cert-file needs key-file (the client certificate's private key)"
                            .into(),
                })
            }
            (None, Some(_)) => {
                return Err(Error::ParseCloudConfig {
                    origin: self.origin.clone(),
                    message: "[Global] key-file needs cert-file".into(),
                })
            }
            _ => {}
        }
        match (&g.secret_name, &g.secret_namespace) {
            (Some(_), Some(_)) => return Ok(()),
            (Some(_), None) => {
                return Err(Error::ParseCloudConfig {
                    origin: self.origin.clone(),
                    message: "[Global] secret-name needs secret-namespace (the legacy provider read the Secret only when both were set)".into(),
                })
            }
            (None, Some(_)) => {
                return Err(Error::ParseCloudConfig {
                    origin: self.origin.clone(),
                    message: "[Global] secret-namespace is set without secret-name".into(),
                })
            }
            (None, None) => {}
        }
        self.validate_credentials()
    }

    /// The credentials Secret, when `secret-name` and `secret-namespace` name one.
    pub fn credentials_secret(&self) -> Option<SecretRef> {
        match (&self.global.secret_name, &self.global.secret_namespace) {
            (Some(name), Some(namespace)) => Some(SecretRef {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
            _ => None,
        }
    }

    /// This config with the `[Global]` credentials of a credentials Secret's data over the
    /// file's (as the legacy provider read the Secret's `clouds.conf` into its config): the
    /// key `clouds.conf`, else OCCM's `cloud.conf`. Only identity keys ([`SECRET_KEYS`]) may
    /// be there; errors name keys, never values.
    pub fn with_credentials_from(
        &self,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Config, String> {
        let (key, bytes) = SECRET_DATA_KEYS
            .iter()
            .find_map(|k| data.get(*k).map(|v| (*k, v)))
            .ok_or_else(|| {
                format!(
                    "has no key {} (it has: {})",
                    SECRET_DATA_KEYS.join(" or "),
                    data.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?;
        let text = std::str::from_utf8(bytes).map_err(|_| format!("{key} is not UTF-8"))?;
        let file = hypercloud_cloudprovider::gcfg::parse(text)
            .map_err(|m| format!("{key}: {}", redact_parse_error(&m)))?;
        for e in &file.entries {
            let key_lower = e.key_lower();
            if e.section != "global" || e.subsection.is_some() {
                return Err(format!(
                    "{key}: line {}: [{}] is not read from the credentials Secret (only [Global] credentials are); put it in the cloud config file",
                    e.line, e.section
                ));
            }
            if !SECRET_KEYS.contains(&key_lower.as_str()) {
                return Err(format!(
                    "{key}: line {}: [Global] {} is not read from the credentials Secret (only {}); put it in the cloud config file",
                    e.line,
                    e.key,
                    SECRET_KEYS.join(", ")
                ));
            }
        }
        let mut base = self.clone();
        base.warnings.clear();
        let merged = Config::parse_onto(base, text, key).map_err(|e| match e {
            Error::ParseCloudConfig { message, .. } => format!("{key}: {message}"),
            other => format!("{key}: {other}"),
        })?;
        merged.validate_credentials().map_err(|e| match e {
            Error::ParseCloudConfig { message, .. } => {
                format!("{key} with the cloud config file: {message}")
            }
            other => other.to_string(),
        })?;
        let mut merged = merged;
        merged.origin = self.origin.clone();
        Ok(merged)
    }

    /// Checks that `[Global]` holds what authenticating needs.
    fn validate_credentials(&self) -> Result<()> {
        let err = |message: String| Error::ParseCloudConfig {
            origin: self.origin.clone(),
            message,
        };
        let g = &self.global;
        if g.auth_url.as_deref().is_none_or(str::is_empty) {
            return Err(err(
                "[Global] auth-url is required (the Keystone v3 URL, e.g. http://127.0.0.1:8800/identity/v3) but is missing".into(),
            ));
        }
        let app_cred =
            g.application_credential_id.is_some() || g.application_credential_name.is_some();
        if g.trust_id.is_none() && (g.trustee_id.is_some() || g.trustee_password.is_some()) {
            return Err(err(
                "[Global] trustee-id and trustee-password need trust-id".into(),
            ));
        }
        if g.trust_id.is_some() {
            if app_cred {
                return Err(err("[Global] trust-id and application credentials exclude each other (a trust-scoped token is got with the trustee's password)".into()));
            }
            if g.trustee_id.is_none() && g.user_id.is_none() && g.username.is_none() {
                return Err(err(
                    "[Global] trust-id needs trustee-id (or user-id, or username)".into(),
                ));
            }
            if g.trustee_password.is_none() && g.password.is_none() {
                return Err(err(
                    "[Global] trust-id needs trustee-password (or password)".into(),
                ));
            }
            return Ok(());
        }
        if app_cred {
            if g.application_credential_secret.is_none() {
                return Err(err("[Global] application-credential-secret is required with application-credential-id/name".into()));
            }
            if g.application_credential_id.is_none() && g.username.is_none() && g.user_id.is_none()
            {
                return Err(err("[Global] application-credential-name needs username or user-id (or use application-credential-id)".into()));
            }
        } else {
            if g.username.is_none() && g.user_id.is_none() {
                return Err(err("[Global] username (or user-id, or application-credential-id) is required but is missing".into()));
            }
            if g.password.is_none() && g.api_key.is_none() {
                return Err(err(
                    "[Global] password is required with username/user-id".into()
                ));
            }
        }
        Ok(())
    }

    fn apply_clouds_yaml(&mut self) -> Result<()> {
        let path = match &self.global.clouds_file {
            Some(p) => p.clone(),
            None => clouds_yaml_candidates()
                .into_iter()
                .find(|p| p.is_file())
                .ok_or_else(|| Error::ParseCloudConfig {
                    origin: self.origin.clone(),
                    message: "[Global] use-clouds is set but no clouds.yaml was found (set clouds-file, OS_CLIENT_CONFIG_FILE, or put one in ~/.config/openstack/)".into(),
                })?,
        };
        let name = self
            .global
            .cloud
            .clone()
            .or_else(|| std::env::var("OS_CLOUD").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "openstack".into());
        let text = hypercloud_cloudprovider::input::read_input_text(&path).map_err(|e| {
            Error::ReadCloudsYaml {
                path: path.clone(),
                message: format!("cannot read: {e}"),
            }
        })?;
        let file: CloudsFile = serde_yaml::from_str(&text).map_err(|e| Error::ReadCloudsYaml {
            path: path.clone(),
            message: format!("not valid clouds.yaml: {e}"),
        })?;
        let Some(cloud) = file.clouds.get(&name) else {
            return Err(Error::ReadCloudsYaml {
                path,
                message: format!(
                    "has no cloud {name:?} ([Global] cloud / OS_CLOUD); it has: {}",
                    file.clouds.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        };
        let a = &cloud.auth;
        let g = &mut self.global;
        fill(&mut g.auth_url, &a.auth_url);
        fill(&mut g.username, &a.username);
        fill(&mut g.user_id, &a.user_id);
        if g.password.is_none() {
            g.password = a.password.clone().map(Secret::new);
        }
        fill(
            &mut g.project_id,
            &a.project_id.clone().or(a.tenant_id.clone()),
        );
        fill(
            &mut g.project_name,
            &a.project_name.clone().or(a.tenant_name.clone()),
        );
        fill(&mut g.user_domain_name, &a.user_domain_name);
        fill(&mut g.user_domain_id, &a.user_domain_id);
        fill(&mut g.project_domain_name, &a.project_domain_name);
        fill(&mut g.project_domain_id, &a.project_domain_id);
        fill(&mut g.domain_name, &a.domain_name);
        fill(&mut g.domain_id, &a.domain_id);
        fill(
            &mut g.application_credential_id,
            &a.application_credential_id,
        );
        fill(
            &mut g.application_credential_name,
            &a.application_credential_name,
        );
        if g.application_credential_secret.is_none() {
            g.application_credential_secret =
                a.application_credential_secret.clone().map(Secret::new);
        }
        fill(&mut g.region, &cloud.region_name);
        fill(&mut g.interface, &cloud.interface);
        if g.ca_file.is_none() {
            g.ca_file = cloud.cacert.clone().map(PathBuf::from);
        }
        if g.cert_file.is_none() && g.key_file.is_none() {
            g.cert_file = cloud.cert.clone().map(PathBuf::from);
            g.key_file = cloud.key.clone().map(PathBuf::from);
        }
        if cloud.verify == Some(false) {
            g.tls_insecure = true;
        }
        Ok(())
    }

    /// The Keystone v3 base URL (`.../v3`), from `auth-url` with or without the version.
    pub fn keystone_url(&self) -> String {
        self.global.keystone_url()
    }
}

fn fill(slot: &mut Option<String>, from: &Option<String>) {
    if slot.is_none() {
        slot.clone_from(from);
    }
}

fn clouds_yaml_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("OS_CLIENT_CONFIG_FILE") {
        out.push(PathBuf::from(p));
    }
    out.push(PathBuf::from("clouds.yaml"));
    if let Some(home) = std::env::var_os("HOME") {
        out.push(PathBuf::from(home).join(".config/openstack/clouds.yaml"));
    }
    out.push(PathBuf::from("/etc/openstack/clouds.yaml"));
    out
}

#[derive(Deserialize)]
struct CloudsFile {
    #[serde(default)]
    clouds: BTreeMap<String, CloudEntry>,
}

#[derive(Deserialize, Default)]
struct CloudEntry {
    #[serde(default)]
    auth: CloudAuth,
    region_name: Option<String>,
    interface: Option<String>,
    cacert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    verify: Option<bool>,
}

#[derive(Deserialize, Default)]
struct CloudAuth {
    auth_url: Option<String>,
    username: Option<String>,
    user_id: Option<String>,
    password: Option<String>,
    project_id: Option<String>,
    project_name: Option<String>,
    tenant_id: Option<String>,
    tenant_name: Option<String>,
    user_domain_name: Option<String>,
    user_domain_id: Option<String>,
    project_domain_name: Option<String>,
    project_domain_id: Option<String>,
    domain_name: Option<String>,
    domain_id: Option<String>,
    application_credential_id: Option<String>,
    application_credential_name: Option<String>,
    application_credential_secret: Option<String>,
}

/// What setting one key did.
enum Setting {
    Applied,
    Unknown,
    /// A documented key hypercloud does not implement (or not with this value): a warning
    /// naming it, with why.
    NoEffect(&'static str),
}

/// The keys of a credentials Secret holding its gcfg text: the legacy provider's, then the
/// one OCCM's `cloud-config` Secret uses.
pub const SECRET_DATA_KEYS: [&str; 2] = ["clouds.conf", "cloud.conf"];

/// The `[Global]` keys a credentials Secret may set: who authenticates, where, in which
/// region. Everything else stays in the file (it is read once, at start).
pub const SECRET_KEYS: &[&str] = &[
    "auth-url",
    "user-id",
    "username",
    "password",
    "user-domain-id",
    "user-domain-name",
    "tenant-id",
    "project-id",
    "tenant-name",
    "project-name",
    "tenant-domain-id",
    "project-domain-id",
    "tenant-domain-name",
    "project-domain-name",
    "domain-id",
    "domain-name",
    "region",
    "application-credential-id",
    "application-credential-name",
    "application-credential-secret",
    "trust-id",
    "trustee-id",
    "trustee-password",
];

/// A gcfg parse error of a Secret's text, without the line's text (which may hold a
/// password): only the line number is kept.
fn redact_parse_error(message: &str) -> String {
    match message.split_once(':') {
        Some((line, _)) if line.starts_with("line ") => format!("{line}: not valid gcfg"),
        _ => "not valid gcfg".into(),
    }
}

/// How hypercloud treats a key upstream documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// Implemented as upstream.
    Implemented,
    /// Accepted with a start-up warning naming the key and why it has no effect.
    Warned,
    /// Refused at start-up with an error naming the key.
    Rejected,
}

/// Every key OCCM v1.34 (`docs/openstack-cloud-controller-manager/using-openstack-cloud-
/// controller-manager.md`) or the legacy in-tree provider (kubernetes v1.20) documents, by
/// section, with a value that shows its treatment and what hypercloud does with it.
pub const DOCUMENTED_KEYS: &[(&str, &str, &str, Treatment)] = {
    use Treatment::*;
    &[
        ("Global", "auth-url", "http://k/v3", Implemented),
        ("Global", "os-endpoint-type", "internal", Implemented),
        ("Global", "ca-file", "/etc/ca.pem", Implemented),
        ("Global", "cert-file", "/etc/c.pem", Implemented),
        ("Global", "key-file", "/etc/k.pem", Implemented),
        ("Global", "username", "u", Implemented),
        ("Global", "user-id", "u", Implemented),
        ("Global", "password", "p", Implemented),
        ("Global", "region", "r", Implemented),
        ("Global", "domain-id", "d", Implemented),
        ("Global", "domain-name", "d", Implemented),
        ("Global", "tenant-id", "t", Implemented),
        ("Global", "project-id", "t", Implemented),
        ("Global", "tenant-name", "t", Implemented),
        ("Global", "project-name", "t", Implemented),
        ("Global", "tenant-domain-id", "d", Implemented),
        ("Global", "tenant-domain-name", "d", Implemented),
        ("Global", "user-domain-id", "d", Implemented),
        ("Global", "user-domain-name", "d", Implemented),
        ("Global", "trust-id", "t", Implemented),
        ("Global", "trustee-id", "t", Implemented),
        ("Global", "trustee-password", "t", Implemented),
        ("Global", "use-clouds", "false", Implemented),
        ("Global", "clouds-file", "/etc/clouds.yaml", Implemented),
        ("Global", "cloud", "c", Implemented),
        ("Global", "application-credential-id", "a", Implemented),
        ("Global", "application-credential-name", "a", Implemented),
        ("Global", "application-credential-secret", "s", Implemented),
        ("Global", "tls-insecure", "false", Implemented),
        ("Global", "secret-name", "cloud-config", Implemented),
        ("Global", "secret-namespace", "kube-system", Implemented),
        (
            "Global",
            "kubeconfig-path",
            "/etc/kubernetes/admin.conf",
            Implemented,
        ),
        ("Networking", "ipv6-support-disabled", "true", Implemented),
        ("Networking", "public-network-name", "public", Implemented),
        (
            "Networking",
            "internal-network-name",
            "private",
            Implemented,
        ),
        ("Networking", "address-sort-order", "10.0.0.0/8", Warned),
        ("Route", "router-id", "r", Implemented),
        ("LoadBalancer", "enabled", "true", Implemented),
        ("LoadBalancer", "floating-network-id", "n", Implemented),
        ("LoadBalancer", "floating-subnet-id", "s", Implemented),
        ("LoadBalancer", "floating-subnet", "public-*", Warned),
        ("LoadBalancer", "floating-subnet-tags", "t", Warned),
        ("LoadBalancer", "lb-method", "ROUND_ROBIN", Implemented),
        ("LoadBalancer", "lb-provider", "amphora", Implemented),
        ("LoadBalancer", "lb-version", "v2", Implemented),
        ("LoadBalancer", "lb-version", "v1", Rejected),
        ("LoadBalancer", "use-octavia", "true", Implemented),
        ("LoadBalancer", "use-octavia", "false", Warned),
        ("LoadBalancer", "subnet-id", "s", Implemented),
        ("LoadBalancer", "member-subnet-id", "s", Implemented),
        ("LoadBalancer", "network-id", "n", Implemented),
        (
            "LoadBalancer",
            "manage-security-groups",
            "false",
            Implemented,
        ),
        (
            "LoadBalancer",
            "manage-security-groups",
            "true",
            Implemented,
        ),
        ("LoadBalancer", "node-security-group", "sg", Warned),
        ("LoadBalancer", "create-monitor", "true", Implemented),
        ("LoadBalancer", "monitor-delay", "5s", Implemented),
        ("LoadBalancer", "monitor-max-retries", "1", Implemented),
        ("LoadBalancer", "monitor-max-retries-down", "3", Implemented),
        ("LoadBalancer", "monitor-timeout", "3s", Implemented),
        ("LoadBalancer", "internal-lb", "true", Implemented),
        ("LoadBalancer", "node-selector", "a=b", Implemented),
        ("LoadBalancer", "cascade-delete", "true", Implemented),
        ("LoadBalancer", "cascade-delete", "false", Warned),
        ("LoadBalancer", "flavor-id", "f", Implemented),
        ("LoadBalancer", "availability-zone", "az", Implemented),
        ("LoadBalancer", "enable-ingress-hostname", "true", Warned),
        ("LoadBalancer", "ingress-hostname-suffix", "nip.io", Warned),
        ("LoadBalancer", "default-tls-container-ref", "ref", Warned),
        ("LoadBalancer", "container-store", "barbican", Warned),
        ("LoadBalancer", "max-shared-lb", "2", Implemented),
        ("LoadBalancer", "max-shared-lb", "-1", Rejected),
        (
            "LoadBalancer",
            "provider-requires-serial-api-calls",
            "true",
            Implemented,
        ),
        ("BlockStorage", "bs-version", "v3", Warned),
        ("BlockStorage", "trust-device-path", "false", Warned),
        ("BlockStorage", "ignore-volume-az", "true", Implemented),
        ("BlockStorage", "node-volume-attach-limit", "25", Warned),
        ("BlockStorage", "rescan-on-resize", "true", Warned),
        ("Metadata", "search-order", "configDrive", Implemented),
        ("Metadata", "request-timeout", "5s", Implemented),
    ]
};

const SECTIONS: [&str; 7] = [
    "global",
    "loadbalancer",
    "blockstorage",
    "networking",
    "route",
    "metadata",
    "hypercloud",
];

fn section_title(lower: &str) -> &str {
    match lower {
        "global" => "Global",
        "loadbalancer" => "LoadBalancer",
        "blockstorage" => "BlockStorage",
        "networking" => "Networking",
        "route" => "Route",
        "metadata" => "Metadata",
        "hypercloud" => "Hypercloud",
        other => other,
    }
}

/// gcfg values: `"quoted \"text\""` or bare text up to a `;`/`#` comment.
fn parse_num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a non-negative integer"))
}

/// The longest `Retry-After` ever honoured, and the default of `[Hypercloud] max-retry-after`.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The shortest request timeout (0 would fail every request).
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// The longest duration any `cloud.conf` key accepts.
pub const MAX_CONFIG_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Go-style durations as upstream writes them (`5s`, `500ms`, `1m30s`); a bare number is
/// seconds. At most [`MAX_CONFIG_DURATION`].
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    parse_duration_in(v, Duration::ZERO, MAX_CONFIG_DURATION)
}

/// [`parse_duration`] within `min..=max` (the kit's Go-style parser).
fn parse_duration_in(v: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    hypercloud_cloudprovider::duration::parse_in(v, min, max)
}

/// An integer within `range`; the error gives the range.
fn parse_num_in(v: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    let n: u64 = parse_num(v)?;
    u32::try_from(n)
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "{} is out of range ({} to {})",
                v.trim(),
                range.start(),
                range.end()
            )
        })
}

fn parse_search_order(v: &str) -> Result<Vec<MetadataSource>, String> {
    let mut out = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let source = match part.to_ascii_lowercase().as_str() {
            "configdrive" => MetadataSource::ConfigDrive,
            "metadataservice" => MetadataSource::MetadataService,
            _ => {
                return Err(format!(
                    "{part:?} is not a metadata source (configDrive or metadataService)"
                ))
            }
        };
        if out.contains(&source) {
            return Err(format!("{part} is listed twice"));
        }
        out.push(source);
    }
    if out.is_empty() {
        return Err("is empty; use configDrive, metadataService or both".into());
    }
    Ok(out)
}

/// The `local` preset: the local cloud's defaults (`hypercloud_localcloud_defaults`).
pub fn local_defaults() -> Config {
    use hypercloud_localcloud_defaults as d;
    let mut c = Config {
        origin: "the local cloud's defaults".into(),
        ..Config::default()
    };
    let g = &mut c.global;
    g.auth_url = Some(format!("http://{}{}/v3", d::API_LISTEN, d::IDENTITY_PATH));
    g.username = Some(d::USER.into());
    g.password = Some(Secret::new(d::PASSWORD));
    g.user_domain_name = Some(d::DOMAIN.into());
    g.project_name = Some(d::PROJECT.into());
    g.project_domain_name = Some(d::DOMAIN.into());
    g.region = Some(d::REGION.into());
    c.metadata.metadata_url = format!("http://{}", d::METADATA_LISTEN);
    c.metadata.config_drive_dir = d::state_dir().map(|s| s.join("config-drive"));
    c
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const FULL: &str = r#"
; every section upstream documents
[Global]
auth-url = http://keystone.example:5000/v3
username = kube
password = "s3cr#t;pw"
user-domain-name = Default
tenant-name = k8s
project-domain-id = default
region = RegionTwo
ca-file = /etc/ssl/ca.pem
tls-insecure = false
os-endpoint-type = internal

[LoadBalancer]
floating-network-id = 11111111-2222-3333-4444-555555555555
subnet-id = 66666666-7777-8888-9999-000000000000
lb-method = ROUND_ROBIN
create-monitor = yes
monitor-delay = 5s
monitor-timeout = 3s
monitor-max-retries = 2
lb-provider = amphora
use-octavia = true

[BlockStorage]
ignore-volume-az = true

[Networking]
public-network-name = public
public-network-name = ext2
internal-network-name = private

[Route]
router-id = r-123   # the cluster router

[Metadata]
search-order = metadataService, configDrive
request-timeout = 2s
metadata-url = http://127.0.0.1:8801/
config-drive-dir = /var/lib/config-drive
instance-id = node-1

[Hypercloud]
server-cache-ttl = 750ms
max-attempts = 3
"#;

    #[test]
    fn parses_every_section() {
        let c = Config::parse(FULL, "cloud.conf")
            .unwrap()
            .resolve()
            .unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let g = &c.global;
        assert_eq!(
            g.auth_url.as_deref(),
            Some("http://keystone.example:5000/v3")
        );
        assert_eq!(g.username.as_deref(), Some("kube"));
        assert_eq!(g.password.as_ref().unwrap().expose(), "s3cr#t;pw");
        assert_eq!(g.project_name.as_deref(), Some("k8s"));
        assert_eq!(g.project_domain_id.as_deref(), Some("default"));
        assert_eq!(g.user_domain_name.as_deref(), Some("Default"));
        assert_eq!(g.region.as_deref(), Some("RegionTwo"));
        assert_eq!(g.interface.as_deref(), Some("internal"));
        assert_eq!(g.ca_file, Some(PathBuf::from("/etc/ssl/ca.pem")));
        assert!(!g.tls_insecure);
        let lb = &c.load_balancer;
        assert_eq!(lb.lb_method.as_deref(), Some("ROUND_ROBIN"));
        assert!(lb.create_monitor);
        assert_eq!(lb.monitor_delay, Some(Duration::from_secs(5)));
        assert_eq!(lb.monitor_max_retries, Some(2));
        assert_eq!(lb.lb_provider.as_deref(), Some("amphora"));
        assert!(lb.floating_network_id.is_some() && lb.subnet_id.is_some());
        assert!(c.block_storage.ignore_volume_az);
        assert_eq!(c.route.router_id.as_deref(), Some("r-123"));
        assert_eq!(c.networking.public_network_name, vec!["public", "ext2"]);
        assert_eq!(c.networking.internal_network_name, vec!["private"]);
        assert_eq!(
            c.metadata.search_order,
            vec![MetadataSource::MetadataService, MetadataSource::ConfigDrive]
        );
        assert_eq!(c.metadata.request_timeout, Duration::from_secs(2));
        assert_eq!(c.metadata.metadata_url, "http://127.0.0.1:8801");
        assert_eq!(c.metadata.instance_id.as_deref(), Some("node-1"));
        assert_eq!(c.tuning.server_cache_ttl, Duration::from_millis(750));
        assert_eq!(c.tuning.max_attempts, 3);
        assert_eq!(c.keystone_url(), "http://keystone.example:5000/v3");
    }

    /// Each documented key alone in its section: implemented keys parse without a warning,
    /// the others warn or fail naming the key; none is silently ignored.
    #[test]
    fn every_documented_key_is_implemented_warned_or_rejected() {
        for (section, key, value, treatment) in DOCUMENTED_KEYS {
            let text = format!("[{section}]\n{key} = {value}\n");
            let got = Config::parse(&text, "c.conf");
            match (treatment, got) {
                (Treatment::Implemented, Ok(c)) => {
                    assert!(c.warnings.is_empty(), "{key}={value}: {:?}", c.warnings)
                }
                (Treatment::Warned, Ok(c)) => {
                    assert_eq!(c.warnings.len(), 1, "{key}={value}: {:?}", c.warnings);
                    let w = &c.warnings[0];
                    assert!(
                        w.contains(&format!("[{section}] {key} has no effect in hypercloud: ")),
                        "{w}"
                    );
                }
                (Treatment::Rejected, Err(e)) => {
                    assert!(e.to_string().contains(key), "{key}: {e}")
                }
                (t, got) => panic!("{section} {key}={value}: expected {t:?}, got {got:?}"),
            }
        }
        let c = Config::parse(
            "[LoadBalancerClass \"gold\"]\nfloating-network-id = x\n",
            "c",
        )
        .unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("load-balancer classes"),
            "{:?}",
            c.warnings
        );
    }

    fn secret_data(text: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([("clouds.conf".to_owned(), text.as_bytes().to_vec())])
    }

    #[test]
    fn a_credentials_secret_needs_both_keys_and_may_leave_credentials_out_of_the_file() {
        let c = Config::parse(
            "[Global]\nsecret-name = os-creds\nsecret-namespace = kube-system\n",
            "c.conf",
        )
        .unwrap()
        .resolve()
        .expect("credentials come from the Secret");
        assert_eq!(
            c.credentials_secret(),
            Some(SecretRef {
                namespace: "kube-system".into(),
                name: "os-creds".into()
            })
        );
        for (text, needs) in [
            (
                "[Global]\nsecret-name = os-creds\n",
                "needs secret-namespace",
            ),
            ("[Global]\nsecret-namespace = ns\n", "without secret-name"),
        ] {
            let e = Config::parse(text, "c.conf")
                .unwrap()
                .resolve()
                .unwrap_err();
            assert!(e.to_string().contains(needs), "{e}");
        }
    }

    #[test]
    fn the_secret_sets_global_credentials_over_the_file() {
        let file = Config::parse(
            "[Global]\nauth-url = http://k/v3\nregion = R\nsecret-name = s\nsecret-namespace = ns\n\
             [LoadBalancer]\nfloating-network-id = f\n",
            "c.conf",
        )
        .unwrap();
        let merged = file
            .with_credentials_from(&secret_data(
                "[Global]\nusername = u\npassword = hunter2\nproject-name = p\n",
            ))
            .unwrap();
        assert_eq!(merged.global.username.as_deref(), Some("u"));
        assert_eq!(merged.global.password, Some(Secret::new("hunter2")));
        assert_eq!(merged.global.region.as_deref(), Some("R"));
        assert_eq!(
            merged.load_balancer.floating_network_id.as_deref(),
            Some("f")
        );
        assert_eq!(merged.origin, "c.conf");
        // OCCM's key works too; an application credential replaces the password.
        let occm = BTreeMap::from([(
            "cloud.conf".to_owned(),
            b"[Global]\napplication-credential-id = a\napplication-credential-secret = s3cr3t\n"
                .to_vec(),
        )]);
        let merged = file.with_credentials_from(&occm).unwrap();
        assert_eq!(
            merged.global.application_credential_id.as_deref(),
            Some("a")
        );
    }

    #[test]
    fn a_secret_is_refused_by_key_never_by_value() {
        let file = Config::parse(
            "[Global]\nauth-url = http://k/v3\nsecret-name = s\nsecret-namespace = ns\n",
            "c.conf",
        )
        .unwrap();
        let cases: [(BTreeMap<String, Vec<u8>>, &str); 6] = [
            (BTreeMap::new(), "has no key clouds.conf or cloud.conf"),
            (
                BTreeMap::from([("clouds.conf".to_owned(), vec![0xff, 0xfe])]),
                "not UTF-8",
            ),
            (
                secret_data("[Global]\nusername = u\n"),
                "password is required",
            ),
            (
                secret_data("[Global]\nusername = u\npassword = hunter2\nca-file = /x\n"),
                "[Global] ca-file is not read from the credentials Secret",
            ),
            (
                secret_data("[Global]\npassword = hunter2\n[LoadBalancer]\nsubnet-id = x\n"),
                "[loadbalancer] is not read",
            ),
            (
                secret_data("[Global\npassword = hunter2\n"),
                "line 1: not valid gcfg",
            ),
        ];
        for (data, want) in cases {
            let e = file.with_credentials_from(&data).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn a_trust_needs_a_trustee_and_its_password() {
        let base = "[Global]\nauth-url = http://k/v3\n";
        let ok = |extra: &str| {
            Config::parse(&format!("{base}{extra}"), "c")
                .unwrap()
                .resolve()
        };
        ok("trust-id = t\ntrustee-id = u\ntrustee-password = p\n").expect("trustee");
        ok("trust-id = t\nuser-id = u\npassword = p\n").expect("the user as trustee");
        for (extra, want) in [
            ("trust-id = t\ntrustee-password = p\n", "trust-id needs trustee-id"),
            ("trust-id = t\ntrustee-id = u\n", "trust-id needs trustee-password"),
            ("trustee-id = u\nusername = a\npassword = p\n", "need trust-id"),
            (
                "trust-id = t\ntrustee-id = u\ntrustee-password = p\napplication-credential-id = a\napplication-credential-secret = s\n",
                "exclude each other",
            ),
        ] {
            let e = ok(extra).unwrap_err().to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    /// Quoted subsections are read as gcfg reads them (`;` and `#` inside the quotes are not
    /// comments); their keys never land in the plain section of the same name.
    #[test]
    fn quoted_subsections_are_read_and_kept_apart() {
        let text = "[Global]\nauth-url=http://k/v3\nusername=u\npassword=p\n\
            [LoadBalancerClass \"internal; #1\"]\nfloating-network-id = class-net\n\
            [LoadBalancer]\nfloating-network-id = net\n\
            [Global \"other\"]\nregion = x\n";
        let c = Config::parse(text, "c.conf").unwrap().resolve().unwrap();
        assert_eq!(c.load_balancer.floating_network_id.as_deref(), Some("net"));
        assert_eq!(c.global.region, None);
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("line 5")
                && c.warnings[0].contains("[LoadBalancerClass \"internal; #1\"] has no effect"),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings[1].contains("line 9")
                && c.warnings[1].contains("unknown section [Global \"other\"] ignored"),
            "{:?}",
            c.warnings
        );
        for (bad, want) in [
            (
                "[LoadBalancerClass \"open]\n",
                "line 1: unterminated subsection name",
            ),
            (
                "[LoadBalancerClass \"a\" b]\n",
                "line 1: unclosed section header",
            ),
        ] {
            let e = Config::parse(bad, "c.conf").unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let c = Config::parse(FULL, "cloud.conf").unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("s3cr#t"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn unknown_keys_and_sections_are_warnings_naming_the_line() {
        let text = "[Global]\nauth-url=http://k/v3\nusername=u\npassword=p\nregoin = x\n[Bogus]\npublic-network-name = ext\n[Global]\nregion=a\nregion=b\n";
        let c = Config::parse(text, "/etc/k/cloud.conf")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("line 5") && c.warnings[0].contains("\"regoin\""));
        assert!(c.warnings[1].contains("unknown section [Bogus]"));
        assert!(c.warnings[2].contains("line 10") && c.warnings[2].contains("first on line 9"));
        assert_eq!(c.global.region.as_deref(), Some("b"));
    }

    #[test]
    fn missing_auth_url_is_an_error_naming_key_and_file() {
        let e = Config::parse(
            "[Global]\nusername = u\npassword = p\n",
            "/etc/k/cloud.conf",
        )
        .unwrap()
        .resolve()
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("auth-url"), "{msg}");
        assert!(msg.contains("/etc/k/cloud.conf"), "{msg}");
        let cp = hypercloud_cloudprovider::ProviderError::into_cloud_config_error(e);
        assert!(matches!(
            cp,
            hypercloud_cloudprovider::Error::InvalidCloudConfig { .. }
        ));
        assert!(cp
            .to_string()
            .starts_with("--cloud-config: invalid openstack cloud config /etc/k/cloud.conf"));
    }

    #[test]
    fn bad_lines_and_values_are_errors_with_line_numbers() {
        let cases = [
            ("auth-url = x\n", "line 1", "outside any [section]"),
            ("[Global\n", "line 1", "unclosed"),
            ("[Global]\ntls-insecure = maybe\n", "line 2", "tls-insecure"),
            ("[Metadata]\n\nsearch-order = floppy\n", "line 3", "floppy"),
            (
                "[Metadata]\nsearch-order = configDrive,configDrive\n",
                "line 2",
                "twice",
            ),
            ("[Metadata]\nrequest-timeout = soon\n", "line 2", "duration"),
            ("[Global]\npassword = \"open\n", "line 2", "unterminated"),
            ("[Global]\nuser name = x\n", "line 2", "key = value"),
            (
                "[Hypercloud]\nmax-attempts = 0\n",
                "line 2",
                "out of range (1 to 100)",
            ),
        ];
        for (text, line, what) in cases {
            let msg = Config::parse(text, "c.conf").unwrap_err().to_string();
            assert!(msg.contains(line) && msg.contains(what), "{text:?}: {msg}");
        }
    }

    #[test]
    fn credentials_are_validated() {
        let e = Config::parse("[Global]\nauth-url=http://k\nusername=u\n", "c")
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("password"), "{e}");
        let c = Config::parse(
            "[Global]\nauth-url=http://k\napplication-credential-id=ac\napplication-credential-secret=s\n",
            "c",
        )
        .unwrap()
        .resolve()
        .unwrap();
        assert_eq!(c.keystone_url(), "http://k/v3");
        let e = Config::parse(
            "[Global]\nauth-url=http://k\napplication-credential-id=ac\n",
            "c",
        )
        .unwrap()
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("application-credential-secret"));
    }

    #[test]
    fn clouds_yaml_fills_what_cloud_conf_leaves_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clouds.yaml");
        std::fs::write(
            &path,
            "clouds:\n  mycloud:\n    auth:\n      auth_url: http://yaml/identity\n      username: yamluser\n      password: yamlpw\n      project_name: p\n      user_domain_name: Default\n    region_name: R9\n    interface: internal\n",
        )
        .unwrap();
        let text = format!(
            "[Global]\nuse-clouds = true\nclouds-file = {}\ncloud = mycloud\nregion = Mine\n",
            path.display()
        );
        let c = Config::parse(&text, "c").unwrap().resolve().unwrap();
        assert_eq!(c.global.username.as_deref(), Some("yamluser"));
        assert_eq!(c.global.password.as_ref().unwrap().expose(), "yamlpw");
        assert_eq!(c.global.region.as_deref(), Some("Mine"));
        assert_eq!(c.global.interface.as_deref(), Some("internal"));
        assert_eq!(c.keystone_url(), "http://yaml/identity/v3");
        let text = format!(
            "[Global]\nuse-clouds = true\nclouds-file = {}\ncloud = other\n",
            path.display()
        );
        let e = Config::parse(&text, "c").unwrap().resolve().unwrap_err();
        assert!(e.to_string().contains("no cloud \"other\""), "{e}");
    }

    #[test]
    fn local_preset_is_overridden_by_a_file() {
        let base = local_defaults();
        assert!(base.validate().is_ok());
        assert_eq!(base.keystone_url(), "http://127.0.0.1:8800/identity/v3");
        let c = Config::parse_onto(base, "[Global]\nregion = Other\n", "x.conf").unwrap();
        assert_eq!(c.global.region.as_deref(), Some("Other"));
        assert_eq!(c.global.username.as_deref(), Some("admin"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn numbers_out_of_range_are_refused_naming_key_and_range() {
        for (section, key, value, range) in [
            (
                "Metadata",
                "request-timeout",
                "99999999999999999999999h",
                "1ms to 24h",
            ),
            ("Metadata", "request-timeout", "0", "1ms to 24h"),
            ("Hypercloud", "request-timeout", "25h", "1ms to 24h"),
            ("Hypercloud", "server-cache-ttl", "1e400", ""),
            (
                "Hypercloud",
                "retry-base-delay",
                "100000000000000000000",
                "0s to 24h",
            ),
            ("Hypercloud", "max-attempts", "4294967296", "1 to 100"),
            ("Hypercloud", "max-attempts", "0", "1 to 100"),
            ("Hypercloud", "max-retry-after", "61s", "0s to 60s"),
            ("LoadBalancer", "monitor-delay", "500ms", "1s to 24h"),
            (
                "LoadBalancer",
                "monitor-timeout",
                "18446744073709551615",
                "1s to 24h",
            ),
            ("LoadBalancer", "monitor-max-retries", "11", "1 to 10"),
            ("BlockStorage", "node-volume-attach-limit", "-1", ""),
            (
                "BlockStorage",
                "node-volume-attach-limit",
                "257",
                "1 to 256",
            ),
        ] {
            let text = format!("[{section}]\n{key} = {value}\n");
            let msg = Config::parse(&text, "c.conf").unwrap_err().to_string();
            assert!(msg.contains(&format!("[{section}] {key}: ")), "{msg}");
            assert!(msg.contains(range), "{key}={value}: {msg}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Every key that takes a number or a duration, by section.
        const NUMERIC: &[(&str, &str)] = &[
            ("Metadata", "request-timeout"),
            ("Hypercloud", "request-timeout"),
            ("Hypercloud", "server-cache-ttl"),
            ("Hypercloud", "retry-base-delay"),
            ("Hypercloud", "max-retry-after"),
            ("Hypercloud", "max-attempts"),
            ("LoadBalancer", "monitor-delay"),
            ("LoadBalancer", "monitor-timeout"),
            ("LoadBalancer", "monitor-max-retries"),
            ("BlockStorage", "node-volume-attach-limit"),
        ];

        /// Numbers as a hostile or careless operator writes them: huge, tiny, negative,
        /// NaN, infinite, with and without units, and words where a number belongs.
        fn number() -> impl Strategy<Value = String> {
            let unit = prop::sample::select(&["", "ms", "s", "m", "h", "x", "ns"][..]);
            prop_oneof![
                (any::<u64>(), unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
                (any::<i64>(), unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
                (any::<f64>(), unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
                (0u32..30, unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
                ("[0-9]{20,60}", unit).prop_map(|(n, u)| format!("{n}{u}")),
                prop::sample::select(
                    &[
                        "NaN", "inf", "-inf", "1e400", "1e-30", "", "yes", "5s5", ".", "1..5s",
                        "1h-5m"
                    ][..]
                )
                .prop_map(String::from),
            ]
        }

        fn entries() -> impl Strategy<Value = Vec<(usize, String)>> {
            prop::collection::vec((0..NUMERIC.len(), number()), 1..6)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// A valid file with numeric keys mutated: parsing and provider construction never
            /// panic, a parse error names a mutated key, and whatever is accepted is in range.
            #[test]
            fn mutated_numbers_never_panic_and_errors_name_the_key(entries in entries()) {
                let mut text = String::from(FULL);
                for (i, value) in &entries {
                    let (section, key) = NUMERIC[*i];
                    text.push_str(&format!("[{section}]\n{key} = {value}\n"));
                }
                match Config::parse(&text, "c.conf") {
                    Err(e) => {
                        let msg = e.to_string();
                        prop_assert!(
                            entries.iter().any(|(i, _)| msg.contains(&format!("[{}] {}: ", NUMERIC[*i].0, NUMERIC[*i].1))),
                            "{msg}"
                        );
                    }
                    Ok(c) => {
                        prop_assert!(c.tuning.request_timeout <= MAX_CONFIG_DURATION);
                        prop_assert!(!c.tuning.request_timeout.is_zero());
                        prop_assert!(c.metadata.request_timeout <= MAX_CONFIG_DURATION);
                        prop_assert!(c.tuning.server_cache_ttl <= MAX_CONFIG_DURATION);
                        prop_assert!((1..=100).contains(&c.tuning.max_attempts));
                        prop_assert!(c.tuning.max_retry_after <= MAX_RETRY_AFTER);
                        let cc = hypercloud_cloudprovider::CloudConfig { origin: "c.conf".into(), bytes: text.into_bytes() };
                        // Construction (HTTP client with these timeouts) must not panic either.
                        let _ = crate::OpenStack::from_cloud_config(Some(&cc), hypercloud_cloudprovider::Layout::External);
                    }
                }
            }

            /// Arbitrary lines (section headers, keys, quotes, escapes): never a panic.
            #[test]
            fn arbitrary_text_never_panics(lines in prop::collection::vec("(\\[[A-Za-z]{0,12}\\]?|[a-z-]{0,20} ?=? ?[ -~]{0,30})", 0..12)) {
                let _ = Config::parse(&lines.join("\n"), "c.conf");
            }
        }
    }

    hypercloud_cloudprovider::config_fuzz!(Config::parse, "fuzz.conf", mutated_full => FULL);
}
