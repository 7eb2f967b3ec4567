//! The azure provider's `--cloud-config`: upstream cloud-provider-azure's `azure.json`
//! (`pkg/provider` `Config` with its embedded `auth.AzureAuthConfig` and rate-limit config; the
//! in-tree `legacy-cloud-providers/azure` `Config` before it), and the cloud's endpoints
//! ([`Environment`]): fixed for the named public clouds, read from go-autorest's environment
//! file for Azure Stack.
//!
//! Upstream reads the file with `sigs.k8s.io/yaml` (YAML or JSON); hypercloud reads JSON only.
//! Keys match case-insensitively, as Go's `encoding/json` matches struct fields. Unknown keys,
//! and upstream keys hypercloud does not implement (`UNIMPLEMENTED`), are start-up warnings
//! naming them (kept in [`Config::warnings`]); wrong types, values out of range and missing
//! required keys are errors naming the key. Numbers where upstream reads `0` as "use the
//! default" keep that meaning here.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The environment variable naming the Azure Stack environment file (go-autorest's
/// `EnvironmentFilepathName`, read by its `EnvironmentFromName("AzureStackCloud")`).
pub const ENVIRONMENT_FILEPATH_VARIABLE: &str = "AZURE_ENVIRONMENT_FILEPATH";

// Upstream's defaults (cloud-provider-azure v1.1.0: pkg/consts/consts.go, pkg/provider/azure.go,
// pkg/provider/azure_wrap.go; the same values as the in-tree legacy provider of Kubernetes 1.20).
const DEFAULT_RATE_LIMIT_QPS: f64 = 1.0;
const DEFAULT_RATE_LIMIT_BUCKET: u32 = 5;
const DEFAULT_BACKOFF_RETRIES: u32 = 6;
const DEFAULT_BACKOFF_EXPONENT: f64 = 1.5;
const DEFAULT_BACKOFF_DURATION_SECS: u32 = 5;
const DEFAULT_BACKOFF_JITTER: f64 = 1.0;
const DEFAULT_MAXIMUM_LOAD_BALANCER_RULE_COUNT: u32 = 250;
const DEFAULT_AVAILABILITY_SET_NODES_CACHE_TTL_SECS: u32 = 900;
const DEFAULT_VM_CACHE_TTL_SECS: u32 = 60;
const DEFAULT_LOAD_BALANCER_CACHE_TTL_SECS: u32 = 120;
const DEFAULT_NSG_CACHE_TTL_SECS: u32 = 120;
const DEFAULT_ROUTE_TABLE_CACHE_TTL_SECS: u32 = 120;
const DEFAULT_ROUTE_UPDATE_WAITING_SECS: u32 = 30;

const CACHE_TTL_SECS: RangeInclusive<u32> = 1..=86_400;

/// How a value of an [`UNIMPLEMENTED`] key is checked, and which values are upstream's
/// default (not warned about: generated files often carry every key).
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// A string; empty, or one of these (case-insensitive), is the default.
    Text(&'static [&'static str]),
    /// A boolean; `false` is the default.
    Flag,
    /// An integer; `0` is the default.
    Whole,
    /// An object (per-client rate limits); any object is warned about.
    Object,
}

/// Upstream keys that are understood but not implemented: a value other than upstream's
/// default is a warning naming the key; a value of the wrong type is an error, as upstream.
const UNIMPLEMENTED: &[(&str, Shape, &str)] = &[
    (
        "primaryScaleSetName",
        Shape::Text(&[]),
        "scale sets (vmType vmss) are not implemented",
    ),
    (
        "putVMSSVMBatchSize",
        Shape::Whole,
        "scale sets (vmType vmss) are not implemented",
    ),
    (
        "vmssCacheTTLInSeconds",
        Shape::Whole,
        "scale sets (vmType vmss) are not implemented",
    ),
    (
        "vmssVirtualMachinesCacheTTLInSeconds",
        Shape::Whole,
        "scale sets (vmType vmss) are not implemented",
    ),
    (
        "availabilitySetsCacheTTLInSeconds",
        Shape::Whole,
        "it is a cache of scale-set clusters (vmType vmss), which are not implemented",
    ),
    (
        "enableMultipleStandardLoadBalancers",
        Shape::Flag,
        "one load balancer per cluster is implemented, not one per availability set",
    ),
    (
        "nodePoolsWithoutDedicatedSLB",
        Shape::Text(&[]),
        "multiple standard load balancers are not implemented",
    ),
    (
        "preConfiguredBackendPoolLoadBalancerTypes",
        Shape::Text(&[]),
        "pre-configured backend pools are not implemented",
    ),
    (
        "loadBalancerBackendPoolConfigurationType",
        Shape::Text(&["nodeIPConfiguration"]),
        "backend pools hold the nodes' IP configurations (upstream's default)",
    ),
    (
        "identitySystem",
        Shape::Text(&["azure_ad"]),
        "only Entra ID (azure_ad) is implemented, not ADFS",
    ),
    (
        "cloudConfigType",
        Shape::Text(&["file"]),
        "the config is read from --cloud-config only, never from the kube-system/azure-cloud-provider Secret",
    ),
    (
        "disableAzureStackCloud",
        Shape::Flag,
        "AzureStackCloud always reads its environment file",
    ),
    (
        "extendedLocationName",
        Shape::Text(&[]),
        "extended locations (edge zones) are not implemented",
    ),
    (
        "extendedLocationType",
        Shape::Text(&[]),
        "extended locations (edge zones) are not implemented",
    ),
    (
        "systemTags",
        Shape::Text(&[]),
        "system tags are not implemented",
    ),
    ("tagsMap", Shape::Object, "it is not implemented; use tags"),
    (
        "networkResourceTenantID",
        Shape::Text(&[]),
        "network resources in another tenant are not implemented; they are looked for in tenantId",
    ),
    (
        "networkResourceSubscriptionID",
        Shape::Text(&[]),
        "network resources in another subscription are not implemented; they are looked for in subscriptionId",
    ),
    (
        "useFederatedWorkloadIdentityExtension",
        Shape::Flag,
        "workload identity is not implemented",
    ),
    (
        "aadFederatedTokenFile",
        Shape::Text(&[]),
        "workload identity is not implemented",
    ),
    ("routeRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("subnetsRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("interfaceRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("routeTableRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("loadBalancerRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("publicIPAddressRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("securityGroupRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("virtualMachineRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("storageAccountRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("diskRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("snapshotRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    (
        "virtualMachineScaleSetRateLimit",
        Shape::Object,
        PER_CLIENT_RATE_LIMIT,
    ),
    ("virtualMachineSizesRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("availabilitySetRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
    ("attachDetachDiskRateLimit", Shape::Object, PER_CLIENT_RATE_LIMIT),
];

const PER_CLIENT_RATE_LIMIT: &str =
    "per-client rate limits are not implemented; cloudProviderRateLimit* applies to every call";

/// An Azure cloud, named by `cloud` (case-insensitive, go-autorest's names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cloud {
    /// `AzurePublicCloud` (also `AzureCloud`); the default when `cloud` is empty.
    #[default]
    Public,
    /// `AzureUSGovernmentCloud` (also `AzureUSGovernment`).
    UsGovernment,
    /// `AzureChinaCloud`.
    China,
    /// `AzureGermanCloud`.
    German,
    /// `AzureStackCloud`: endpoints from the file named by [`ENVIRONMENT_FILEPATH_VARIABLE`].
    Stack,
}

impl Cloud {
    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Public => "AzurePublicCloud",
            Cloud::UsGovernment => "AzureUSGovernmentCloud",
            Cloud::China => "AzureChinaCloud",
            Cloud::German => "AzureGermanCloud",
            Cloud::Stack => "AzureStackCloud",
        }
    }

    /// The cloud of a name, case-insensitive; the aliases are go-autorest's.
    pub fn from_name(name: &str) -> Option<Cloud> {
        [
            ("AzurePublicCloud", Cloud::Public),
            ("AzureCloud", Cloud::Public),
            ("AzureUSGovernmentCloud", Cloud::UsGovernment),
            ("AzureUSGovernment", Cloud::UsGovernment),
            ("AzureChinaCloud", Cloud::China),
            ("AzureGermanCloud", Cloud::German),
            ("AzureStackCloud", Cloud::Stack),
        ]
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        .map(|(_, cloud)| cloud)
    }
}

/// The endpoints of a cloud: the parts of go-autorest's `azure.Environment` the provider uses.
/// Every endpoint is an absolute http(s) URL ending in `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The environment's name (`AzurePublicCloud`, or the file's `name`).
    pub name: String,
    /// Azure Resource Manager (`resourceManagerEndpoint`).
    pub resource_manager_endpoint: String,
    /// The Entra ID (Azure AD) login endpoint (`activeDirectoryEndpoint`).
    pub active_directory_endpoint: String,
    /// `serviceManagementEndpoint`: the resource upstream asks its tokens for.
    pub service_management_endpoint: Option<String>,
    /// `tokenAudience`: ARM's audience.
    pub token_audience: Option<String>,
}

impl Environment {
    /// The fixed endpoints of a named cloud (go-autorest `environments.go`); `None` for
    /// [`Cloud::Stack`], whose endpoints come from a file.
    pub fn of_cloud(cloud: Cloud) -> Option<Environment> {
        let (rm, ad, sm) = match cloud {
            Cloud::Public => (
                "https://management.azure.com/",
                "https://login.microsoftonline.com/",
                "https://management.core.windows.net/",
            ),
            Cloud::UsGovernment => (
                "https://management.usgovcloudapi.net/",
                "https://login.microsoftonline.us/",
                "https://management.core.usgovcloudapi.net/",
            ),
            Cloud::China => (
                "https://management.chinacloudapi.cn/",
                "https://login.chinacloudapi.cn/",
                "https://management.core.chinacloudapi.cn/",
            ),
            Cloud::German => (
                "https://management.microsoftazure.de/",
                "https://login.microsoftonline.de/",
                "https://management.core.cloudapi.de/",
            ),
            Cloud::Stack => return None,
        };
        Some(Environment {
            name: cloud.name().into(),
            resource_manager_endpoint: rm.into(),
            active_directory_endpoint: ad.into(),
            service_management_endpoint: Some(sm.into()),
            // go-autorest's tokenAudience of the fixed clouds is their ARM endpoint.
            token_audience: Some(rm.into()),
        })
    }

    /// Reads a go-autorest environment file (the JSON of `azure.Environment`).
    pub fn from_file(path: &Path) -> Result<Environment> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadEnvironmentFile {
            path: path.display().to_string(),
            source,
        })?;
        Environment::parse(&text, &path.display().to_string())
    }

    /// Parses the JSON of go-autorest's `azure.Environment`. `resourceManagerEndpoint` and
    /// `activeDirectoryEndpoint` are required; keys the provider does not use are not checked.
    pub fn parse(text: &str, origin: &str) -> Result<Environment> {
        Self::parse_fields(text).map_err(|message| Error::ParseEnvironment {
            origin: origin.into(),
            message,
        })
    }

    fn parse_fields(text: &str) -> std::result::Result<Environment, String> {
        let mut f = Fields::parse(text)?;
        let mut url = |key: &str| -> std::result::Result<Option<String>, String> {
            f.text(key)?
                .map(|v| endpoint(&v).map_err(|m| format!("{key}: {m}")))
                .transpose()
        };
        let resource_manager_endpoint =
            url("resourceManagerEndpoint")?.ok_or("resourceManagerEndpoint is required")?;
        let active_directory_endpoint =
            url("activeDirectoryEndpoint")?.ok_or("activeDirectoryEndpoint is required")?;
        let service_management_endpoint = url("serviceManagementEndpoint")?;
        let token_audience = url("tokenAudience")?;
        let name = f
            .text("name")?
            .unwrap_or_else(|| Cloud::Stack.name().into());
        Ok(Environment {
            name,
            resource_manager_endpoint,
            active_directory_endpoint,
            service_management_endpoint,
            token_audience,
        })
    }

    /// The resource access tokens are asked for: `serviceManagementEndpoint`, as upstream
    /// (`GetServicePrincipalToken`); when a file has none, `tokenAudience`, then ARM itself.
    pub fn token_resource(&self) -> &str {
        self.service_management_endpoint
            .as_deref()
            .or(self.token_audience.as_deref())
            .unwrap_or(&self.resource_manager_endpoint)
    }
}

