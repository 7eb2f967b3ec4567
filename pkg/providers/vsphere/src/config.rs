//! `vsphere.conf`: the legacy in-tree INI format (gcfg: `[Global]`, `[VirtualCenter "host"]`,
//! `[Workspace]`, `[Labels]`, ...) and the YAML format of cloud-provider-vsphere (`global:`,
//! `vcenter:`, `labels:`, `nodes:`), both read into one [`Config`].
//!
//! Both formats are first flattened into the same list of `(section, subsection, key, value)`
//! entries (the YAML keys are the INI key names, as upstream's YAML tags are), so one function
//! decides what every key means. Keys hypercloud cannot honour are refused or warned about by
//! name; unknown keys are warned about by name ([`Config::warnings`]).
//! Upstream equivalents: legacy-cloud-providers/vsphere `VSphereConfig`, cloud-provider-vsphere
//! `pkg/common/config` (`ReadConfig` tries YAML first, then INI).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use hypercloud_cloudprovider::credential_secret::{SecretData, SecretRef};
use hypercloud_cloudprovider::http_client::Thumbprint;
use hypercloud_cloudprovider::{duration, gcfg};
use ipnet::IpNet;

use crate::{Error, Result};

/// Where the kubelet side reads this machine's SMBIOS UUID by default.
pub const DEFAULT_PRODUCT_UUID_FILE: &str = "/sys/class/dmi/id/product_uuid";
/// How long one listing of every VM answers look-ups, unless `[Hypercloud] cache-ttl` says.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(5);
const MAX_CACHE_TTL: Duration = Duration::from_secs(600);
/// How long a vCenter task (creating, deleting, attaching a disk) is waited for, unless
/// `[Hypercloud] task-timeout` says. Upstream waits without a bound (`task.Wait`).
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(300);
/// The range `task-timeout` may take.
const TASK_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(3600));

/// A password, never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a password.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The clear text, for the login call only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// IP families in priority order (upstream `ip-family`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpFamily {
    /// `ipv4`
    V4,
    /// `ipv6`
    V6,
}

impl IpFamily {
    /// Whether `ip` is of this family.
    pub fn matches(self, ip: &IpAddr) -> bool {
        match self {
            IpFamily::V4 => ip.is_ipv4(),
            IpFamily::V6 => ip.is_ipv6(),
        }
    }
}

/// One vCenter to talk to: a `[VirtualCenter "host"]` section (YAML `vcenter:` entry), or the
/// legacy `[Global] server`, with `[Global]`'s values where the section sets none.
#[derive(Clone, Debug, PartialEq)]
pub struct VCenter {
    /// Host name or IP (the `[VirtualCenter "..."]` name unless `server` is set).
    pub server: String,
    /// HTTPS port (`port`, default 443).
    pub port: u16,
    /// `user`.
    pub user: String,
    /// `password`.
    pub password: Secret,
    /// `insecure-flag`: do not verify vCenter's certificate.
    pub insecure: bool,
    /// `ca-file`: PEM bundle to verify vCenter's certificate with.
    pub ca_file: Option<PathBuf>,
    /// `thumbprint`: vCenter's certificate is trusted when its fingerprint is this one, whoever
    /// signed it (govmomi's `SetThumbprint`); then `ca-file` is not used.
    pub thumbprint: Option<Thumbprint>,
    /// `datacenters`; empty means every datacenter.
    pub datacenters: Vec<String>,
    /// `ip-family`, default `ipv4`.
    pub ip_families: Vec<IpFamily>,
    /// `soap-roundtrip-count`: attempts per SOAP call on connection errors (default 3).
    pub roundtrip_count: u32,
    /// Plain HTTP instead of HTTPS (`[Hypercloud] plain-http`, for simulators started with
    /// `-tls=false`).
    pub plain_http: bool,
    /// `secret-name`/`secret-namespace` (the VirtualCenter section's, else `[Global]`'s): a
    /// Secret whose `<server>.username` and `<server>.password` keys hold the credentials
    /// (upstream's credential manager), followed while running; `user`/`password` may then be
    /// left out of the file. See [`credentials_from_secret`].
    pub credentials_secret: Option<SecretRef>,
}

impl VCenter {
    /// `host:port` as shown in messages.
    pub fn address(&self) -> String {
        if self.server.contains(':') {
            format!("[{}]:{}", self.server, self.port)
        } else {
            format!("{}:{}", self.server, self.port)
        }
    }

    /// Base URL of the SOAP and REST endpoints.
    pub fn base_url(&self) -> String {
        let scheme = if self.plain_http { "http" } else { "https" };
        format!("{scheme}://{}", self.address())
    }
}

/// `[Labels]`: the tag categories whose tags name zones and regions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    /// Category of zone tags.
    pub zone: Option<String>,
    /// Category of region tags.
    pub region: Option<String>,
}

/// `[Nodes]`: which guest addresses become InternalIP and ExternalIP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nodes {
    /// `internal-network-subnet-cidr`.
    pub internal_subnet: Option<IpNet>,
    /// `external-network-subnet-cidr`.
    pub external_subnet: Option<IpNet>,
    /// `internal-vm-network-name`.
    pub internal_network: Option<String>,
    /// `external-vm-network-name` (also the legacy `[Network] public-network`).
    pub external_network: Option<String>,
    /// `exclude-internal-network-subnet-cidr` (comma-separated).
    pub exclude_internal: Vec<IpNet>,
    /// `exclude-external-network-subnet-cidr` (comma-separated).
    pub exclude_external: Vec<IpNet>,
}

/// `[Workspace]` of the legacy format: where the in-tree volume plugin provisioned disks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workspace {
    /// `server`: must name one of the configured vCenters; volumes are provisioned there.
    pub server: Option<String>,
    /// `datacenter`: must be one of the datacenters of the workspace vCenter.
    pub datacenter: Option<String>,
    /// `folder`.
    pub folder: Option<String>,
    /// `default-datastore`: where volumes go when their StorageClass names no `datastore`.
    pub default_datastore: Option<String>,
    /// `resourcepool-path`.
    pub resourcepool_path: Option<String>,
}

