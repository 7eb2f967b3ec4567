//! The `photon` cloud provider: Kubernetes on VMware Photon Controller, as the in-tree provider
//! of Kubernetes v1.6 to v1.13 served it (`pkg/cloudprovider/providers/photon`, removed for
//! v1.14 by kubernetes/kubernetes#72178 when Photon Controller itself had been discontinued).
//!
//! It knows one project's VMs through Photon Controller's REST API (`/v1`, see [`client`]):
//! - **Instances**: a Node is the project's VM of its name (with `overrideIP`, the VM one of
//!   whose networks has the Node's name as its IP). `NodeAddresses`: the IPs of the VM's
//!   network connections (`GetNetworks`), `ExternalIP` when the NIC's MAC is a VMware one
//!   (`00:50:56`, `00:0c:29`) and `InternalIP` otherwise, as upstream. `InstanceID` is the VM ID
//!   (provider ID `photon://<vm id>`); the kubelet's own Node answers `[Global] vmID` when given,
//!   as upstream. Unlike upstream, which left them unimplemented, the provider-ID calls the
//!   lifecycle controllers make are answered from `GET /v1/vms/{id}` (a `STOPPED` VM is shut
//!   down).
//! - **Zones**: Photon Controller has none: every zone is empty, as upstream's.
//! - **Persistent disks** (the in-tree `kubernetes.io/photon-pd` plugin): created in the project
//!   with the StorageClass's `flavor`, attached, detached and deleted through Photon tasks,
//!   polled until they end, as upstream's `CreateDisk`/`AttachDisk`/`DetachDisk`/`DeleteDisk`.
//!   No resizing: Photon Controller could not grow a disk.
//! - No load balancers, routes or clusters, as upstream (which claimed Clusters and returned
//!   none: here the capability is absent).

pub mod client;
pub mod config;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hypercloud_cloudprovider::{
    ClassParameters, CloudVolume, Error, Instances, Interface, ProvisionedVolume, Registry, Result,
    VolumeAttacher, VolumeFilter, VolumeProvisioner, VolumeRequest, Zone, Zones,
};
use k8s_openapi::api::core::v1::{
    NodeAddress, PersistentVolume, PersistentVolumeSpec, PhotonPersistentDiskVolumeSource,
};
use serde_json::json;
use tokio::sync::OnceCell;

use client::{Client, Connection, Disk, Vm};
pub use config::{Config, ProjectRef};

/// The name given to `--cloud-provider`.
pub const PROVIDER_NAME: &str = "photon";
/// Provider IDs are `photon://<vm id>`.
pub const PROVIDER_ID_PREFIX: &str = "photon://";
/// The in-tree volume plugin of Photon persistent disks.
pub const PHOTON_PD_PLUGIN: &str = "kubernetes.io/photon-pd";
/// A persistent disk's kind.
const DISK_KIND: &str = "persistent-disk";
/// The file system a PV names when its class gives none.
const DEFAULT_FS_TYPE: &str = "ext4";
/// MAC prefixes (OUIs) of VMware's NICs: upstream took their IPs as external.
const VMWARE_OUIS: [&str; 2] = ["00:50:56", "00:0c:29"];
/// The longest entity name Photon Controller takes.
const MAX_NAME: usize = 63;

/// Registers the provider under [`PROVIDER_NAME`].
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "VMware Photon Controller (one project's VMs by name, persistent disks through tasks); configured by the legacy [Global] target/project --cloud-config",
        |config| Ok(Arc::new(Photon::new(Config::from_cloud_config(config)?)?) as Arc<dyn Interface>),
    );
}

/// The photon cloud provider.
#[derive(Debug)]
pub struct Photon {
    config: Config,
    client: Client,
    project: OnceCell<String>,
    /// The kubelet's host name (`CurrentNodeName`): its Node is `[Global] vmID`.
    local_hostname: Mutex<Option<String>>,
}

impl Photon {
    /// A provider of the endpoint in `config`; with `authentication`, the login info file is
    /// read now. Nothing is asked of the endpoint until the first call.
    pub fn new(config: Config) -> Result<Photon> {
        let client = Client::new(&config)?;
        Ok(Photon {
            config,
            client,
            project: OnceCell::new(),
            local_hostname: Mutex::new(None),
        })
    }

    /// The project's ID: `[Global] project`, or the project `tenant`/`project` name.
    pub async fn project_id(&self) -> Result<&str> {
        self.project
            .get_or_try_init(|| async {
                match &self.config.project {
                    ProjectRef::Id(id) => Ok(id.clone()),
                    ProjectRef::Named { tenant, project } => {
                        self.client.project_id(tenant, project).await
                    }
                }
            })
            .await
            .map(String::as_str)
    }