/// `vmType`: the kind of the cluster's VMs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VmType {
    /// `standard`: single VMs, optionally in availability sets (upstream's in-tree default).
    /// Upstream's `vmss` and `vmssflex` are refused: scale sets are not implemented.
    #[default]
    Standard,
}

/// `loadBalancerSku`: the SKU of load balancers and public IPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadBalancerSku {
    /// `basic` (upstream's in-tree default).
    #[default]
    Basic,
    /// `standard`.
    Standard,
}

/// How the provider authenticates to Entra ID: exactly one way, chosen as upstream does
/// (managed identity, then the client secret, then the client certificate). `Debug` does not
/// print secrets.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `useManagedIdentityExtension`: the VM's managed identity, from the instance metadata
    /// service.
    ManagedIdentity {
        /// `userAssignedIdentityID`: the client ID of a user-assigned identity; `None`: the
        /// system-assigned one.
        user_assigned_identity_id: Option<String>,
    },
    /// `aadClientId` with `aadClientSecret`.
    ClientSecret {
        /// `aadClientId`.
        client_id: String,
        /// `aadClientSecret`.
        secret: String,
    },
    /// `aadClientId` with `aadClientCertPath` (a PKCS#12 file, read when tokens are asked for).
    ClientCertificate {
        /// `aadClientId`.
        client_id: String,
        /// `aadClientCertPath`.
        cert_path: PathBuf,
        /// `aadClientCertPassword`, when the file has one.
        password: Option<String>,
    },
}

const REDACTED: &str = "<redacted>";

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::ManagedIdentity {
                user_assigned_identity_id,
            } => f
                .debug_struct("ManagedIdentity")
                .field("user_assigned_identity_id", user_assigned_identity_id)
                .finish(),
            Credential::ClientSecret { client_id, .. } => f
                .debug_struct("ClientSecret")
                .field("client_id", client_id)
                .field("secret", &REDACTED)
                .finish(),
            Credential::ClientCertificate {
                client_id,
                cert_path,
                password,
            } => f
                .debug_struct("ClientCertificate")
                .field("client_id", client_id)
                .field("cert_path", cert_path)
                .field("password", &password.as_ref().map(|_| REDACTED))
                .finish(),
        }
    }
}

/// `cloudProviderBackoff*`: retries of failed ARM calls (upstream's `wait.Backoff`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// `cloudProviderBackoffRetries`: attempts (default 6; 1 to 100).
    pub retries: u32,
    /// `cloudProviderBackoffExponent`: the factor between waits (default 1.5; 1 to 10).
    pub exponent: f64,
    /// `cloudProviderBackoffDuration`: the first wait (default 5 s; 1 s to 1 h).
    pub duration: Duration,
    /// `cloudProviderBackoffJitter` (default 1.0; 0 to 10).
    pub jitter: f64,
}

/// `cloudProviderRateLimit*`: the client-side rate limit of ARM calls, one token bucket for
/// reads and one for writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// `cloudProviderRateLimitQPS`: reads per second (default 1; up to 10000).
    pub qps: f64,
    /// `cloudProviderRateLimitBucket`: the read burst (default 5; 1 to 100000).
    pub bucket: u32,
    /// `cloudProviderRateLimitQPSWrite` (default: the read QPS; up to 10000).
    pub qps_write: f64,
    /// `cloudProviderRateLimitBucketWrite` (default: the read bucket; 1 to 100000).
    pub bucket_write: u32,
}

/// `*CacheTTLInSeconds`: how long ARM answers are cached (1 s to 1 day; 0: the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheTtls {
    /// `availabilitySetNodesCacheTTLInSeconds` (default 900 s).
    pub availability_set_nodes: Duration,
    /// `vmCacheTTLInSeconds` (default 60 s).
    pub vm: Duration,
    /// `loadBalancerCacheTTLInSeconds` (default 120 s).
    pub load_balancer: Duration,
    /// `nsgCacheTTLInSeconds` (default 120 s).
    pub nsg: Duration,
    /// `routeTableCacheTTLInSeconds` (default 120 s).
    pub route_table: Duration,
}