/// The configuration in effect, whichever format it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where it was read from.
    pub origin: String,
    /// Which format it was (`ini` or `yaml`).
    pub format: &'static str,
    /// Every vCenter, in the order of their sections (never empty; upstream keeps them in a
    /// map). Nodes are looked for in each, in this order; see [`Config::workspace_vcenter`]
    /// for the one volumes are provisioned on.
    pub vcenters: Vec<VCenter>,
    /// Tag categories.
    pub labels: Labels,
    /// Address selection.
    pub nodes: Nodes,
    /// Legacy workspace.
    pub workspace: Workspace,
    /// `[Global] vm-uuid`: this machine's VM UUID, instead of reading `product_uuid_file`.
    pub vm_uuid: Option<String>,
    /// `[Hypercloud] product-uuid-file`: where the kubelet side reads its SMBIOS UUID.
    pub product_uuid_file: PathBuf,
    /// `[Hypercloud] cache-ttl`: how long one listing of every VM answers look-ups.
    pub cache_ttl: Duration,
    /// `[Hypercloud] task-timeout`: how long a vCenter task is waited for (1s to 60m).
    pub task_timeout: Duration,
    /// `[Disk] scsicontrollertype` as the vim25 device type volumes are attached to
    /// (`pvscsi`, the default: `ParaVirtualSCSIController`; `lsilogic-sas`:
    /// `VirtualLsiLogicSASController`).
    pub scsi_controller_type: &'static str,
    /// Keys that were accepted but change nothing, or are unknown: one line each, by name.
    pub warnings: Vec<String>,
}

/// One `key = value` of either format, after flattening.
#[derive(Clone, Debug)]
struct Entry {
    section: String,
    subsection: Option<String>,
    key: String,
    value: String,
    /// `line N` (INI) or the YAML path, for messages.
    at: String,
}

impl Config {
    /// Reads either format: a file whose first meaningful line is a `[Section]` header is
    /// INI, anything else YAML (upstream tries YAML first, then INI).
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let err = |message: String| Error::ParseCloudConfig {
            origin: origin.into(),
            message,
        };
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'));
        let (format, entries) = match first {
            Some(l) if l.starts_with('[') => ("ini", ini_entries(text).map_err(err)?),
            Some(_) => ("yaml", yaml_entries(text).map_err(err)?),
            None => return Err(err("is empty".into())),
        };
        Self::from_entries(format, entries, origin).map_err(err)
    }

    /// The index in [`Config::vcenters`] of the vCenter volumes are provisioned on and deleted
    /// from: the one `[Workspace] server` names (checked when parsing), else the first (the
    /// only one, with one vCenter). Upstream's legacy provider used `[Workspace] server` the
    /// same way (`getVSphereInstanceForServer(Workspace.VCenterIP)`).
    pub fn workspace_vcenter_index(&self) -> usize {
        self.workspace
            .server
            .as_deref()
            .and_then(|ws| self.vcenters.iter().position(|vc| vc.server == ws))
            .unwrap_or(0)
    }

    /// The vCenter at [`Config::workspace_vcenter_index`] (`None` only for a `Config` built
    /// by hand without vCenters).
    pub fn workspace_vcenter(&self) -> Option<&VCenter> {
        self.vcenters.get(self.workspace_vcenter_index())
    }

    fn from_entries(
        format: &'static str,
        entries: Vec<Entry>,
        origin: &str,
    ) -> std::result::Result<Self, String> {
        let mut b = Builder::default();
        for e in &entries {
            b.apply(e)
                .map_err(|m| format!("{} {}: {m}", e.at, e.display_key()))?;
        }
        b.finish(format, origin)
    }
}

impl Entry {
    fn display_key(&self) -> String {
        match &self.subsection {
            Some(s) => format!("[{} {s:?}] {}", self.section, self.key),
            None => format!("[{}] {}", self.section, self.key),
        }
    }
}

/// Values of one vCenter section before defaults.
#[derive(Clone, Default)]
struct VcRaw {
    server: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    password: Option<String>,
    insecure: Option<bool>,
    ca_file: Option<PathBuf>,
    thumbprint: Option<Thumbprint>,
    datacenters: Option<Vec<String>>,
    ip_families: Option<Vec<IpFamily>>,
    roundtrip_count: Option<u32>,
    secret_name: Option<String>,
    secret_namespace: Option<String>,
}

impl VcRaw {
    /// `secret-name` with `secret-namespace`, when the section sets either.
    fn secret(&self, section: &str) -> std::result::Result<Option<SecretRef>, String> {
        match (&self.secret_name, &self.secret_namespace) {
            (Some(name), Some(namespace)) => Ok(Some(SecretRef {
                namespace: namespace.clone(),
                name: name.clone(),
            })),
            (Some(_), None) => Err(format!("{section} secret-name needs secret-namespace")),
            (None, Some(_)) => Err(format!(
                "{section} secret-namespace is set without secret-name"
            )),
            (None, None) => Ok(None),
        }
    }
}

#[derive(Default)]
struct Builder {
    global: VcRaw,
    /// The VirtualCenter sections by name, in file order; a name repeated adds to its section.
    vcenters: Vec<(String, VcRaw)>,
    labels: Labels,
    nodes: Nodes,
    workspace: Workspace,
    vm_uuid: Option<String>,
    product_uuid_file: Option<PathBuf>,
    cache_ttl: Option<Duration>,
    task_timeout: Option<Duration>,
    plain_http: bool,
    scsi_controller_type: Option<&'static str>,
    warnings: Vec<String>,
}

/// `[Disk] scsicontrollertype` values upstream accepts, and the vim25 controller type each
/// names; the first is the default.
const SCSI_CONTROLLER_TYPES: &[(&str, &str)] = &[
    ("pvscsi", "ParaVirtualSCSIController"),
    ("lsilogic-sas", "VirtualLsiLogicSASController"),
];