    /// The project's VMs (with `name`, only those of that name).
    pub async fn vms(&self, name: Option<&str>) -> Result<Vec<Vm>> {
        let project = self.project_id().await?;
        let query = name
            .and_then(|n| serde_urlencoded::to_string([("name", n)]).ok())
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        self.client
            .list(&format!("/v1/projects/{project}/vms{query}"))
            .await
    }

    /// The VM of a Node's name (its IP with `overrideIP`), as upstream's `getInstanceID`.
    async fn vm_named(&self, name: &str) -> Result<Vm> {
        if self.config.override_ip {
            for vm in self.vms(None).await? {
                let connections = match self.client.networks(&vm.id).await {
                    Ok(c) => c.unwrap_or_default(),
                    // As upstream: a VM whose networks cannot be read is skipped.
                    Err(error) => {
                        tracing::warn!(vm = %vm.id, %error, "reading the VM's networks failed");
                        continue;
                    }
                };
                if connections
                    .iter()
                    .any(|c| c.ip_address.as_deref() == Some(name))
                {
                    return Ok(vm);
                }
            }
            return Err(Error::InstanceNotFound);
        }
        self.vms(Some(name))
            .await?
            .into_iter()
            .find(|v| v.name == name)
            .ok_or(Error::InstanceNotFound)
    }

    fn is_local(&self, name: &str) -> bool {
        self.local_hostname
            .lock()
            .map(|h| h.as_deref() == Some(name))
            .unwrap_or(false)
    }

    /// The VM ID of a Node's name.
    async fn vm_id_of(&self, name: &str) -> Result<String> {
        if let Some(id) = self.config.vm_id.as_ref().filter(|_| self.is_local(name)) {
            return Ok(id.clone());
        }
        Ok(self.vm_named(name).await?.id)
    }

    async fn vm(&self, id: &str) -> Result<Option<Vm>> {
        self.client.get(&format!("/v1/vms/{id}")).await
    }

    async fn addresses(&self, vm_id: &str) -> Result<Vec<NodeAddress>> {
        let connections = self
            .client
            .networks(vm_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(addresses(&connections))
    }

    async fn disk(&self, id: &str) -> Result<Option<Disk>> {
        self.client.get(&format!("/v1/disks/{id}")).await
    }
}

/// The VM ID of `photon://<id>`; another cloud's ID is an error, never "not found".
fn vm_id(provider_id: &str) -> Result<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "parse provider ID",
                format!("{provider_id:?} is not a {PROVIDER_ID_PREFIX}<vm id> provider ID"),
            )
        })
}

/// A VM's addresses from its connections: `-` is no address; a VMware MAC's IP is external.
fn addresses(connections: &[Connection]) -> Vec<NodeAddress> {
    let mut out: Vec<NodeAddress> = Vec::new();
    for c in connections {
        let Some(ip) = c
            .ip_address
            .as_deref()
            .filter(|ip| !ip.is_empty() && *ip != "-")
        else {
            continue;
        };
        let mac = c.mac_address.as_deref().unwrap_or("-").to_ascii_lowercase();
        let type_ = if VMWARE_OUIS.iter().any(|oui| mac.starts_with(oui)) {
            "ExternalIP"
        } else {
            "InternalIP"
        };
        if !out.iter().any(|a| a.address == ip && a.type_ == type_) {
            out.push(NodeAddress {
                type_: type_.into(),
                address: ip.into(),
            });
        }
    }
    out
}

impl Interface for Photon {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// As upstream.
    fn has_cluster_id(&self) -> bool {
        true
    }

    hypercloud_cloudprovider::capability_getters! {
        instances, zones, volume_provisioner, volume_attacher
    }
}

#[async_trait]
impl Instances for Photon {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let id = self.vm_id_of(name).await?;
        self.addresses(&id).await
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        self.addresses(vm_id(provider_id)?).await
    }

    /// The VM ID (provider ID `photon://<vm id>`), as upstream.
    async fn instance_id(&self, name: &str) -> Result<String> {
        self.vm_id_of(name).await
    }

    /// Empty, as upstream (a VM's flavor is not an instance type it reported).
    async fn instance_type(&self, _name: &str) -> Result<String> {
        Ok(String::new())
    }

    async fn instance_type_by_provider_id(&self, _provider_id: &str) -> Result<String> {
        Ok(String::new())
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    /// The host name; remembered, so that Node's ID is `[Global] vmID`, as upstream.
    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        if let Ok(mut h) = self.local_hostname.lock() {
            *h = Some(hostname.to_owned());
        }
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.vm(vm_id(provider_id)?).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let vm = self
            .vm(vm_id(provider_id)?)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(vm.state == "STOPPED")
    }
}