/// A parsed `azure.json`, with upstream's defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `cloud` (default `AzurePublicCloud`).
    pub cloud: Cloud,
    /// `tenantId`; required unless the credential is a managed identity.
    pub tenant_id: Option<String>,
    /// `subscriptionId` (required).
    pub subscription_id: String,
    /// `resourceGroup` (required), lower-cased as upstream does (ARM answers in either case).
    pub resource_group: String,
    /// `location` (required), e.g. `westeurope`.
    pub location: String,
    /// `vnetName`: the cluster's virtual network.
    pub vnet_name: Option<String>,
    /// `vnetResourceGroup` (default: `resourceGroup`).
    pub vnet_resource_group: String,
    /// `subnetName`: the cluster's subnet.
    pub subnet_name: Option<String>,
    /// `securityGroupName`: the network security group of the cluster's subnet.
    pub security_group_name: Option<String>,
    /// `securityGroupResourceGroup` (default: `resourceGroup`).
    pub security_group_resource_group: String,
    /// `routeTableName`: the route table of the cluster's subnet.
    pub route_table_name: Option<String>,
    /// `routeTableResourceGroup` (default: `resourceGroup`).
    pub route_table_resource_group: String,
    /// `primaryAvailabilitySetName`: only this availability set's nodes join load balancers.
    pub primary_availability_set_name: Option<String>,
    /// `vmType` (default and only value `standard`).
    pub vm_type: VmType,
    /// `loadBalancerSku` (default `basic`; case-insensitive).
    pub load_balancer_sku: LoadBalancerSku,
    /// `loadBalancerName`: the load balancer's name (default: the cluster name, chosen later).
    pub load_balancer_name: Option<String>,
    /// `loadBalancerResourceGroup` (default: `resourceGroup`).
    pub load_balancer_resource_group: String,
    /// `excludeMasterFromStandardLB` (default true; read with the standard SKU only).
    pub exclude_master_from_standard_lb: bool,
    /// `disableOutboundSNAT` (default false; true only with the standard SKU, as upstream).
    pub disable_outbound_snat: bool,
    /// `maximumLoadBalancerRuleCount` (default 250, Azure's limit; 1 to 1000).
    pub maximum_load_balancer_rule_count: u32,
    /// `aadClientId`, `aadClientSecret`, `aadClientCertPath`, `aadClientCertPassword`,
    /// `useManagedIdentityExtension`, `userAssignedIdentityID`.
    pub credential: Credential,
    /// `useInstanceMetadata`: ask the instance metadata service about the local VM (default
    /// false).
    pub use_instance_metadata: bool,
    /// `cloudProviderBackoff`: retries of failed calls; `None` (the default): one attempt.
    pub backoff: Option<Backoff>,
    /// `cloudProviderRateLimit`: the client-side rate limit; `None` (the default): none.
    pub rate_limit: Option<RateLimit>,
    /// `*CacheTTLInSeconds`.
    pub cache_ttls: CacheTtls,
    /// `userAgent`: appended to the User-Agent of ARM calls (customer usage attribution).
    pub user_agent: Option<String>,
    /// `tags` (`k1=v1,k2=v2`): put on the load balancers, security groups and route tables
    /// the provider manages.
    pub tags: BTreeMap<String, String>,
    /// `resourceManagerEndpoint`: replaces the cloud's ARM endpoint (ends in `/`).
    pub resource_manager_endpoint: Option<String>,
    /// `routeUpdateWaitingInSeconds`: the wait after a route update before it is trusted
    /// (default 30 s; 1 s to 1 h).
    pub route_update_waiting: Duration,
    /// hypercloud's `hypercloudInstanceMetadataEndpoint` (not upstream's): where the instance
    /// metadata service answers; default `$AZURE_POD_IDENTITY_AUTHORITY_HOST` (as
    /// azure-identity reads it), else `http://169.254.169.254/`, upstream's fixed address.
    pub instance_metadata_endpoint: Option<String>,
    /// hypercloud's `hypercloudInstanceMetadataSourceAddress` (not upstream's): the local
    /// address instance metadata requests come from. The local cloud's service, like Azure's,
    /// knows a VM by the address that asks; on one machine each node names its own.
    pub instance_metadata_source_address: Option<std::net::IpAddr>,
    /// Where the config came from, for messages.
    pub origin: String,
    /// Warnings logged while parsing.
    pub warnings: Vec<String>,
}

