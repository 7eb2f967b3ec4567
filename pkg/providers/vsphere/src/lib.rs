//! hypercloud-providers-vsphere: the `vsphere` cloud provider.
//!
//! Upstream equivalents: the legacy in-tree provider (`legacy-cloud-providers/vsphere`) and
//! kubernetes/cloud-provider-vsphere's CPI (`pkg/cloudprovider/vsphere`). Configuration is
//! either's `vsphere.conf` ([`config`]: the legacy INI or the CPI YAML, one internal
//! [`Config`]). vCenter is reached over the vim25 SOAP API (`soap`: typed requests and
//! responses with quick-xml) for the inventory, and the vAPI REST tagging endpoints for zones.
//!
//! Capabilities: Instances, InstancesV2 and Zones (VMs found by provider ID
//! `vsphere://<uuid>`, SMBIOS UUID, name, guest DNS name or IP; answered from one short-lived
//! listing of every VM; zones and regions from tags), PvLabeler (`vsphereVolume` PVs and
//! `csi.vsphere.vmware.com` PVs: the datastore's zone and region from tags), and the in-tree
//! `kubernetes.io/vsphere-volume` plugin's VolumeProvisioner and VolumeAttacher (VMDKs under
//! `kubevols/` on a datastore, added to and removed from VMs; expansion refused by name, as
//! upstream v1.20 had none). Not supported, as upstream: LoadBalancer, Routes, Clusters.
//!
//! Several vCenters (`[VirtualCenter "host"]` sections, as upstream): one connection and one
//! inventory each. A node's VM is looked for in every vCenter, in the order of the sections
//! (the vCenter that had it last is asked first), and whatever concerns that VM (zones,
//! addresses, existence, disks attached to it) is asked of the vCenter that has it. Volumes
//! are provisioned and deleted on the `[Workspace] server` vCenter
//! ([`Config::workspace_vcenter`]).
//!
//! ```no_run
//! # async fn demo() -> hypercloud_cloudprovider::Result<()> {
//! use hypercloud_cloudprovider::{CloudConfig, Interface};
//! let conf = CloudConfig {
//!     origin: "inline".into(),
//!     bytes: b"[Global]\nuser = u\npassword = p\ninsecure-flag = 1\n[VirtualCenter \"127.0.0.1\"]\nport = 8989\n".to_vec(),
//! };
//! let cloud = hypercloud_providers_vsphere::VSphere::from_cloud_config(Some(&conf))?;
//! cloud.initialize(None).await?;
//! let zone = cloud.zones().expect("zones").get_zone_by_node_name("node-1").await?;
//! # Ok(()) }
//! ```
//!
//! Start here: [`register`] and [`VSphere`], then `src/inventory.rs` (the listing every VM is
//! answered from) and `src/soap.rs` (the vim25 requests); [`config`] for `vsphere.conf`.
//!
//! Not here: load balancers and routes (vSphere has none, as upstream); storage-policy (SPBM)
//! volumes and volume expansion (refused by name).

mod client;
pub mod config;
mod disks;
mod error;
mod instances;
mod inventory;
mod soap;
mod volumes;

use hypercloud_cloudprovider::ProviderError as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use hypercloud_cloudprovider::credential_secret::{self, CredentialSecret, SecretRef};
use hypercloud_cloudprovider::{CloudConfig, Interface, Registry};

pub use config::Config;
pub use disks::{volume_parameters, VolumeParameters, VSPHERE_VOLUME_PLUGIN};
pub use error::{Error, Result};
pub use instances::{parse_provider_id, provider_id, PROVIDER_ID_PREFIX};
pub use volumes::parse_volume_path;

/// The name the provider is registered under.
pub const PROVIDER_NAME: &str = "vsphere";