const NO_SECRETS_DIRECTORY: &str = "hypercloud's vsphere provider does not read credentials from a secrets directory; name a Kubernetes Secret (secret-name, secret-namespace) or put user and password in the config file";

impl Builder {
    fn apply(&mut self, e: &Entry) -> std::result::Result<(), String> {
        let v = e.value.trim();
        let key = e.key.as_str();
        if key.is_empty() {
            // A section header: it exists even without keys.
            return self.header(e);
        }
        match e.section.as_str() {
            "global" if !vc_key(&mut self.global, key, v)? => self.global_key(e, key, v)?,
            "global" => {}
            "virtualcenter" => {
                let name = e
                    .subsection
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or(
                        "a VirtualCenter section needs the server name: [VirtualCenter \"host\"]",
                    )?;
                let vc = self.vcenter_section(name);
                if !vc_key(vc, key, v)? {
                    self.unknown(e)
                }
            }
            "labels" => match key {
                "zone" => self.labels.zone = non_empty(v),
                "region" => self.labels.region = non_empty(v),
                _ => self.unknown(e),
            },
            "nodes" => self.nodes_key(e, key, v)?,
            "network" => match key {
                "public-network" => self.nodes.external_network = non_empty(v),
                _ => self.unknown(e),
            },
            "workspace" => match key {
                "server" => self.workspace.server = non_empty(v),
                "datacenter" => self.workspace.datacenter = non_empty(v),
                "folder" => self.workspace.folder = non_empty(v),
                "default-datastore" => self.workspace.default_datastore = non_empty(v),
                "resourcepool-path" => self.workspace.resourcepool_path = non_empty(v),
                _ => self.unknown(e),
            },
            "disk" => match key {
                "scsicontrollertype" => {
                    let t = SCSI_CONTROLLER_TYPES
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(v))
                        .ok_or_else(|| {
                            format!("{v:?} is not a supported SCSI controller type: configure 'lsilogic-sas' or 'pvscsi'")
                        })?;
                    self.scsi_controller_type = Some(t.1);
                }
                _ => self.unknown(e),
            },
            "hypercloud" => match key {
                "product-uuid-file" => self.product_uuid_file = Some(PathBuf::from(v)),
                "cache-ttl" => {
                    self.cache_ttl = Some(duration::parse_in(v, Duration::ZERO, MAX_CACHE_TTL)?);
                }
                "task-timeout" => {
                    let (min, max) = TASK_TIMEOUT_RANGE;
                    self.task_timeout = Some(duration::parse_in(v, min, max)?);
                }
                "plain-http" => self.plain_http = parse_bool(v)?,
                _ => self.unknown(e),
            },
            // Warned about at its header.
            _ => {}
        }
        Ok(())
    }

    fn header(&mut self, e: &Entry) -> std::result::Result<(), String> {
        match e.section.as_str() {
            "virtualcenter" => {
                let name = e
                    .subsection
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or(
                        "a VirtualCenter section needs the server name: [VirtualCenter \"host\"]",
                    )?;
                self.vcenter_section(name);
            }
            "global" | "labels" | "nodes" | "network" | "workspace" | "disk" | "hypercloud" => {}
            other => self
                .warnings
                .push(format!("{}: unknown section [{other}] ignored", e.at)),
        }
        Ok(())
    }

    /// The raw values of the VirtualCenter section `name`, added at the end when new.
    fn vcenter_section(&mut self, name: String) -> &mut VcRaw {
        let i = match self.vcenters.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.vcenters.push((name, VcRaw::default()));
                self.vcenters.len() - 1
            }
        };
        &mut self.vcenters[i].1
    }

    fn global_key(&mut self, e: &Entry, key: &str, v: &str) -> std::result::Result<(), String> {
        match key {
            "secrets-directory" | "secretsdirectory" => return Err(NO_SECRETS_DIRECTORY.into()),
            "vm-uuid" => self.vm_uuid = non_empty(v).map(|u| u.to_lowercase()),
            "datacenter" => {
                self.warnings.push(format!(
                    "{} {}: deprecated, use datacenters",
                    e.at,
                    e.display_key()
                ));
                self.global.datacenters = Some(split_list(v));
            }
            "working-dir" | "vm-name" => self.no_effect(
                e,
                "deprecated upstream; nodes are found by name, IP or UUID",
            ),
            "api-disable" | "api-binding" => self.no_effect(
                e,
                "hypercloud has no vSphere CCM gRPC API; its admin server is --secure-port",
            ),
            _ => self.unknown(e),
        }
        Ok(())
    }

    fn nodes_key(&mut self, e: &Entry, key: &str, v: &str) -> std::result::Result<(), String> {
        let n = &mut self.nodes;
        match key {
            "internal-network-subnet-cidr" | "internalnetworksubnetcidr" => {
                n.internal_subnet = parse_cidr_opt(v)?
            }
            "external-network-subnet-cidr" | "externalnetworksubnetcidr" => {
                n.external_subnet = parse_cidr_opt(v)?
            }
            "internal-vm-network-name" | "internalvmnetworkname" => {
                n.internal_network = non_empty(v)
            }
            "external-vm-network-name" | "externalvmnetworkname" => {
                n.external_network = non_empty(v)
            }
            "exclude-internal-network-subnet-cidr" | "excludeinternalnetworksubnetcidr" => {
                n.exclude_internal = parse_cidr_list(v)?
            }
            "exclude-external-network-subnet-cidr" | "excludeexternalnetworksubnetcidr" => {
                n.exclude_external = parse_cidr_list(v)?
            }
            _ => self.unknown(e),
        }
        Ok(())
    }

    fn unknown(&mut self, e: &Entry) {
        self.warnings
            .push(format!("{} {}: unknown key ignored", e.at, e.display_key()));
    }

    fn no_effect(&mut self, e: &Entry, why: &str) {
        self.warnings.push(format!(
            "{} {}: accepted but has no effect: {why}",
            e.at,
            e.display_key()
        ));
    }

    fn finish(mut self, format: &'static str, origin: &str) -> std::result::Result<Config, String> {
        let g = std::mem::take(&mut self.global);
        let sections = std::mem::take(&mut self.vcenters);
        let mut vcenters: Vec<VCenter> = Vec::with_capacity(sections.len().max(1));
        if sections.is_empty() {
            // [Global] server is the legacy single-vCenter form.
            vcenters.push(self.vcenter(None, VcRaw::default(), &g)?);
        }
        for (name, vc) in sections {
            let vcenter = self.vcenter(Some(name.clone()), vc, &g)?;
            if let Some(same) = vcenters
                .iter()
                .find(|o| o.server == vcenter.server && o.port == vcenter.port)
            {
                return Err(format!(
                    "[VirtualCenter {name:?}] is vCenter {} again (server and port of an earlier section); each vCenter is configured once",
                    same.address()
                ));
            }
            vcenters.push(vcenter);
        }
        let workspace_vc = match &self.workspace.server {
            None => &vcenters[0],
            Some(ws) => match vcenters.iter().find(|vc| &vc.server == ws) {
                Some(vc) => vc,
                None if vcenters.len() == 1 => {
                    return Err(format!(
                        "[Workspace] server {ws:?} is not the configured vCenter {:?}",
                        vcenters[0].server
                    ))
                }
                None => {
                    return Err(format!(
                        "[Workspace] server {ws:?} is not one of the configured vCenters ({})",
                        vcenters
                            .iter()
                            .map(|vc| vc.server.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            },
        };
        if let Some(dc) = &self.workspace.datacenter {
            let datacenters = &workspace_vc.datacenters;
            if !datacenters.is_empty() && !datacenters.contains(dc) {
                return Err(format!(
                    "[Workspace] datacenter {dc:?} is not one of datacenters ({})",
                    datacenters.join(", ")
                ));
            }
        }
        // default-datastore is where volumes go; folder and resourcepool-path placed the
        // dummy VMs of storage-policy volumes, which hypercloud refuses.
        for (key, set) in [
            ("folder", self.workspace.folder.is_some()),
            (
                "resourcepool-path",
                self.workspace.resourcepool_path.is_some(),
            ),
        ] {
            if set {
                self.warnings.push(format!(
                    "[Workspace] {key}: accepted but has no effect: upstream placed the dummy VMs of storage-policy volumes there; hypercloud's vsphere provider makes no storage-policy volumes"
                ));
            }
        }
        Ok(Config {
            origin: origin.into(),
            format,
            vcenters,
            labels: self.labels,
            nodes: self.nodes,
            workspace: self.workspace,
            vm_uuid: self.vm_uuid,
            product_uuid_file: self
                .product_uuid_file
                .unwrap_or_else(|| PathBuf::from(DEFAULT_PRODUCT_UUID_FILE)),
            cache_ttl: self.cache_ttl.unwrap_or(DEFAULT_CACHE_TTL),
            task_timeout: self.task_timeout.unwrap_or(DEFAULT_TASK_TIMEOUT),
            scsi_controller_type: self
                .scsi_controller_type
                .unwrap_or(SCSI_CONTROLLER_TYPES[0].1),
            warnings: self.warnings,
        })
    }

    /// One vCenter from its section's values (`name` is the section's; `None` for the legacy
    /// `[Global] server` form), `[Global]`'s where the section sets none.
    fn vcenter(
        &self,
        name: Option<String>,
        vc: VcRaw,
        g: &VcRaw,
    ) -> std::result::Result<VCenter, String> {
        let g = g.clone();
        let credentials_secret = match vc.secret("[VirtualCenter]")? {
            Some(s) => Some(s),
            None => g.secret("[Global]")?,
        };
        // A section's own server wins over its name (cloud-provider-vsphere's tenant form);
        // [Global] server is the legacy single-vCenter form.
        let server = vc.server.or(name).or(g.server).ok_or(
            "no vCenter configured: add a [VirtualCenter \"host\"] section (YAML: vcenter:)",
        )?;
        // With a Secret, the credentials come from it (upstream's credential manager reads
        // the Secret instead of the file's user and password).
        let user = vc.user.or(g.user).filter(|u| !u.is_empty());
        let password = vc.password.or(g.password);
        let (user, password) = match (&credentials_secret, user, password) {
            (Some(_), user, password) => (user.unwrap_or_default(), password.unwrap_or_default()),
            (None, Some(user), Some(password)) => (user, password),
            (None, None, _) => return Err(format!(
                "no user for vCenter {server:?}: set user in [Global] or the VirtualCenter section, or name a Secret (secret-name, secret-namespace)"
            )),
            (None, Some(_), None) => return Err(format!(
                "no password for vCenter {server:?}: set password in [Global] or the VirtualCenter section, or name a Secret (secret-name, secret-namespace)"
            )),
        };
        Ok(VCenter {
            server,
            port: vc.port.or(g.port).unwrap_or(443),
            user,
            password: Secret(password),
            insecure: vc.insecure.or(g.insecure).unwrap_or(false),
            ca_file: vc.ca_file.or(g.ca_file),
            thumbprint: vc.thumbprint.or(g.thumbprint),
            datacenters: vc.datacenters.or(g.datacenters).unwrap_or_default(),
            ip_families: vc
                .ip_families
                .or(g.ip_families)
                .unwrap_or_else(|| vec![IpFamily::V4]),
            roundtrip_count: vc.roundtrip_count.or(g.roundtrip_count).unwrap_or(3),
            plain_http: self.plain_http,
            credentials_secret,
        })
    }
}

/// Keys a `[Global]` and a `[VirtualCenter]` section share; `Ok(false)` when `key` is not one.
fn vc_key(vc: &mut VcRaw, key: &str, v: &str) -> std::result::Result<bool, String> {
    match key {
        "server" => vc.server = non_empty(v),
        "user" => vc.user = Some(v.to_owned()),
        "password" => vc.password = Some(v.to_owned()),
        "port" => {
            let port: u32 = v
                .parse()
                .map_err(|_| format!("{v:?} is not a port number"))?;
            if !(1..=65535).contains(&port) {
                return Err(format!("{port} is not a port number (1-65535)"));
            }
            vc.port = Some(port as u16);
        }
        "insecure-flag" => vc.insecure = Some(parse_bool(v)?),
        "ca-file" => vc.ca_file = non_empty(v).map(PathBuf::from),
        "thumbprint" => vc.thumbprint = non_empty(v).map(|t| Thumbprint::parse(&t)).transpose()?,
        "datacenters" => vc.datacenters = Some(split_list(v)),
        // cloud-provider-vsphere's YAML spells them secretName, secretNamespace.
        "secret-name" | "secretname" => vc.secret_name = non_empty(v),
        "secret-namespace" | "secretnamespace" => vc.secret_namespace = non_empty(v),
        "ip-family" => {
            let mut fams = Vec::new();
            for f in split_list(v) {
                let fam = match f.to_ascii_lowercase().as_str() {
                    "ipv4" => IpFamily::V4,
                    "ipv6" => IpFamily::V6,
                    _ => return Err(format!("{f:?} is not an IP family (ipv4, ipv6)")),
                };
                if fams.contains(&fam) {
                    return Err(format!("{f} is listed twice"));
                }
                fams.push(fam);
            }
            if fams.is_empty() {
                return Err("is empty; use ipv4, ipv6 or both".into());
            }
            vc.ip_families = Some(fams);
        }
        "soap-roundtrip-count" => {
            let n: u32 = v.parse().map_err(|_| format!("{v:?} is not a number"))?;
            if n > 10 {
                return Err(format!("{n} is out of range (0-10)"));
            }
            // As upstream: 0 means the default.
            vc.roundtrip_count = Some(if n == 0 { 3 } else { n });
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The user and password of vCenter `server` in a credentials Secret's data, as upstream's
/// credential manager reads them: keys `<server>.username` and `<server>.password`, matched
/// without regard to case; any other key is refused (naming the key, never a value).
pub fn credentials_from_secret(
    server: &str,
    data: &SecretData,
) -> std::result::Result<(String, Secret), String> {
    let server = server.to_ascii_lowercase();
    let (mut user, mut password) = (None, None);
    for (key, value) in data {
        let lower = key.to_ascii_lowercase();
        let (vc, slot) = if let Some(vc) = lower.strip_suffix(".username") {
            (vc, &mut user)
        } else if let Some(vc) = lower.strip_suffix(".password") {
            (vc, &mut password)
        } else {
            return Err(format!(
                "unknown key {key:?} (keys are <server>.username and <server>.password)"
            ));
        };
        if vc == server {
            let text =
                String::from_utf8(value.clone()).map_err(|_| format!("{key} is not UTF-8"))?;
            *slot = Some(text);
        }
    }
    match (user.filter(|u| !u.is_empty()), password) {
        (Some(u), Some(p)) => Ok((u, Secret(p))),
        (None, _) => Err(format!("has no {server}.username")),
        (_, None) => Err(format!("has no {server}.password")),
    }
}

fn non_empty(v: &str) -> Option<String> {
    Some(v.trim().to_owned()).filter(|s| !s.is_empty())
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A boolean of either format, as gcfg reads one (an empty value is `true`).
fn parse_bool(v: &str) -> std::result::Result<bool, String> {
    gcfg::parse_bool(Some(v))
}

fn parse_cidr(v: &str) -> std::result::Result<IpNet, String> {
    v.trim()
        .parse::<IpNet>()
        .map(|n| n.trunc())
        .map_err(|_| format!("{v:?} is not a CIDR like 10.0.0.0/24"))
}

fn parse_cidr_opt(v: &str) -> std::result::Result<Option<IpNet>, String> {
    non_empty(v).as_deref().map(parse_cidr).transpose()
}

fn parse_cidr_list(v: &str) -> std::result::Result<Vec<IpNet>, String> {
    split_list(v).iter().map(|s| parse_cidr(s)).collect()
}

// ------------------------------------------------------------------ INI (gcfg)

/// The legacy INI through the shared gcfg reader ([`hypercloud_cloudprovider::gcfg`], as the
/// aws and openstack providers read theirs): section headers become key-less entries (an empty
/// `[VirtualCenter "host"]` still names a vCenter), a bare key is `true`, names lower-cased.
fn ini_entries(text: &str) -> std::result::Result<Vec<Entry>, String> {
    let file = gcfg::parse(text)?;
    let headers = file.sections.into_iter().map(|h| {
        (
            h.line,
            Entry {
                section: h.name.to_ascii_lowercase(),
                subsection: h.subsection,
                key: String::new(),
                value: String::new(),
                at: format!("line {}", h.line),
            },
        )
    });
    let keys = file.entries.into_iter().map(|e| {
        (
            e.line,
            Entry {
                key: e.key_lower(),
                section: e.section,
                subsection: e.subsection,
                value: e.value.unwrap_or_else(|| "true".to_owned()),
                at: format!("line {}", e.line),
            },
        )
    });
    let mut all: Vec<(usize, Entry)> = headers.chain(keys).collect();
    // File order: a header before the keys below it.
    all.sort_by_key(|(line, _)| *line);
    Ok(all.into_iter().map(|(_, e)| e).collect())
}

// ------------------------------------------------------------------ YAML

/// The YAML format flattened to INI entries: `global:` → `[Global]`, `vcenter: {name: ...}` →
/// `[VirtualCenter "name"]`, `labels:`, `nodes:` (camelCase keys lower-cased); lists become
/// comma-separated values.
fn yaml_entries(text: &str) -> std::result::Result<Vec<Entry>, String> {
    use serde_yaml::Value;
    // Before parsing: the parser's time grows with the square of the nesting.
    hypercloud_cloudprovider::yaml::check_depth(text)?;
    let doc: Value =
        serde_yaml::from_str(text).map_err(|e| format!("neither INI nor valid YAML: {e}"))?;
    let Value::Mapping(top) = doc else {
        return Err("YAML config must be a mapping with global:, vcenter:, labels:".into());
    };
    let scalar = |v: &Value, at: &str| -> std::result::Result<String, String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Null => Ok(String::new()),
            Value::Sequence(items) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    _ => Err(format!("{at}: list items must be strings")),
                })
                .collect::<std::result::Result<Vec<_>, _>>()
                .map(|v| v.join(",")),
            _ => Err(format!("{at}: expected a value, found a mapping")),
        }
    };
    let mut out = Vec::new();
    let section = |sec: &str,
                   sub: Option<String>,
                   map: &Value,
                   at: &str,
                   out: &mut Vec<Entry>|
     -> std::result::Result<(), String> {
        out.push(Entry {
            section: sec.into(),
            subsection: sub.clone(),
            key: String::new(),
            value: String::new(),
            at: at.into(),
        });
        let m = match map {
            Value::Mapping(m) => m.clone(),
            Value::Null => Default::default(),
            _ => return Err(format!("{at}: expected a mapping")),
        };
        for (k, v) in &m {
            let k = k.as_str().ok_or(format!("{at}: keys must be strings"))?;
            let path = format!("{at}.{k}");
            out.push(Entry {
                section: sec.into(),
                subsection: sub.clone(),
                key: k.to_ascii_lowercase(),
                value: scalar(v, &path)?,
                at: path,
            });
        }
        Ok(())
    };
    for (k, v) in &top {
        let k = k.as_str().ok_or("top-level keys must be strings")?;
        match k.to_ascii_lowercase().as_str() {
            "global" => section("global", None, v, "global", &mut out)?,
            "labels" => section("labels", None, v, "labels", &mut out)?,
            "nodes" => section("nodes", None, v, "nodes", &mut out)?,
            "vcenter" | "virtualcenter" => {
                let Value::Mapping(m) = v else {
                    return Err(format!("{k}: expected a mapping of vCenter names"));
                };
                for (name, vc) in m {
                    let name = name.as_str().ok_or(format!("{k}: names must be strings"))?;
                    section(
                        "virtualcenter",
                        Some(name.into()),
                        vc,
                        &format!("{k}.{name}"),
                        &mut out,
                    )?;
                }
            }
            other => out.push(Entry {
                section: other.into(),
                subsection: None,
                key: String::new(),
                value: String::new(),
                at: k.into(),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const INI: &str = r#"
[Global]
user = "administrator@vsphere.local"
password = "s3cr\"et"
port = "8989"
insecure-flag = "1"
datacenters = "DC0, DC1"

[VirtualCenter "127.0.0.1"]

[Workspace]
server = "127.0.0.1"
datacenter = "DC0"
default-datastore = "LocalDS_0"
folder = "kubernetes"

[Labels]
region = k8s-region
zone = k8s-zone
colour = blue
"#;

    const YAML: &str = r#"
global:
  user: administrator@vsphere.local
  password: 's3cr"et'
  port: 8989
  insecure-flag: true
  datacenters:
    - DC0
    - DC1
vcenter:
  127.0.0.1:
    server: 127.0.0.1
labels:
  region: k8s-region
  zone: k8s-zone
  colour: blue
"#;

    #[test]
    fn ini_and_yaml_give_the_same_config() {
        let ini = Config::parse(INI, "a.conf").expect("ini");
        let yaml = Config::parse(YAML, "a.yaml").expect("yaml");
        assert_eq!(ini.format, "ini");
        assert_eq!(yaml.format, "yaml");
        assert_eq!(ini.vcenters, yaml.vcenters);
        assert_eq!(ini.labels, yaml.labels);
        assert_eq!(ini.vcenters[0].port, 8989);
        assert_eq!(ini.vcenters[0].password.expose(), "s3cr\"et");
        assert_eq!(ini.vcenters[0].datacenters, vec!["DC0", "DC1"]);
        assert!(ini.vcenters[0].insecure);
        assert_eq!(ini.labels.zone.as_deref(), Some("k8s-zone"));
        assert_eq!(ini.vcenters[0].ip_families, vec![IpFamily::V4]);
        // Unknown keys are warned about by name in both.
        assert!(
            ini.warnings.iter().any(|w| w.contains("[labels] colour")),
            "{:?}",
            ini.warnings
        );
        assert!(
            yaml.warnings.iter().any(|w| w.contains("[labels] colour")),
            "{:?}",
            yaml.warnings
        );
        assert!(ini.warnings.iter().any(|w| w.contains("folder")));
        assert!(!ini.warnings.iter().any(|w| w.contains("default-datastore")));
        assert_eq!(
            ini.workspace.default_datastore.as_deref(),
            Some("LocalDS_0")
        );
        assert!(!format!("{:?}", ini.vcenters).contains("s3cr"));
    }

    #[test]
    fn scsi_controller_types_as_upstream() {
        let base = "[Global]\nuser = u\npassword = p\n[VirtualCenter \"vc\"]\n";
        let parse = |extra: &str| Config::parse(&format!("{base}{extra}"), "t.conf");
        assert_eq!(
            parse("").expect("default").scsi_controller_type,
            "ParaVirtualSCSIController"
        );
        assert_eq!(
            parse("[Disk]\nscsicontrollertype = lsilogic-sas\n")
                .expect("lsilogic-sas")
                .scsi_controller_type,
            "VirtualLsiLogicSASController"
        );
        let err = parse("[Disk]\nscsicontrollertype = buslogic\n")
            .expect_err("not supported")
            .to_string();
        assert!(
            err.contains("\"buslogic\" is not a supported SCSI controller type"),
            "{err}"
        );
    }

    #[test]
    fn numbers_are_range_checked() {
        for (bad, want) in [
            ("port = 70000", "70000 is not a port number"),
            ("port = -1", "is not a port number"),
            ("soap-roundtrip-count = 99", "out of range"),
        ] {
            let text = format!("[Global]\nuser=u\npassword=p\n{bad}\n[VirtualCenter \"vc\"]\n");
            let err = Config::parse(&text, "x.conf").expect_err(bad).to_string();
            assert!(err.contains(want), "{bad}: {err}");
            assert!(err.contains("line 4 [global]"), "{err}");
        }
        let err = Config::parse(
            "[Global]\nuser=u\npassword=p\n[VirtualCenter \"vc\"]\n[Hypercloud]\ncache-ttl = 1h\n",
            "x",
        )
        .expect_err("ttl")
        .to_string();
        assert!(err.contains("cache-ttl"), "{err}");
        for bad in ["500ms", "61m", "0s"] {
            let err = Config::parse(
                &format!("[Global]\nuser=u\npassword=p\n[VirtualCenter \"vc\"]\n[Hypercloud]\ntask-timeout = {bad}\n"),
                "x",
            )
            .expect_err(bad)
            .to_string();
            assert!(
                err.contains("task-timeout") && err.contains("out of range (1s to 1h)"),
                "{err}"
            );
        }
    }

    #[test]
    fn secrets_name_the_credentials_and_bad_thumbprints_are_refused() {
        let c = Config::parse(
            "[Global]\nsecret-name = vcreds\nsecret-namespace = kube-system\n[VirtualCenter \"vc.example\"]\n",
            "x",
        )
        .expect("credentials from the global Secret");
        assert_eq!(
            c.vcenters[0].credentials_secret,
            Some(SecretRef {
                namespace: "kube-system".into(),
                name: "vcreds".into()
            })
        );
        // The VirtualCenter section's Secret wins over the global one.
        let c = Config::parse(
            "[Global]\nsecret-name = g\nsecret-namespace = ns\n[VirtualCenter \"vc\"]\nsecret-name = own\nsecret-namespace = vc-ns\n",
            "x",
        )
        .expect("per-vCenter secret");
        assert_eq!(
            c.vcenters[0]
                .credentials_secret
                .clone()
                .unwrap()
                .to_string(),
            "vc-ns/own"
        );
        for (text, want) in [
            (
                "[Global]\nsecret-name = g\n[VirtualCenter \"vc\"]\n",
                "secret-name needs secret-namespace",
            ),
            (
                "[Global]\nsecrets-directory = /etc/s\n[VirtualCenter \"vc\"]\n",
                "secrets directory",
            ),
            ("[VirtualCenter \"vc\"]\n", "no user for vCenter \"vc\""),
        ] {
            let err = Config::parse(text, "x").expect_err(text).to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        let err = Config::parse("global:\n  thumbprint: AB:CD\n", "x")
            .expect_err("thumb")
            .to_string();
        assert!(
            err.contains("thumbprint") && err.contains("2 bytes"),
            "{err}"
        );
    }

    #[test]
    fn credentials_in_a_secret_are_read_as_upstream_reads_them() {
        let data = |pairs: &[(&str, &str)]| -> SecretData {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect()
        };
        let both = data(&[
            ("VC.example.username", "admin@vsphere.local"),
            ("vc.example.password", "hunter2"),
            ("other.username", "o"),
            ("other.password", "p"),
        ]);
        let (user, password) = credentials_from_secret("vc.example", &both).expect("credentials");
        assert_eq!(user, "admin@vsphere.local");
        assert_eq!(password.expose(), "hunter2");
        for (d, want) in [
            (
                data(&[("vc.example.password", "hunter2")]),
                "has no vc.example.username",
            ),
            (
                data(&[("vc.example.username", "u")]),
                "has no vc.example.password",
            ),
            (
                data(&[("vc.example.username", "u"), ("vc.example.pass", "hunter2")]),
                "unknown key \"vc.example.pass\"",
            ),
        ] {
            let e = credentials_from_secret("vc.example", &d).expect_err("refused");
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn thumbprints_per_vcenter_or_global() {
        let sha1 = "3F:95:12:A0:2B:6C:77:E1:90:AB:CD:EF:01:23:45:67:89:AB:CD:EF";
        let c = Config::parse(
            &format!(
                "[Global]\nuser = u\npassword = p\nthumbprint = \"{}\"\n[VirtualCenter \"vc\"]\n",
                sha1.to_lowercase()
            ),
            "x",
        )
        .expect("global thumbprint");
        assert_eq!(
            c.vcenters[0]
                .thumbprint
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some(sha1)
        );
        let c = Config::parse(
            &format!("[Global]\nuser = u\npassword = p\nthumbprint = {}\n[VirtualCenter \"vc\"]\nthumbprint = {}\n", sha1, "AB".repeat(32)),
            "x",
        )
        .expect("per-vCenter thumbprint");
        assert_eq!(
            c.vcenters[0]
                .thumbprint
                .as_ref()
                .map(|t| t.to_string().len()),
            Some(32 * 3 - 1)
        );
        for bad in ["nothex", "AB:C", "AB:CD"] {
            let err = Config::parse(&format!("[Global]\nuser = u\npassword = p\nthumbprint = {bad}\n[VirtualCenter \"vc\"]\n"), "x")
                .expect_err(bad)
                .to_string();
            assert!(err.contains("thumbprint"), "{bad}: {err}");
        }
    }

    #[test]
    fn missing_vcenter_user_or_password_is_named() {
        let err = Config::parse("[Global]\nuser = u\n", "x")
            .expect_err("no vc")
            .to_string();
        assert!(err.contains("VirtualCenter"), "{err}");
        let err = Config::parse("[VirtualCenter \"h\"]\nuser = u\n", "x")
            .expect_err("no pw")
            .to_string();
        assert!(err.contains("no password"), "{err}");
    }

    #[test]
    fn several_vcenters_keep_their_order_and_fall_back_to_global() {
        let ini = r#"
[Global]
user = g
password = gp
port = 443
datacenters = DC0
[VirtualCenter "vc-b.example"]
user = b
port = 8443
[VirtualCenter "vc-a.example"]
datacenters = DC1, DC2
secret-name = a-creds
secret-namespace = kube-system
[Workspace]
server = vc-a.example
datacenter = DC2
"#;
        let c = Config::parse(ini, "x").expect("two vCenters");
        let servers: Vec<&str> = c.vcenters.iter().map(|v| v.server.as_str()).collect();
        assert_eq!(servers, ["vc-b.example", "vc-a.example"], "file order");
        let (b, a) = (&c.vcenters[0], &c.vcenters[1]);
        assert_eq!(
            (b.user.as_str(), b.password.expose(), b.port),
            ("b", "gp", 8443)
        );
        assert_eq!(b.datacenters, ["DC0"]);
        assert_eq!(b.credentials_secret, None);
        assert_eq!((a.user.as_str(), a.port), ("g", 443));
        assert_eq!(a.datacenters, ["DC1", "DC2"]);
        assert_eq!(
            a.credentials_secret
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("kube-system/a-creds")
        );
        assert_eq!(c.workspace_vcenter_index(), 1);
        assert_eq!(c.workspace_vcenter().unwrap().server, "vc-a.example");
        // Without [Workspace] server: the first.
        let c = Config::parse(
            &ini.replace("server = vc-a.example\ndatacenter = DC2\n", ""),
            "x",
        )
        .expect("no workspace server");
        assert_eq!(c.workspace_vcenter().unwrap().server, "vc-b.example");
        // The YAML map keeps its order too.
        let y = Config::parse(
            "global:\n  user: u\n  password: p\nvcenter:\n  zz:\n    server: 10.0.0.9\n  aa:\n    server: 10.0.0.1\n",
            "y",
        )
        .expect("yaml");
        assert_eq!(y.vcenters[0].server, "10.0.0.9");
        assert_eq!(y.vcenters[1].server, "10.0.0.1");
        for (text, want) in [
            (
                ini.replace("server = vc-a.example", "server = vc-c.example"),
                "[Workspace] server \"vc-c.example\" is not one of the configured vCenters (vc-b.example, vc-a.example)",
            ),
            (
                ini.replace("datacenter = DC2", "datacenter = DC0"),
                "[Workspace] datacenter \"DC0\" is not one of datacenters (DC1, DC2)",
            ),
            (
                "[Global]\nuser=u\npassword=p\n[VirtualCenter \"a\"]\nserver = h\n[VirtualCenter \"b\"]\nserver = h\n".into(),
                "[VirtualCenter \"b\"] is vCenter h:443 again",
            ),
            (
                "[Global]\nuser=u\n[VirtualCenter \"a\"]\npassword = p\n[VirtualCenter \"b\"]\n".into(),
                "no password for vCenter \"b\"",
            ),
        ] {
            let err = Config::parse(&text, "x").expect_err(want).to_string();
            assert!(err.contains(want), "{err}");
        }
        // The same host on another port is another vCenter.
        let c = Config::parse(
            "[Global]\nuser=u\npassword=p\n[VirtualCenter \"a\"]\nserver = h\n[VirtualCenter \"b\"]\nserver = h\nport = 444\n",
            "x",
        )
        .expect("two ports");
        assert_eq!(c.vcenters.len(), 2);
        // The legacy [Global] server form is one vCenter.
        let c = Config::parse(
            "[Global]\nserver = old.example\nuser = u\npassword = p\n",
            "x",
        )
        .expect("legacy");
        assert_eq!(c.vcenters.len(), 1);
        assert_eq!(c.workspace_vcenter().unwrap().server, "old.example");
    }

    #[test]
    fn section_values_override_global_and_nodes_parse() {
        let c = Config::parse(
            r#"
[Global]
user = g
password = gp
port = 443
[VirtualCenter "vc.example"]
user = v
port = 8443
ip-family = ipv6, ipv4
[Nodes]
internal-network-subnet-cidr = 10.1.0.0/16
exclude-external-network-subnet-cidr = 10.2.0.0/16,10.3.0.0/16
[Network]
public-network = "VM Network"
[Hypercloud]
product-uuid-file = /tmp/uuid
cache-ttl = 500ms
task-timeout = 2s
"#,
            "x",
        )
        .expect("valid");
        assert_eq!(c.vcenters[0].user, "v");
        assert_eq!(c.vcenters[0].password.expose(), "gp");
        assert_eq!(c.vcenters[0].port, 8443);
        assert_eq!(c.vcenters[0].ip_families, vec![IpFamily::V6, IpFamily::V4]);
        assert_eq!(
            c.nodes.internal_subnet,
            Some("10.1.0.0/16".parse().expect("cidr"))
        );
        assert_eq!(c.nodes.exclude_external.len(), 2);
        assert_eq!(c.nodes.external_network.as_deref(), Some("VM Network"));
        assert_eq!(c.product_uuid_file, PathBuf::from("/tmp/uuid"));
        assert_eq!(c.cache_ttl, Duration::from_millis(500));
        assert_eq!(c.task_timeout, Duration::from_secs(2));
        assert_eq!(c.vcenters[0].base_url(), "https://vc.example:8443");
    }

    #[test]
    fn bad_syntax_names_the_line() {
        let err = Config::parse("[Global\nuser = u\n", "f.conf")
            .expect_err("bad")
            .to_string();
        assert!(err.contains("line 1") && err.contains("f.conf"), "{err}");
        let err = Config::parse("[Global]\nuser = \"open\n", "f.conf")
            .expect_err("bad")
            .to_string();
        assert!(err.contains("unterminated"), "{err}");
        let err = Config::parse("[Nodes]\ninternal-network-subnet-cidr = nope\n", "f")
            .expect_err("cidr")
            .to_string();
        assert!(err.contains("not a CIDR"), "{err}");
    }

    hypercloud_cloudprovider::config_fuzz!(
        Config::parse,
        "fuzz.conf",
        mutated_ini => INI,
        mutated_yaml => YAML,
    );
}