impl Config {
    /// Parses `azure.json`; warnings are logged and kept. The environment is not read here:
    /// see [`Config::resolve_environment`].
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        Self::parse_fields(text, origin).map_err(|message| Error::ParseCloudConfig {
            origin: origin.into(),
            message,
        })
    }

    fn parse_fields(text: &str, origin: &str) -> std::result::Result<Config, String> {
        let mut f = Fields::parse(text).map_err(|m| {
            format!("{m} (hypercloud reads azure.json as JSON only; upstream also accepts YAML)")
        })?;
        let mut w = Warnings {
            origin,
            list: Vec::new(),
        };

        // Read every key first, so that unknown keys (perhaps a misspelt required one) are
        // warned about before a missing key is an error.
        let cloud = match f.text("cloud")? {
            None => Cloud::Public,
            Some(name) => Cloud::from_name(&name).ok_or_else(|| {
                format!(
                    "cloud {name:?} is not one of AzurePublicCloud, AzureChinaCloud, \
                     AzureUSGovernmentCloud, AzureGermanCloud, AzureStackCloud"
                )
            })?,
        };
        let tenant_id = f.text("tenantId")?;
        let subscription_id = f.text("subscriptionId")?;
        let resource_group = f.text("resourceGroup")?.map(|g| g.to_lowercase());
        let location = f.text("location")?;
        let vnet_name = f.text("vnetName")?;
        let vnet_resource_group = f.text("vnetResourceGroup")?;
        let subnet_name = f.text("subnetName")?;
        let security_group_name = f.text("securityGroupName")?;
        let security_group_resource_group = f.text("securityGroupResourceGroup")?;
        let route_table_name = f.text("routeTableName")?;
        let route_table_resource_group = f.text("routeTableResourceGroup")?;
        let primary_availability_set_name = f.text("primaryAvailabilitySetName")?;
        let vm_type = match f.text("vmType")?.map(|t| t.to_ascii_lowercase()).as_deref() {
            None | Some("standard") => VmType::Standard,
            Some(t @ ("vmss" | "vmssflex")) => {
                return Err(format!(
                    "vmType {t:?}: scale sets are not implemented by hypercloud (only \"standard\")"
                ))
            }
            Some(t) => return Err(format!("vmType {t:?}: want \"standard\"")),
        };
        let load_balancer_sku = match f
            .text("loadBalancerSku")?
            .map(|s| s.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("basic") => LoadBalancerSku::Basic,
            Some("standard") => LoadBalancerSku::Standard,
            Some(s) => {
                return Err(format!(
                    "loadBalancerSku {s:?}: want \"basic\" or \"standard\""
                ))
            }
        };
        let load_balancer_name = f.text("loadBalancerName")?;
        let load_balancer_resource_group = f.text("loadBalancerResourceGroup")?;
        let exclude_master = f.flag("excludeMasterFromStandardLB")?;
        let disable_outbound_snat = f.flag("disableOutboundSNAT")?;
        let maximum_load_balancer_rule_count = f
            .whole("maximumLoadBalancerRuleCount", 1..=1000)?
            .unwrap_or(DEFAULT_MAXIMUM_LOAD_BALANCER_RULE_COUNT);

        let client_id = f.text("aadClientId")?;
        let client_secret = f.secret("aadClientSecret")?;
        let cert_path = f.text("aadClientCertPath")?;
        let cert_password = f.secret("aadClientCertPassword")?;
        let managed_identity = f.flag("useManagedIdentityExtension")?.unwrap_or(false);
        let user_assigned_identity_id = f.text("userAssignedIdentityID")?;
        let use_instance_metadata = f.flag("useInstanceMetadata")?.unwrap_or(false);

        let backoff_enabled = f.flag("cloudProviderBackoff")?.unwrap_or(false);
        let backoff_keys = [
            "cloudProviderBackoffRetries",
            "cloudProviderBackoffExponent",
            "cloudProviderBackoffDuration",
            "cloudProviderBackoffJitter",
        ];
        let retries = f.whole(backoff_keys[0], 1..=100)?;
        let exponent = f.fraction(backoff_keys[1], 1.0..=10.0)?;
        let duration = f.whole(backoff_keys[2], 1..=3600)?;
        let jitter = f.fraction(backoff_keys[3], 0.0..=10.0)?;
        let backoff_set = [
            retries.is_some(),
            exponent.is_some(),
            duration.is_some(),
            jitter.is_some(),
        ];

        let rate_limit_enabled = f.flag("cloudProviderRateLimit")?.unwrap_or(false);
        let rate_limit_keys = [
            "cloudProviderRateLimitQPS",
            "cloudProviderRateLimitBucket",
            "cloudProviderRateLimitQPSWrite",
            "cloudProviderRateLimitBucketWrite",
        ];
        let qps = f.fraction(rate_limit_keys[0], 0.0..=10_000.0)?;
        let bucket = f.whole(rate_limit_keys[1], 1..=100_000)?;
        let qps_write = f.fraction(rate_limit_keys[2], 0.0..=10_000.0)?;
        let bucket_write = f.whole(rate_limit_keys[3], 1..=100_000)?;
        let rate_limit_set = [
            qps.is_some(),
            bucket.is_some(),
            qps_write.is_some(),
            bucket_write.is_some(),
        ];

        let mut ttl = |key: &str, default: u32| -> std::result::Result<Duration, String> {
            let secs = f.whole(key, CACHE_TTL_SECS)?.unwrap_or(default);
            Ok(Duration::from_secs(secs.into()))
        };
        let cache_ttls = CacheTtls {
            availability_set_nodes: ttl(
                "availabilitySetNodesCacheTTLInSeconds",
                DEFAULT_AVAILABILITY_SET_NODES_CACHE_TTL_SECS,
            )?,
            vm: ttl("vmCacheTTLInSeconds", DEFAULT_VM_CACHE_TTL_SECS)?,
            load_balancer: ttl(
                "loadBalancerCacheTTLInSeconds",
                DEFAULT_LOAD_BALANCER_CACHE_TTL_SECS,
            )?,
            nsg: ttl("nsgCacheTTLInSeconds", DEFAULT_NSG_CACHE_TTL_SECS)?,
            route_table: ttl(
                "routeTableCacheTTLInSeconds",
                DEFAULT_ROUTE_TABLE_CACHE_TTL_SECS,
            )?,
        };
        let user_agent = f.text("userAgent")?;
        let instance_metadata_endpoint = f
            .text("hypercloudInstanceMetadataEndpoint")?
            .map(|e| endpoint(&e).map_err(|m| format!("hypercloudInstanceMetadataEndpoint: {m}")))
            .transpose()?;
        let instance_metadata_source_address = f
            .text("hypercloudInstanceMetadataSourceAddress")?
            .map(|a| {
                a.trim().parse::<std::net::IpAddr>().map_err(|_| {
                    format!("hypercloudInstanceMetadataSourceAddress: {a:?} is not an IP address")
                })
            })
            .transpose()?;
        let tags = match f.text("tags")? {
            Some(t) => parse_tags(&t, &mut w)?,
            None => BTreeMap::new(),
        };
        let resource_manager_endpoint = f
            .text("resourceManagerEndpoint")?
            .map(|e| endpoint(&e).map_err(|m| format!("resourceManagerEndpoint: {m}")))
            .transpose()?;
        let disable_availability_set_nodes =
            f.flag("disableAvailabilitySetNodes")?.unwrap_or(false);
        let route_update_waiting = Duration::from_secs(
            f.whole("routeUpdateWaitingInSeconds", 1..=3600)?
                .unwrap_or(DEFAULT_ROUTE_UPDATE_WAITING_SECS)
                .into(),
        );

        for (key, shape, why) in UNIMPLEMENTED {
            let set = match shape {
                Shape::Text(defaults) => f
                    .text(key)?
                    .is_some_and(|v| !defaults.iter().any(|d| d.eq_ignore_ascii_case(&v))),
                Shape::Flag => f.flag(key)?.unwrap_or(false),
                Shape::Whole => f.take::<i64>(key)?.is_some_and(|v| v != 0),
                Shape::Object => f.take::<Map<String, Value>>(key)?.is_some(),
            };
            if set {
                w.warn(format!(
                    "{key} is not implemented by hypercloud and is ignored: {why}"
                ));
            }
        }
        for key in f.unread() {
            w.warn(format!("unknown key {key:?} ignored"));
        }

        // Cross-key checks and defaults.
        let required = |key: &str, v: Option<String>| v.ok_or_else(|| format!("{key} is required"));
        let subscription_id = required("subscriptionId", subscription_id)?;
        let resource_group = required("resourceGroup", resource_group)?;
        let location = required("location", location)?;

        let credential = if managed_identity {
            for (key, set) in [
                ("aadClientSecret", client_secret.is_some()),
                ("aadClientCertPath", cert_path.is_some()),
                ("aadClientCertPassword", cert_password.is_some()),
            ] {
                if set {
                    w.warn(format!("{key} is ignored: useManagedIdentityExtension takes precedence, as upstream"));
                }
            }
            Credential::ManagedIdentity {
                user_assigned_identity_id: user_assigned_identity_id.clone(),
            }
        } else if let Some(secret) = client_secret {
            for (key, set) in [
                ("aadClientCertPath", cert_path.is_some()),
                ("aadClientCertPassword", cert_password.is_some()),
            ] {
                if set {
                    w.warn(format!(
                        "{key} is ignored: aadClientSecret takes precedence, as upstream"
                    ));
                }
            }
            Credential::ClientSecret {
                client_id: client_id.ok_or("aadClientSecret needs aadClientId")?,
                secret,
            }
        } else if let Some(path) = cert_path {
            Credential::ClientCertificate {
                client_id: client_id.ok_or("aadClientCertPath needs aadClientId")?,
                cert_path: path.into(),
                password: cert_password,
            }
        } else {
            return Err(
                "no credentials: set aadClientId with aadClientSecret or aadClientCertPath, \
                        or useManagedIdentityExtension"
                    .into(),
            );
        };
        if user_assigned_identity_id.is_some() && !managed_identity {
            w.warn("userAssignedIdentityID is ignored without useManagedIdentityExtension, as upstream".into());
        }
        if tenant_id.is_none() && !managed_identity {
            return Err("tenantId is required (unless useManagedIdentityExtension is true)".into());
        }

        if disable_outbound_snat == Some(true) && load_balancer_sku != LoadBalancerSku::Standard {
            return Err("disableOutboundSNAT is only allowed with loadBalancerSku \"standard\", as upstream".into());
        }
        if disable_availability_set_nodes {
            return Err(
                "disableAvailabilitySetNodes: true is only allowed with vmType \"vmss\" \
                        (as upstream), which hypercloud does not implement"
                    .into(),
            );
        }

        let backoff = if backoff_enabled {
            Some(Backoff {
                retries: retries.unwrap_or(DEFAULT_BACKOFF_RETRIES),
                exponent: exponent.unwrap_or(DEFAULT_BACKOFF_EXPONENT),
                duration: Duration::from_secs(
                    duration.unwrap_or(DEFAULT_BACKOFF_DURATION_SECS).into(),
                ),
                jitter: jitter.unwrap_or(DEFAULT_BACKOFF_JITTER),
            })
        } else {
            for (key, set) in backoff_keys.iter().zip(backoff_set) {
                if set {
                    w.warn(format!("{key} is ignored without cloudProviderBackoff: true (one attempt per call, as upstream)"));
                }
            }
            None
        };
        let rate_limit = if rate_limit_enabled {
            let qps = qps.unwrap_or(DEFAULT_RATE_LIMIT_QPS);
            let bucket = bucket.unwrap_or(DEFAULT_RATE_LIMIT_BUCKET);
            Some(RateLimit {
                qps,
                bucket,
                qps_write: qps_write.unwrap_or(qps),
                bucket_write: bucket_write.unwrap_or(bucket),
            })
        } else {
            for (key, set) in rate_limit_keys.iter().zip(rate_limit_set) {
                if set {
                    w.warn(format!(
                        "{key} is ignored without cloudProviderRateLimit: true"
                    ));
                }
            }
            None
        };
        if resource_manager_endpoint.is_some() {
            w.warn(
                "resourceManagerEndpoint replaces the cloud's ARM endpoint only; upstream also \
                 discovers the login endpoint and token audience from its metadata/endpoints, \
                 hypercloud takes them from the cloud (or the AzureStackCloud environment file)"
                    .into(),
            );
        }

        Ok(Config {
            cloud,
            tenant_id,
            subscription_id,
            vnet_resource_group: vnet_resource_group.unwrap_or_else(|| resource_group.clone()),
            security_group_resource_group: security_group_resource_group
                .unwrap_or_else(|| resource_group.clone()),
            route_table_resource_group: route_table_resource_group
                .unwrap_or_else(|| resource_group.clone()),
            load_balancer_resource_group: load_balancer_resource_group
                .unwrap_or_else(|| resource_group.clone()),
            resource_group,
            location,
            vnet_name,
            subnet_name,
            security_group_name,
            route_table_name,
            primary_availability_set_name,
            vm_type,
            load_balancer_sku,
            load_balancer_name,
            exclude_master_from_standard_lb: exclude_master.unwrap_or(true),
            disable_outbound_snat: disable_outbound_snat.unwrap_or(false),
            maximum_load_balancer_rule_count,
            credential,
            use_instance_metadata,
            backoff,
            rate_limit,
            cache_ttls,
            user_agent,
            tags,
            resource_manager_endpoint,
            route_update_waiting,
            instance_metadata_endpoint,
            instance_metadata_source_address,
            origin: origin.into(),
            warnings: w.list,
        })
    }

    /// The cloud's endpoints: fixed for the named clouds; for `AzureStackCloud` read from the
    /// file named by `lookup(AZURE_ENVIRONMENT_FILEPATH)` with `read`, as go-autorest does
    /// (upstream only skips the file when `resourceManagerEndpoint` is set, by asking that
    /// endpoint instead, which hypercloud does not). `resourceManagerEndpoint` then replaces
    /// the ARM endpoint.
    pub fn resolve_environment(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> Result<Environment> {
        let mut env = match Environment::of_cloud(self.cloud) {
            Some(env) => env,
            None => {
                let path = lookup(ENVIRONMENT_FILEPATH_VARIABLE)
                    .filter(|p| !p.trim().is_empty())
                    .ok_or(Error::EnvironmentFileUnset {
                        cloud: self.cloud.name(),
                        variable: ENVIRONMENT_FILEPATH_VARIABLE,
                    })?;
                let text = read(Path::new(&path)).map_err(|source| Error::ReadEnvironmentFile {
                    path: path.clone(),
                    source,
                })?;
                Environment::parse(&text, &path)?
            }
        };
        if let Some(rm) = &self.resource_manager_endpoint {
            env.resource_manager_endpoint.clone_from(rm);
        }
        Ok(env)
    }

    /// [`Config::resolve_environment`] with the process's environment and file system.
    pub fn environment(&self) -> Result<Environment> {
        self.resolve_environment(|k| std::env::var(k).ok(), |p| std::fs::read_to_string(p))
    }
}