/// A provider error of this cloud that no vCenter status code explains.
pub(crate) fn cloud_error(
    operation: impl Into<String>,
    message: impl Into<String>,
) -> hypercloud_cloudprovider::Error {
    hypercloud_cloudprovider::Error::cloud(PROVIDER_NAME, operation, message)
}

/// How long tag associations and host ancestry are cached: they change far less often than
/// VMs come and go.
const TAG_CACHE_TTL: Duration = Duration::from_secs(300);
/// Start-up's whole conversation with vCenter (service content, login, datacenters), retries
/// included: a slow or silent endpoint stops start-up within this, naming the endpoint,
/// instead of the request timeout times the round-trip count per call. Upstream has no key.
const STARTUP_DEADLINE: Duration = Duration::from_secs(90);

/// Registers `vsphere` in the binary's registry.
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "VMware vSphere (vim25 SOAP + vAPI tagging); configured by a legacy INI or cloud-provider-vsphere YAML vsphere.conf --cloud-config",
        |config| Ok(Arc::new(VSphere::from_cloud_config(config)?) as Arc<dyn Interface>),
    );
}

/// The node the kubelet registers as, and its VM's SMBIOS UUID.
#[derive(Debug, Clone)]
struct LocalNode {
    node_name: String,
    uuid: String,
    source: String,
}

/// The vSphere cloud provider.
pub struct VSphere {
    config: Arc<Config>,
    /// One inventory (and connection) per vCenter, in the order of [`Config::vcenters`].
    vcenters: Vec<inventory::Inventory>,
    /// Which vCenter had a VM when it was last found, by look-up key: asked first next time.
    located: Mutex<HashMap<String, usize>>,
    local: OnceLock<LocalNode>,
    /// The followed credentials Secrets (`secret-name`), each once, from
    /// [`Interface::initialize`].
    credentials: OnceLock<Vec<CredentialSecret>>,
}