/// Photon Controller has no zones: every answer is the empty zone, as upstream's `GetZone`.
#[async_trait]
impl Zones for Photon {
    async fn get_zone(&self) -> Result<Zone> {
        Ok(Zone::default())
    }

    async fn get_zone_by_provider_id(&self, _provider_id: &str) -> Result<Zone> {
        Ok(Zone::default())
    }

    async fn get_zone_by_node_name(&self, _name: &str) -> Result<Zone> {
        Ok(Zone::default())
    }
}

fn cloud_volume(d: Disk) -> CloudVolume {
    CloudVolume {
        id: d.id,
        name: d.name,
        size_gib: d.capacity_gb,
        zone: String::new(),
        attached_to: d.vms,
    }
}

#[async_trait]
impl VolumeProvisioner for Photon {
    fn plugin_name(&self) -> &str {
        PHOTON_PD_PLUGIN
    }

    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .photon_persistent_disk
            .as_ref()
            .map(|d| d.pd_id.clone())
    }

    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            photon_persistent_disk: Some(PhotonPersistentDiskVolumeSource {
                pd_id: volume_id.to_owned(),
                fs_type: Some(fs_type.unwrap_or(DEFAULT_FS_TYPE).to_owned()),
            }),
            ..Default::default()
        }
    }

    /// Upstream's keys: `flavor` (the disk flavor) and `fsType`, case-insensitive; any other is
    /// refused by name.
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        class_parameters(parameters)
    }

    /// Photon Controller's limit on entity names.
    fn max_volume_name_len(&self) -> usize {
        MAX_NAME
    }

    async fn create_volume(&self, request: &VolumeRequest) -> Result<ProvisionedVolume> {
        if !request.zone.is_empty() {
            tracing::debug!(zone = %request.zone, "Photon Controller has no zones: the disk goes in the project");
        }
        let project = self.project_id().await?;
        let tags: Vec<String> = request
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let spec = json!({
            "name": request.name, "kind": DISK_KIND, "flavor": request.volume_type,
            "capacityGb": request.size_gib, "tags": tags,
        });
        let task = self
            .client
            .change(
                reqwest::Method::POST,
                &format!("/v1/projects/{project}/disks"),
                Some(&spec),
            )
            .await?;
        if task.entity.id.is_empty() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "create disk",
                format!("task {} completed without the disk's ID", task.id),
            ));
        }
        Ok(ProvisionedVolume {
            id: task.entity.id,
            size_gib: request.size_gib,
            labels: BTreeMap::new(),
        })
    }

    async fn delete_volume(&self, volume_id: &str) -> Result<()> {
        if self.disk(volume_id).await?.is_none() {
            return Ok(());
        }
        self.client
            .change(
                reqwest::Method::DELETE,
                &format!("/v1/disks/{volume_id}"),
                None,
            )
            .await
            .map(drop)
    }

    /// Photon Controller could not grow a disk.
    async fn expand_volume(&self, _volume_id: &str, _new_size_gib: u64) -> Result<u64> {
        Err(Error::NotImplemented)
    }

    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> Result<Vec<CloudVolume>> {
        let project = self.project_id().await?;
        let disks: Vec<Disk> = match filter {
            VolumeFilter::Id(id) => self.disk(id).await?.into_iter().collect(),
            VolumeFilter::All => {
                self.client
                    .list(&format!("/v1/projects/{project}/disks"))
                    .await?
            }
            VolumeFilter::Name(name) => {
                let query = serde_urlencoded::to_string([("name", name)]).unwrap_or_default();
                self.client
                    .list::<Disk>(&format!("/v1/projects/{project}/disks?{query}"))
                    .await?
                    .into_iter()
                    .filter(|d| d.name == name)
                    .collect()
            }
        };
        Ok(disks.into_iter().map(cloud_volume).collect())
    }
}

/// The photon-pd provisioner's StorageClass parameters.
fn class_parameters(
    parameters: &BTreeMap<String, String>,
) -> std::result::Result<ClassParameters, String> {
    let mut p = ClassParameters::default();
    for (k, v) in parameters {
        match k.to_ascii_lowercase().as_str() {
            "flavor" => p.volume_type = v.clone(),
            "fstype" => p.fs_type = Some(v.clone()).filter(|f| !f.is_empty()),
            _ => {
                return Err(format!(
                    "invalid option {k:?} for volume plugin {PHOTON_PD_PLUGIN}"
                ))
            }
        }
    }
    Ok(p)
}