/// Warnings logged and kept, each prefixed with the config's origin.
struct Warnings<'a> {
    origin: &'a str,
    list: Vec<String>,
}

impl Warnings<'_> {
    fn warn(&mut self, message: String) {
        let message = format!("{}: {message}", self.origin);
        tracing::warn!("{message}");
        self.list.push(message);
    }
}

/// The members of a JSON object, read one key at a time so that every error names its key.
struct Fields {
    entries: Vec<Entry>,
}

struct Entry {
    key: String,
    value: Value,
    read: bool,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Fields {
    fn parse(text: &str) -> std::result::Result<Fields, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(map) = value else {
            return Err(format!(
                "not a JSON object: the top level is {}",
                kind(&value)
            ));
        };
        Ok(Fields {
            entries: map
                .into_iter()
                .map(|(key, value)| Entry {
                    key,
                    value,
                    read: false,
                })
                .collect(),
        })
    }

    /// The value of `key` (matched case-insensitively, as Go's encoding/json); `None` when
    /// absent or null.
    fn take<T: DeserializeOwned>(&mut self, key: &str) -> std::result::Result<Option<T>, String> {
        let mut found: Option<usize> = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.key.eq_ignore_ascii_case(key) {
                if let Some(j) = found {
                    return Err(format!(
                        "{key} is given twice (as {:?} and {:?})",
                        self.entries[j].key, e.key
                    ));
                }
                found = Some(i);
            }
        }
        let Some(e) = found.and_then(|i| self.entries.get_mut(i)) else {
            return Ok(None);
        };
        e.read = true;
        if e.value.is_null() {
            return Ok(None);
        }
        T::deserialize(&e.value)
            .map(Some)
            .map_err(|err| format!("{key}: {err}"))
    }

    /// A string, trimmed; empty is absent.
    fn text(&mut self, key: &str) -> std::result::Result<Option<String>, String> {
        Ok(self
            .take::<String>(key)?
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty()))
    }

    /// A secret, verbatim; empty is absent.
    fn secret(&mut self, key: &str) -> std::result::Result<Option<String>, String> {
        Ok(self.take::<String>(key)?.filter(|v| !v.is_empty()))
    }

    fn flag(&mut self, key: &str) -> std::result::Result<Option<bool>, String> {
        self.take::<bool>(key)
    }

    /// An integer in `range`; `0` is absent (upstream's "use the default").
    fn whole(
        &mut self,
        key: &str,
        range: RangeInclusive<u32>,
    ) -> std::result::Result<Option<u32>, String> {
        match self.take::<i64>(key)? {
            None | Some(0) => Ok(None),
            Some(v) => u32::try_from(v)
                .ok()
                .filter(|v| range.contains(v))
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "{key}: {v} is out of range ({} to {}, or 0 for the default)",
                        range.start(),
                        range.end()
                    )
                }),
        }
    }

    /// A number in `range`; `0` is absent (upstream's "use the default").
    fn fraction(
        &mut self,
        key: &str,
        range: RangeInclusive<f64>,
    ) -> std::result::Result<Option<f64>, String> {
        match self.take::<f64>(key)? {
            None | Some(0.0) => Ok(None),
            Some(v) if range.contains(&v) => Ok(Some(v)),
            Some(v) => Err(format!(
                "{key}: {v} is out of range ({} to {}, or 0 for the default)",
                range.start(),
                range.end()
            )),
        }
    }

    /// Keys not read.
    fn unread(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|e| !e.read)
            .map(|e| e.key.as_str())
    }
}

/// Upstream's `tags`: `k1=v1,k2=v2`, spaces around keys and values trimmed. An entry with an
/// empty value is skipped with a warning, as upstream; other malformed entries are errors
/// (upstream skips them).
fn parse_tags(
    text: &str,
    w: &mut Warnings<'_>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for entry in text.split(',').filter(|e| !e.trim().is_empty()) {
        let mut parts = entry.split('=');
        let (Some(k), Some(v), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("tags: {:?} is not key=value (one =)", entry.trim()));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(format!("tags: {:?} has an empty key", entry.trim()));
        }
        if v.is_empty() {
            w.warn(format!(
                "tags: {k:?} has an empty value and is skipped, as upstream"
            ));
            continue;
        }
        tags.insert(k.to_owned(), v.to_owned());
    }
    Ok(tags)
}