impl std::fmt::Debug for VSphere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VSphere")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl VSphere {
    /// A provider for a parsed config; its warnings are logged here, once.
    pub fn new(config: Config) -> Result<Self> {
        for w in &config.warnings {
            tracing::warn!(origin = %config.origin, "vsphere cloud config: {w}");
        }
        if config.vcenters.is_empty() {
            return Err(Error::ParseCloudConfig {
                origin: config.origin.clone(),
                message: "no vCenter configured".into(),
            });
        }
        let vcenters = config
            .vcenters
            .iter()
            .enumerate()
            .map(|(i, vc)| {
                let client = client::Client::new(vc.clone())?;
                Ok(inventory::Inventory::new(
                    i,
                    client,
                    config.cache_ttl,
                    TAG_CACHE_TTL,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(VSphere {
            vcenters,
            located: Mutex::new(HashMap::new()),
            config: Arc::new(config),
            local: OnceLock::new(),
            credentials: OnceLock::new(),
        })
    }

    /// The registry's factory: a `vsphere.conf` is required.
    pub fn from_cloud_config(
        config: Option<&CloudConfig>,
    ) -> hypercloud_cloudprovider::Result<Self> {
        let Some(cc) = config else {
            return Err(hypercloud_cloudprovider::Error::MissingCloudConfig {
                provider: PROVIDER_NAME.into(),
            });
        };
        Config::parse(cc.text(PROVIDER_NAME)?, &cc.origin)
            .and_then(VSphere::new)
            .map_err(Error::into_cloud_config_error)
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The inventory of the vCenter volumes are provisioned on ([`Config::workspace_vcenter`]).
    fn workspace(&self) -> &inventory::Inventory {
        let i = self.config.workspace_vcenter_index();
        // `new` made one inventory per configured vCenter, and refused a config without one.
        &self.vcenters[i]
    }

    /// HTTP requests sent to vCenter so far (SOAP and vAPI, logins included), every vCenter's.
    pub fn api_calls(&self) -> u64 {
        self.vcenters.iter().map(|v| v.client.calls()).sum()
    }

    /// Task reads after the first one (the task was still running), so far: how fast vCenter
    /// finished, not what the provider asked; included in [`VSphere::api_calls`].
    pub fn task_repolls(&self) -> u64 {
        self.vcenters.iter().map(|v| v.task_repolls()).sum()
    }

    /// SOAP logins so far, every vCenter's: 1 per vCenter after start-up, one more per
    /// expired session.
    pub fn logins(&self) -> u64 {
        self.vcenters.iter().map(|v| v.client.logins()).sum()
    }

    /// Forgets cached listings and tags, so the next look-up asks vCenter.
    pub async fn invalidate_cache(&self) {
        for v in &self.vcenters {
            v.invalidate().await;
        }
    }

    /// Ends the SOAP and vAPI sessions (`SessionManager.Logout`) of every vCenter; the first
    /// error, after trying them all.
    pub async fn logout(&self) -> Result<()> {
        let mut first = Ok(());
        for v in &self.vcenters {
            if let Err(e) = v.client.logout().await {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    /// This machine's VM UUID: `[Global] vm-uuid`, else the product UUID file
    /// (`/sys/class/dmi/id/product_uuid`, `[Hypercloud] product-uuid-file`).
    pub fn local_uuid(&self) -> Result<String> {
        if let Some(u) = &self.config.vm_uuid {
            return Ok(u.clone());
        }
        let path = &self.config.product_uuid_file;
        let err = |message: String| Error::ReadProductUuid {
            path: path.display().to_string(),
            message,
        };
        let text = hypercloud_cloudprovider::input::read_input_text(path)
            .map_err(|e| err(e.to_string()))?;
        let uuid = text.trim().to_lowercase();
        let shape_ok = uuid.len() == 36
            && uuid.chars().enumerate().all(|(i, c)| {
                if [8, 13, 18, 23].contains(&i) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        if !shape_ok {
            return Err(err(format!("{:?} is not a UUID", text.trim())));
        }
        Ok(uuid)
    }

    /// How many versions of the credentials Secrets were applied so far (the ones read at
    /// start included), summed over the followed Secrets; 0 without `secret-name`.
    pub fn credentials_versions(&self) -> u64 {
        self.credentials
            .get()
            .map_or(0, |s| s.iter().map(CredentialSecret::applied_count).sum())
    }

    /// Each distinct credentials Secret the vCenters name, once, in the order of the vCenters
    /// that name it first, with the indices of every vCenter that uses it.
    fn credentials_secrets(&self) -> Vec<(SecretRef, Vec<usize>)> {
        let mut out: Vec<(SecretRef, Vec<usize>)> = Vec::new();
        for (i, vc) in self.config.vcenters.iter().enumerate() {
            let Some(secret) = &vc.credentials_secret else {
                continue;
            };
            match out.iter_mut().find(|(s, _)| s == secret) {
                Some((_, users)) => users.push(i),
                None => out.push((secret.clone(), vec![i])),
            }
        }
        out
    }

    /// Reads `secret` (with `client`, else the in-cluster configuration) and follows it: each
    /// version's `<server>.username` and `<server>.password` are used from the next login on
    /// by every vCenter of `users`. A version that lacks any of their keys is refused as a
    /// whole: no vCenter's credentials change.
    async fn follow_credentials(
        &self,
        secret: SecretRef,
        users: &[usize],
        client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<CredentialSecret> {
        let startup =
            |message: String| hypercloud_cloudprovider::Error::initialize(PROVIDER_NAME, message);
        let client = match client {
            Some(c) => c,
            None => credential_secret::client_for(None).await.map_err(|e| {
                startup(format!(
                    "secret-name {secret}: no Kubernetes client to read it with: {e}"
                ))
            })?,
        };
        let targets: Vec<(String, Arc<client::Credentials>)> = users
            .iter()
            .filter_map(|&i| self.vcenters.get(i))
            .map(|v| (v.client.vcenter().server.clone(), v.client.credentials()))
            .collect();
        let apply: credential_secret::Apply = Arc::new(move |data| {
            let read = targets
                .iter()
                .map(|(server, _)| config::credentials_from_secret(server, data))
                .collect::<std::result::Result<Vec<_>, String>>()?;
            for ((_, credentials), (user, password)) in targets.iter().zip(read) {
                credentials.replace(user, password);
            }
            Ok(())
        });
        CredentialSecret::follow(client, secret, apply)
            .await
            .map_err(|e| startup(e.to_string()))
    }

    /// Logs in to one vCenter and finds its datacenters, within [`STARTUP_DEADLINE`].
    async fn start_vcenter(
        &self,
        inv: &inventory::Inventory,
    ) -> hypercloud_cloudprovider::Result<()> {
        let vc = inv.client.vcenter();
        let init = async {
            inv.client.ensure_session().await?;
            inv.resolve_datacenters(&vc.datacenters).await
        };
        match tokio::time::timeout(STARTUP_DEADLINE, init).await {
            Ok(done) => done.map_err(|e| hypercloud_cloudprovider::Error::Initialize {
                provider: PROVIDER_NAME.into(),
                source: Box::new(self.naming_vcenter(inv, e)),
            }),
            Err(_) => Err(hypercloud_cloudprovider::Error::initialize(
                PROVIDER_NAME,
                format!(
                    "vCenter {}: logging in and finding the datacenters took more than {}s (start-up deadline, all retries included)",
                    vc.address(),
                    STARTUP_DEADLINE.as_secs()
                ),
            )),
        }
    }

    /// `e`, from `inv`'s vCenter, naming that vCenter when several are configured and `e`
    /// does not name it already (with one vCenter, errors stay as they always were).
    fn naming_vcenter(&self, inv: &inventory::Inventory, e: Error) -> Error {
        match e {
            e @ (Error::InvalidLogin { .. } | Error::UnknownDatacenter { .. }) => e,
            e if self.vcenters.len() == 1 => e,
            e => Error::AtVCenter {
                server: inv.client.vcenter().address(),
                source: Box::new(e),
            },
        }
    }

    fn remember_local_node(&self, node_name: &str) -> Result<()> {
        let uuid = self.local_uuid()?;
        let source = if self.config.vm_uuid.is_some() {
            "[Global] vm-uuid".to_owned()
        } else {
            self.config.product_uuid_file.display().to_string()
        };
        let _ = self.local.set(LocalNode {
            node_name: node_name.into(),
            uuid,
            source,
        });
        Ok(())
    }
}

#[async_trait]
impl Interface for VSphere {
    /// Reads and then follows the credentials Secrets (each distinct `secret-name` once),
    /// logs in to every vCenter and checks its configured datacenters, so that bad credentials or an unknown
    /// datacenter stop start-up with a clear error instead of failing every later call.
    async fn initialize(
        &self,
        client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<()> {
        if self.credentials.get().is_none() {
            let mut followed = Vec::new();
            for (secret, users) in self.credentials_secrets() {
                followed.push(
                    self.follow_credentials(secret, &users, client.clone())
                        .await?,
                );
            }
            let _ = self.credentials.set(followed);
        }
        // One after the other, in config order: the first that fails stops start-up, named.
        for inv in &self.vcenters {
            self.start_vcenter(inv).await?;
        }
        Ok(())
    }

    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// Every followed Secret's problem, joined with `; `.
    fn credentials_health(&self) -> std::result::Result<(), String> {
        let problems: Vec<String> = self
            .credentials
            .get()
            .into_iter()
            .flatten()
            .filter_map(|s| s.health().err())
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// As upstream's vSphere providers.
    fn has_cluster_id(&self) -> bool {
        true
    }

    hypercloud_cloudprovider::capability_getters! {
        instances, instances_v2, zones, pv_labeler, volume_provisioner, volume_attacher
    }
}