#[async_trait]
impl VolumeAttacher for Photon {
    fn plugin_name(&self) -> &str {
        PHOTON_PD_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.photon_persistent_disk
            .as_ref()
            .map(|d| d.pd_id.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume
            .photon_persistent_disk
            .as_ref()
            .map(|d| d.pd_id.clone())
    }

    /// `POST /v1/vms/{id}/attach_disk` and its task; nothing to do when the VM has it, an
    /// error naming the VM that has it otherwise.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let disk = self.disk(volume_id).await?.ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "attach disk",
                format!("persistent disk {volume_id} not found"),
            )
        })?;
        if disk.vms.iter().any(|v| v == instance_id) {
            return Ok(());
        }
        if let Some(other) = disk.vms.first() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "attach disk",
                format!("persistent disk {volume_id} is attached to VM {other}, not {instance_id}"),
            ));
        }
        self.client
            .change(
                reqwest::Method::POST,
                &format!("/v1/vms/{instance_id}/attach_disk"),
                Some(&json!({"diskId": volume_id})),
            )
            .await
            .map(drop)
    }

    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let Some(disk) = self.disk(volume_id).await? else {
            return Ok(());
        };
        if !disk.vms.iter().any(|v| v == instance_id) {
            return Ok(());
        }
        self.client
            .change(
                reqwest::Method::POST,
                &format!("/v1/vms/{instance_id}/detach_disk"),
                Some(&json!({"diskId": volume_id})),
            )
            .await
            .map(drop)
    }

    /// `GET /v1/disks/{id}` lists its VMs, as upstream's `DiskIsAttached`.
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> Result<bool> {
        Ok(self
            .disk(volume_id)
            .await?
            .is_some_and(|d| d.vms.iter().any(|v| v == instance_id)))
    }

    /// `/dev/disk/by-id/wwn-0x<disk id without dashes>`, where upstream's attacher found the
    /// disk in the guest; an error when it is not attached there.
    async fn get_attachment_disk_path(&self, instance_id: &str, volume_id: &str) -> Result<String> {
        if !self.disk_is_attached(instance_id, volume_id).await? {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "find the disk's device",
                format!("persistent disk {volume_id} is not attached to VM {instance_id}"),
            ));
        }
        Ok(format!(
            "/dev/disk/by-id/wwn-0x{}",
            volume_id.replace('-', "")
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn conn(ip: &str, mac: &str) -> Connection {
        serde_json::from_value(json!({"ipAddress": ip, "macAddress": mac})).unwrap()
    }

    #[test]
    fn vmware_nics_are_external_others_internal_dashes_nothing() {
        let a = addresses(&[
            conn("10.0.0.5", "fa:16:3e:00:00:01"),
            conn("192.0.2.7", "00:50:56:aa:bb:cc"),
            conn("192.0.2.8", "00:0C:29:aa:bb:cc"),
            conn("-", "fa:16:3e:00:00:02"),
            conn("10.0.0.5", "fa:16:3e:00:00:01"),
        ]);
        let got: Vec<(&str, &str)> = a
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("InternalIP", "10.0.0.5"),
                ("ExternalIP", "192.0.2.7"),
                ("ExternalIP", "192.0.2.8")
            ]
        );
    }

    #[test]
    fn provider_ids_name_a_vm_of_this_cloud() {
        assert_eq!(vm_id("photon://abc").unwrap(), "abc");
        assert_eq!(vm_id("photon:///abc").unwrap(), "abc");
        for bad in ["ovirt:///abc", "photon://", "photon://a/b"] {
            assert!(vm_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn storage_class_parameters_as_upstream() {
        let p = class_parameters(&BTreeMap::from([
            ("Flavor".to_owned(), "pd-gold".to_owned()),
            ("fsType".to_owned(), "xfs".to_owned()),
        ]))
        .unwrap();
        assert_eq!(
            (p.volume_type.as_str(), p.fs_type.as_deref()),
            ("pd-gold", Some("xfs"))
        );
        let e =
            class_parameters(&BTreeMap::from([("zone".to_owned(), "a".to_owned())])).unwrap_err();
        assert_eq!(
            e,
            "invalid option \"zone\" for volume plugin kubernetes.io/photon-pd"
        );
    }
}