/// An absolute http(s) URL, ending in `/`.
fn endpoint(v: &str) -> std::result::Result<String, String> {
    let url = v.trim();
    let rest = ["https://", "http://"].iter().find_map(|scheme| {
        url.get(..scheme.len())
            .filter(|head| head.eq_ignore_ascii_case(scheme))
            .and_then(|_| url.get(scheme.len()..))
    });
    match rest {
        Some(rest)
            if !rest.is_empty() && !rest.starts_with('/') && !url.contains(char::is_whitespace) =>
        {
            let mut url = url.to_owned();
            if !url.ends_with('/') {
                url.push('/');
            }
            Ok(url)
        }
        _ => Err(format!("{url:?} is not an absolute http(s) URL")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every key of the brief, as an aks-engine-style file writes them (unimplemented ones at
    /// upstream's defaults).
    const FULL: &str = r#"{
        "cloud": "AzurePublicCloud",
        "tenantId": "72f988bf-0000-0000-0000-2d7cd011db47",
        "subscriptionId": "3f1c0000-0000-0000-0000-000000000001",
        "resourceGroup": "Kube-RG",
        "location": "westeurope",
        "vnetName": "kube-vnet",
        "vnetResourceGroup": "net-rg",
        "subnetName": "kube-subnet",
        "securityGroupName": "kube-nsg",
        "securityGroupResourceGroup": "nsg-rg",
        "routeTableName": "kube-rt",
        "routeTableResourceGroup": "rt-rg",
        "primaryAvailabilitySetName": "agentpool-as",
        "primaryScaleSetName": "",
        "vmType": "standard",
        "loadBalancerSku": "Standard",
        "loadBalancerName": "kube-lb",
        "loadBalancerResourceGroup": "lb-rg",
        "excludeMasterFromStandardLB": false,
        "disableOutboundSNAT": true,
        "maximumLoadBalancerRuleCount": 148,
        "aadClientId": "c0ffee00-0000-0000-0000-000000000002",
        "aadClientSecret": "s3cr3t-VALUE",
        "aadClientCertPath": "",
        "aadClientCertPassword": "",
        "useManagedIdentityExtension": false,
        "userAssignedIdentityID": "",
        "useInstanceMetadata": true,
        "cloudProviderBackoff": true,
        "cloudProviderBackoffRetries": 3,
        "cloudProviderBackoffExponent": 2,
        "cloudProviderBackoffDuration": 7,
        "cloudProviderBackoffJitter": 0.5,
        "cloudProviderRateLimit": true,
        "cloudProviderRateLimitQPS": 10,
        "cloudProviderRateLimitBucket": 100,
        "cloudProviderRateLimitQPSWrite": 2.5,
        "cloudProviderRateLimitBucketWrite": 20,
        "availabilitySetNodesCacheTTLInSeconds": 300,
        "vmCacheTTLInSeconds": 30,
        "loadBalancerCacheTTLInSeconds": 40,
        "nsgCacheTTLInSeconds": 50,
        "routeTableCacheTTLInSeconds": 60,
        "putVMSSVMBatchSize": 0,
        "enableMultipleStandardLoadBalancers": false,
        "userAgent": "hypercloud-test",
        "tags": "team=infra, env = prod",
        "identitySystem": "azure_ad",
        "resourceManagerEndpoint": "",
        "disableAvailabilitySetNodes": false,
        "routeUpdateWaitingInSeconds": 10
    }"#;

    fn minimal(extra: &str) -> String {
        format!(
            r#"{{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg",
                "location": "eastus", "aadClientId": "id", "aadClientSecret": "pw"{extra}}}"#
        )
    }

    fn err(text: &str) -> String {
        Config::parse(text, "azure.json").unwrap_err().to_string()
    }

    #[test]
    fn full_upstream_file_parses_every_key() {
        let c = Config::parse(FULL, "azure.json").unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.cloud, Cloud::Public);
        assert_eq!(
            c.tenant_id.as_deref(),
            Some("72f988bf-0000-0000-0000-2d7cd011db47")
        );
        assert_eq!(c.subscription_id, "3f1c0000-0000-0000-0000-000000000001");
        assert_eq!(c.resource_group, "kube-rg");
        assert_eq!(c.location, "westeurope");
        assert_eq!(c.vnet_name.as_deref(), Some("kube-vnet"));
        assert_eq!(c.vnet_resource_group, "net-rg");
        assert_eq!(c.subnet_name.as_deref(), Some("kube-subnet"));
        assert_eq!(c.security_group_name.as_deref(), Some("kube-nsg"));
        assert_eq!(c.security_group_resource_group, "nsg-rg");
        assert_eq!(c.route_table_name.as_deref(), Some("kube-rt"));
        assert_eq!(c.route_table_resource_group, "rt-rg");
        assert_eq!(
            c.primary_availability_set_name.as_deref(),
            Some("agentpool-as")
        );
        assert_eq!(c.vm_type, VmType::Standard);
        assert_eq!(c.load_balancer_sku, LoadBalancerSku::Standard);
        assert_eq!(c.load_balancer_name.as_deref(), Some("kube-lb"));
        assert_eq!(c.load_balancer_resource_group, "lb-rg");
        assert!(!c.exclude_master_from_standard_lb);
        assert!(c.disable_outbound_snat);
        assert_eq!(c.maximum_load_balancer_rule_count, 148);
        assert_eq!(
            c.credential,
            Credential::ClientSecret {
                client_id: "c0ffee00-0000-0000-0000-000000000002".into(),
                secret: "s3cr3t-VALUE".into()
            }
        );
        assert!(c.use_instance_metadata);
        assert_eq!(
            c.backoff,
            Some(Backoff {
                retries: 3,
                exponent: 2.0,
                duration: Duration::from_secs(7),
                jitter: 0.5
            })
        );
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                qps: 10.0,
                bucket: 100,
                qps_write: 2.5,
                bucket_write: 20
            })
        );
        assert_eq!(
            c.cache_ttls,
            CacheTtls {
                availability_set_nodes: Duration::from_secs(300),
                vm: Duration::from_secs(30),
                load_balancer: Duration::from_secs(40),
                nsg: Duration::from_secs(50),
                route_table: Duration::from_secs(60),
            }
        );
        assert_eq!(c.user_agent.as_deref(), Some("hypercloud-test"));
        assert_eq!(
            c.tags,
            BTreeMap::from([
                ("env".to_owned(), "prod".to_owned()),
                ("team".to_owned(), "infra".to_owned())
            ])
        );
        assert_eq!(c.resource_manager_endpoint, None);
        assert_eq!(c.route_update_waiting, Duration::from_secs(10));
        assert_eq!(c.origin, "azure.json");
    }

    #[test]
    fn defaults_are_upstreams() {
        let c = Config::parse(&minimal(""), "azure.json").unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.cloud, Cloud::Public);
        assert_eq!(c.vm_type, VmType::Standard);
        assert_eq!(c.load_balancer_sku, LoadBalancerSku::Basic);
        assert_eq!(c.vnet_resource_group, "rg");
        assert_eq!(c.security_group_resource_group, "rg");
        assert_eq!(c.route_table_resource_group, "rg");
        assert_eq!(c.load_balancer_resource_group, "rg");
        assert!(c.exclude_master_from_standard_lb);
        assert!(!c.disable_outbound_snat);
        assert_eq!(c.maximum_load_balancer_rule_count, 250);
        assert!(!c.use_instance_metadata);
        assert_eq!(c.backoff, None);
        assert_eq!(c.rate_limit, None);
        assert_eq!(
            c.cache_ttls.availability_set_nodes,
            Duration::from_secs(900)
        );
        assert_eq!(c.cache_ttls.vm, Duration::from_secs(60));
        assert_eq!(c.cache_ttls.load_balancer, Duration::from_secs(120));
        assert_eq!(c.cache_ttls.nsg, Duration::from_secs(120));
        assert_eq!(c.cache_ttls.route_table, Duration::from_secs(120));
        assert_eq!(c.route_update_waiting, Duration::from_secs(30));
        assert!(c.tags.is_empty());

        // Enabled without numbers (or with 0, upstream's "unset"): upstream's defaults.
        let c = Config::parse(
            &minimal(
                r#", "cloudProviderBackoff": true, "cloudProviderBackoffRetries": 0,
                   "cloudProviderRateLimit": true, "cloudProviderRateLimitBucket": 8"#,
            ),
            "x",
        )
        .unwrap();
        assert_eq!(
            c.backoff,
            Some(Backoff {
                retries: 6,
                exponent: 1.5,
                duration: Duration::from_secs(5),
                jitter: 1.0
            })
        );
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                qps: 1.0,
                bucket: 8,
                qps_write: 1.0,
                bucket_write: 8
            })
        );
    }

    #[test]
    fn each_required_key_is_named() {
        for key in ["tenantId", "subscriptionId", "resourceGroup", "location"] {
            let mut v: Value = serde_json::from_str(&minimal("")).unwrap();
            v.as_object_mut().unwrap().remove(key);
            let e = err(&v.to_string());
            assert!(e.contains(&format!("{key} is required")), "{key}: {e}");
            v.as_object_mut().unwrap().insert(key.into(), " ".into());
            let e = err(&v.to_string());
            assert!(
                e.contains(&format!("{key} is required")),
                "{key} empty: {e}"
            );
        }
    }

    #[test]
    fn managed_identity_needs_no_tenant() {
        let c = Config::parse(
            r#"{"subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "useManagedIdentityExtension": true, "userAssignedIdentityID": "uai"}"#,
            "x",
        )
        .unwrap();
        assert_eq!(c.tenant_id, None);
        assert_eq!(
            c.credential,
            Credential::ManagedIdentity {
                user_assigned_identity_id: Some("uai".into())
            }
        );
    }

    #[test]
    fn credentials_follow_upstreams_precedence() {
        // Managed identity over the secret and the certificate.
        let c = Config::parse(
            &minimal(r#", "useManagedIdentityExtension": true, "aadClientCertPath": "/c.pfx""#),
            "x",
        )
        .unwrap();
        assert_eq!(
            c.credential,
            Credential::ManagedIdentity {
                user_assigned_identity_id: None
            }
        );
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("aadClientSecret is ignored")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("aadClientCertPath is ignored")));

        // The secret over the certificate.
        let c = Config::parse(&minimal(r#", "aadClientCertPath": "/c.pfx""#), "x").unwrap();
        assert!(matches!(c.credential, Credential::ClientSecret { .. }));
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("aadClientCertPath is ignored"));

        // The certificate alone; its password is optional.
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "id", "aadClientCertPath": "/etc/kubernetes/c.pfx"}"#,
            "x",
        )
        .unwrap();
        assert_eq!(
            c.credential,
            Credential::ClientCertificate {
                client_id: "id".into(),
                cert_path: "/etc/kubernetes/c.pfx".into(),
                password: None
            }
        );

        // userAssignedIdentityID without managed identity is warned about.
        let c = Config::parse(&minimal(r#", "userAssignedIdentityID": "u""#), "x").unwrap();
        assert!(c.warnings[0].contains("userAssignedIdentityID is ignored"));
    }

    #[test]
    fn missing_credentials_are_errors_naming_the_keys() {
        let e = err(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "id", "aadClientCertPassword": "p"}"#,
        );
        assert!(
            e.contains("aadClientSecret")
                && e.contains("aadClientCertPath")
                && e.contains("useManagedIdentityExtension"),
            "{e}"
        );
        let e = err(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientSecret": "pw"}"#,
        );
        assert!(e.contains("aadClientSecret needs aadClientId"), "{e}");
    }

    #[test]
    fn scale_sets_are_refused_by_name() {
        for t in ["vmss", "VMSS", "vmssflex"] {
            let e = err(&minimal(&format!(r#", "vmType": "{t}""#)));
            assert!(
                e.contains("vmType")
                    && e.contains(&format!("{:?}", t.to_ascii_lowercase()))
                    && e.contains("not implemented by hypercloud"),
                "{e}"
            );
        }
        let e = err(&minimal(r#", "vmType": "bare-metal""#));
        assert!(e.contains("vmType \"bare-metal\""), "{e}");
        let e = err(&minimal(r#", "disableAvailabilitySetNodes": true"#));
        assert!(e.contains("disableAvailabilitySetNodes"), "{e}");
    }

    #[test]
    fn load_balancer_sku_is_case_insensitive_and_checked() {
        let c = Config::parse(&minimal(r#", "loadBalancerSku": "BASIC""#), "x").unwrap();
        assert_eq!(c.load_balancer_sku, LoadBalancerSku::Basic);
        let e = err(&minimal(r#", "loadBalancerSku": "premium""#));
        assert!(e.contains("loadBalancerSku \"premium\""), "{e}");
        let e = err(&minimal(r#", "disableOutboundSNAT": true"#));
        assert!(e.contains("disableOutboundSNAT"), "{e}");
    }

    #[test]
    fn numbers_out_of_range_are_named_with_the_range() {
        for (extra, want) in [
            (
                r#""cloudProviderRateLimitQPS": 10001"#,
                "cloudProviderRateLimitQPS: 10001 is out of range (0 to 10000",
            ),
            (
                r#""cloudProviderRateLimitQPS": -1"#,
                "cloudProviderRateLimitQPS: -1 is out of range",
            ),
            (
                r#""cloudProviderRateLimitBucket": 100001"#,
                "cloudProviderRateLimitBucket: 100001 is out of range (1 to 100000",
            ),
            (
                r#""cloudProviderRateLimitBucketWrite": -5"#,
                "cloudProviderRateLimitBucketWrite: -5 is out of range (1 to 100000",
            ),
            (
                r#""cloudProviderBackoffRetries": 101"#,
                "cloudProviderBackoffRetries: 101 is out of range (1 to 100",
            ),
            (
                r#""cloudProviderBackoffExponent": 0.5"#,
                "cloudProviderBackoffExponent: 0.5 is out of range (1 to 10",
            ),
            (
                r#""cloudProviderBackoffDuration": 3601"#,
                "cloudProviderBackoffDuration: 3601 is out of range (1 to 3600",
            ),
            (
                r#""vmCacheTTLInSeconds": 86401"#,
                "vmCacheTTLInSeconds: 86401 is out of range (1 to 86400",
            ),
            (
                r#""maximumLoadBalancerRuleCount": 1001"#,
                "maximumLoadBalancerRuleCount: 1001 is out of range (1 to 1000",
            ),
            (
                r#""routeUpdateWaitingInSeconds": -1"#,
                "routeUpdateWaitingInSeconds: -1 is out of range (1 to 3600",
            ),
        ] {
            let e = err(&minimal(&format!(", {extra}")));
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn unknown_keys_are_warned_by_name() {
        let c = Config::parse(
            &minimal(r#", "foo": 1, "subscriptonId": "typo""#),
            "azure.json",
        )
        .unwrap();
        assert_eq!(
            c.warnings,
            [
                "azure.json: unknown key \"foo\" ignored",
                "azure.json: unknown key \"subscriptonId\" ignored"
            ]
        );
    }

    #[test]
    fn unimplemented_keys_are_warned_by_name() {
        let c = Config::parse(
            &minimal(
                r#", "primaryScaleSetName": "ss", "putVMSSVMBatchSize": 4,
                   "enableMultipleStandardLoadBalancers": true, "identitySystem": "adfs",
                   "routeRateLimit": {"cloudProviderRateLimit": true}"#,
            ),
            "azure.json",
        )
        .unwrap();
        for key in [
            "primaryScaleSetName",
            "putVMSSVMBatchSize",
            "enableMultipleStandardLoadBalancers",
            "identitySystem",
            "routeRateLimit",
        ] {
            let want = format!("azure.json: {key} is not implemented by hypercloud and is ignored");
            assert!(
                c.warnings.iter().any(|w| w.starts_with(&want)),
                "{key}: {:?}",
                c.warnings
            );
        }
        assert_eq!(c.warnings.len(), 5, "{:?}", c.warnings);
    }

    #[test]
    fn numbers_without_their_switch_are_warned_about() {
        let c = Config::parse(
            &minimal(r#", "cloudProviderBackoffRetries": 3, "cloudProviderRateLimitQPS": 5"#),
            "x",
        )
        .unwrap();
        assert_eq!(c.backoff, None);
        assert_eq!(c.rate_limit, None);
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("cloudProviderBackoffRetries is ignored")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("cloudProviderRateLimitQPS is ignored")));
    }

    #[test]
    fn wrong_types_name_the_key() {
        for (extra, key) in [
            (r#""useInstanceMetadata": "yes""#, "useInstanceMetadata"),
            (
                r#""cloudProviderRateLimitQPS": "1""#,
                "cloudProviderRateLimitQPS",
            ),
            (
                r#""maximumLoadBalancerRuleCount": 1.5"#,
                "maximumLoadBalancerRuleCount",
            ),
            (r#""vnetName": 5"#, "vnetName"),
            (r#""putVMSSVMBatchSize": "x""#, "putVMSSVMBatchSize"),
            (r#""routeRateLimit": 1"#, "routeRateLimit"),
        ] {
            let e = err(&minimal(&format!(", {extra}")));
            assert!(e.contains(&format!("{key}: invalid type")), "{extra}: {e}");
        }
    }

    #[test]
    fn keys_match_case_insensitively_but_only_once() {
        let c = Config::parse(
            r#"{"TenantID": "t", "subscriptionID": "s", "resourceGroup": "rg", "location": "l",
                "aadClientID": "id", "aadClientSecret": "pw"}"#,
            "x",
        )
        .unwrap();
        assert_eq!(c.tenant_id.as_deref(), Some("t"));
        assert_eq!(c.subscription_id, "s");
        let e = err(&minimal(r#", "Location": "westus""#));
        assert!(e.contains("location is given twice"), "{e}");
    }

    #[test]
    fn text_that_is_not_a_json_object_is_refused() {
        let e = err("tenantId: t\nsubscriptionId: s\n");
        assert!(
            e.contains("not JSON") && e.contains("line 1 column 2"),
            "{e}"
        );
        assert!(e.contains("JSON only"), "{e}");
        let e = err("[1, 2]");
        assert!(
            e.contains("not a JSON object: the top level is an array"),
            "{e}"
        );
        let e = err(&minimal(","));
        assert!(e.contains("not JSON") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn debug_does_not_print_secrets() {
        let c = Config::parse(FULL, "x").unwrap();
        let out = format!("{c:?}");
        assert!(!out.contains("s3cr3t-VALUE"), "{out}");
        assert!(out.contains("<redacted>"), "{out}");
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "id", "aadClientCertPath": "/c.pfx", "aadClientCertPassword": "pfx-PASS"}"#,
            "x",
        )
        .unwrap();
        let out = format!("{c:?}");
        assert!(!out.contains("pfx-PASS") && out.contains("/c.pfx"), "{out}");
    }

    #[test]
    fn tags_parse_as_upstream() {
        let c = Config::parse(&minimal(r#", "tags": "a=1,,b = 2 , c=""#), "x").unwrap();
        assert_eq!(
            c.tags,
            BTreeMap::from([
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "2".to_owned())
            ])
        );
        assert!(
            c.warnings[0].contains("\"c\" has an empty value"),
            "{:?}",
            c.warnings
        );
        let e = err(&minimal(r#", "tags": "a=1,b""#));
        assert!(e.contains("tags: \"b\" is not key=value"), "{e}");
        let e = err(&minimal(r#", "tags": "a=1=2""#));
        assert!(e.contains("tags: \"a=1=2\" is not key=value"), "{e}");
        let e = err(&minimal(r#", "tags": " =1""#));
        assert!(e.contains("tags: \"=1\" has an empty key"), "{e}");
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn no_file(p: &Path) -> std::io::Result<String> {
        panic!("no file should be read, {p:?} was")
    }

    #[test]
    fn named_clouds_have_fixed_endpoints() {
        let c = Config::parse(&minimal(r#", "cloud": "azurechinacloud""#), "x").unwrap();
        assert_eq!(c.cloud, Cloud::China);
        let env = c.resolve_environment(no_env, no_file).unwrap();
        assert_eq!(env.name, "AzureChinaCloud");
        assert_eq!(
            env.resource_manager_endpoint,
            "https://management.chinacloudapi.cn/"
        );
        assert_eq!(
            env.active_directory_endpoint,
            "https://login.chinacloudapi.cn/"
        );
        assert_eq!(
            env.token_resource(),
            "https://management.core.chinacloudapi.cn/"
        );
        assert_eq!(
            env.token_audience.as_deref(),
            Some("https://management.chinacloudapi.cn/")
        );

        let env = Config::parse(&minimal(""), "x")
            .unwrap()
            .resolve_environment(no_env, no_file)
            .unwrap();
        assert_eq!(
            env.resource_manager_endpoint,
            "https://management.azure.com/"
        );
        assert_eq!(
            env.active_directory_endpoint,
            "https://login.microsoftonline.com/"
        );
        assert_eq!(env.token_resource(), "https://management.core.windows.net/");

        assert_eq!(
            Cloud::from_name("AzureUSGovernment"),
            Some(Cloud::UsGovernment)
        );
        assert_eq!(Cloud::from_name("AzureCloud"), Some(Cloud::Public));
        assert_eq!(
            Environment::of_cloud(Cloud::German)
                .unwrap()
                .active_directory_endpoint,
            "https://login.microsoftonline.de/"
        );
        let e = err(&minimal(r#", "cloud": "AzureMoonCloud""#));
        assert!(e.contains("cloud \"AzureMoonCloud\""), "{e}");
    }

    #[test]
    fn resource_manager_endpoint_overrides_arm_only() {
        let c = Config::parse(
            &minimal(
                r#", "resourceManagerEndpoint": "https://management.local.azurestack.external""#,
            ),
            "x",
        )
        .unwrap();
        assert!(
            c.warnings[0].contains("resourceManagerEndpoint"),
            "{:?}",
            c.warnings
        );
        let env = c.resolve_environment(no_env, no_file).unwrap();
        assert_eq!(
            env.resource_manager_endpoint,
            "https://management.local.azurestack.external/"
        );
        assert_eq!(
            env.active_directory_endpoint,
            "https://login.microsoftonline.com/"
        );
        let e = err(&minimal(
            r#", "resourceManagerEndpoint": "management.azure.com""#,
        ));
        assert!(
            e.contains(
                "resourceManagerEndpoint: \"management.azure.com\" is not an absolute http(s) URL"
            ),
            "{e}"
        );
    }

    const STACK_ENV: &str = r#"{
        "name": "AzureStackCloud",
        "managementPortalURL": "https://portal.local.azurestack.external/",
        "serviceManagementEndpoint": "https://management.adfs.azurestack.local/4de154de",
        "resourceManagerEndpoint": "https://management.local.azurestack.external",
        "activeDirectoryEndpoint": "https://adfs.local.azurestack.external/",
        "galleryEndpoint": "https://portal.local.azurestack.external:30015/",
        "graphEndpoint": "https://graph.local.azurestack.external/",
        "storageEndpointSuffix": "local.azurestack.external",
        "tokenAudience": "https://management.adfs.azurestack.local/4de154de",
        "resourceIdentifiers": {"graph": "https://graph.local.azurestack.external/"}
    }"#;

    fn stack() -> Config {
        Config::parse(&minimal(r#", "cloud": "AzureStackCloud""#), "x").unwrap()
    }

    fn lookup(var: &str) -> Option<String> {
        (var == "AZURE_ENVIRONMENT_FILEPATH").then(|| "/etc/kubernetes/azurestackcloud.json".into())
    }

    #[test]
    fn azure_stack_reads_the_environment_file() {
        let env = stack()
            .resolve_environment(lookup, |p| {
                assert_eq!(p, Path::new("/etc/kubernetes/azurestackcloud.json"));
                Ok(STACK_ENV.into())
            })
            .unwrap();
        assert_eq!(env.name, "AzureStackCloud");
        assert_eq!(
            env.resource_manager_endpoint,
            "https://management.local.azurestack.external/"
        );
        assert_eq!(
            env.active_directory_endpoint,
            "https://adfs.local.azurestack.external/"
        );
        assert_eq!(
            env.token_resource(),
            "https://management.adfs.azurestack.local/4de154de/"
        );
    }

    #[test]
    fn azure_stack_without_its_file_is_an_error() {
        let e = stack().resolve_environment(no_env, no_file).unwrap_err();
        assert!(matches!(e, Error::EnvironmentFileUnset { .. }), "{e}");
        assert!(e.to_string().contains("AZURE_ENVIRONMENT_FILEPATH"), "{e}");

        let e = stack()
            .resolve_environment(lookup, |p| std::fs::read_to_string(p))
            .unwrap_err();
        match e {
            Error::ReadEnvironmentFile { path, source } => {
                assert_eq!(path, "/etc/kubernetes/azurestackcloud.json");
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{other}"),
        }
        let e = Environment::from_file(Path::new("/nonexistent/hypercloud/env.json")).unwrap_err();
        assert!(matches!(e, Error::ReadEnvironmentFile { .. }), "{e}");
    }

    #[test]
    fn environment_file_from_disk() {
        let path = std::env::temp_dir().join(format!("hc-azure-env-{}.json", std::process::id()));
        std::fs::write(&path, STACK_ENV).unwrap();
        let env = Environment::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            env.unwrap().active_directory_endpoint,
            "https://adfs.local.azurestack.external/"
        );
    }

    #[test]
    fn bad_environment_files_name_the_key() {
        let bad_url = STACK_ENV.replace(
            "\"https://adfs.local.azurestack.external/\"",
            "\"adfs.local.azurestack.external\"",
        );
        let e = stack()
            .resolve_environment(lookup, |_| Ok(bad_url.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/etc/kubernetes/azurestackcloud.json")
                && e.contains("activeDirectoryEndpoint: \"adfs.local.azurestack.external\" is not an absolute http(s) URL"),
            "{e}"
        );
        let no_rm = STACK_ENV.replace("\"resourceManagerEndpoint\"", "\"unusedEndpoint\"");
        let e = Environment::parse(&no_rm, "env.json").unwrap_err();
        assert!(matches!(e, Error::ParseEnvironment { .. }));
        assert!(
            e.to_string()
                .contains("resourceManagerEndpoint is required"),
            "{e}"
        );
        let e = Environment::parse(
            &STACK_ENV.replace(
                "\"tokenAudience\": \"https://management.adfs.azurestack.local/4de154de\"",
                "\"tokenAudience\": 1",
            ),
            "env.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("tokenAudience: invalid type"), "{e}");
    }

    #[test]
    fn hypercloud_instance_metadata_keys_are_checked() {
        let c = Config::parse(
            &minimal(r#", "hypercloudInstanceMetadataEndpoint": "http://127.0.0.1:9", "hypercloudInstanceMetadataSourceAddress": "127.7.1.4""#),
            "azure.json",
        )
        .unwrap();
        assert_eq!(
            c.instance_metadata_endpoint.as_deref(),
            Some("http://127.0.0.1:9/")
        );
        assert_eq!(
            c.instance_metadata_source_address,
            Some("127.7.1.4".parse().unwrap())
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        for (extra, key) in [
            (
                r#", "hypercloudInstanceMetadataEndpoint": "169.254.169.254""#,
                "hypercloudInstanceMetadataEndpoint",
            ),
            (
                r#", "hypercloudInstanceMetadataSourceAddress": "node-1""#,
                "hypercloudInstanceMetadataSourceAddress",
            ),
        ] {
            let e = Config::parse(&minimal(extra), "azure.json")
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{e}");
        }
    }
}
