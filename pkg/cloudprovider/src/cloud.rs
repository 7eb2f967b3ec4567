//! The provider interface and its capability traits, as upstream `cloudprovider.Interface`.
//!
//! Methods keep the upstream names (snake_cased) and semantics; the doc of each says what a
//! caller may rely on. Node names are plain `&str` (upstream `types.NodeName`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    LoadBalancerStatus, Node, NodeAddress, PersistentVolume, PersistentVolumeSpec, Service,
};
use serde::{Deserialize, Serialize};

use crate::webhook::Webhooks;
use crate::Result;

/// A cloud provider: the root of everything a component may ask its cloud.
///
/// Only [`Interface::provider_name`] is required; every capability defaults to "not
/// supported", so a provider implements exactly what its cloud offers.
#[async_trait]
pub trait Interface: Send + Sync {
    /// Called once by each component after construction, with a Kubernetes client when the
    /// component has one (upstream `Initialize(clientBuilder, stop)`); a provider may start
    /// background work here. Dropping the provider stops it.
    async fn initialize(&self, _client: Option<kube::Client>) -> Result<()> {
        Ok(())
    }

    /// The name this provider is registered under (`--cloud-provider`).
    fn provider_name(&self) -> &str;

    /// `Err` (the `/readyz` check `cloud-credentials` of the components that serve one)
    /// while credentials the provider follows are not as their source says: e.g. a
    /// credentials Secret deleted or refused after start (see [`crate::credential_secret`]).
    fn credentials_health(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    /// Whether the provider has a cluster ID; controllers warn when it has none.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// Instances (v1): per node name look-ups.
    fn instances(&self) -> Option<&dyn Instances> {
        None
    }

    /// InstancesV2: per Node look-ups; preferred by the cloud-node controllers when present.
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        None
    }

    /// Load balancers for `type: LoadBalancer` Services.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        None
    }

    /// Zone and region of nodes.
    fn zones(&self) -> Option<&dyn Zones> {
        None
    }

    /// Pod network routes (one per node podCIDR).
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }

    /// Cluster listing (rarely implemented upstream).
    fn clusters(&self) -> Option<&dyn Clusters> {
        None
    }

    /// Zone and region labels of volumes (upstream `PVLabeler`, which a cloud implements
    /// beside `Interface`; the apiserver's PersistentVolumeLabel admission and the
    /// cloud-controller-manager's PV labelling ask it).
    fn pv_labeler(&self) -> Option<&dyn PvLabeler> {
        None
    }

    /// Creates, deletes and grows the cloud's block volumes for an in-tree volume plugin
    /// (upstream: the cloud calls of the in-tree provisioners, deleters and expanders, e.g.
    /// the legacy OpenStack provider's `CreateVolume`/`DeleteVolume`/`ExpandVolume`, which the
    /// `kubernetes.io/cinder` plugin of kube-controller-manager called). In the external
    /// layout this moved to the cloud's CSI driver, not to the cloud-controller-manager.
    fn volume_provisioner(&self) -> Option<&dyn VolumeProvisioner> {
        None
    }

    /// Attaches the cloud's block volumes to instances and detaches them for an in-tree volume
    /// plugin (upstream: the legacy OpenStack provider's `AttachDisk`, `DetachDisk`,
    /// `DiskIsAttached`, `DisksAreAttached` and `GetAttachmentDiskPath`, which the
    /// `kubernetes.io/cinder` plugin called from kube-controller-manager's attach/detach
    /// controller and from the kubelet). In the external layout this moved to the cloud's CSI
    /// driver (ControllerPublishVolume), not to the cloud-controller-manager.
    fn volume_attacher(&self) -> Option<&dyn VolumeAttacher> {
        None
    }

    /// Admission webhooks the cloud-controller-manager serves for this provider (upstream
    /// k8s.io/cloud-provider `app.WebhookConfig`, which upstream in-tree providers do not
    /// use); see [`crate::webhook`].
    fn webhooks(&self) -> Option<&dyn Webhooks> {
        None
    }
}

/// The capability getters of an [`Interface`] impl for capabilities the provider type
/// implements itself, each `Some(self)`: `capability_getters!(instances, zones);` in the impl
/// block stands for `fn instances(&self) -> Option<&dyn Instances> { Some(self) }` and so on.
/// A capability that depends on the configuration is written out by hand.
#[macro_export]
macro_rules! capability_getters {
    ($($getter:ident),* $(,)?) => {
        $($crate::capability_getters!(@one $getter);)*
    };
    (@one instances) => { $crate::capability_getters!(@fn instances Instances); };
    (@one instances_v2) => { $crate::capability_getters!(@fn instances_v2 InstancesV2); };
    (@one load_balancer) => { $crate::capability_getters!(@fn load_balancer LoadBalancer); };
    (@one zones) => { $crate::capability_getters!(@fn zones Zones); };
    (@one routes) => { $crate::capability_getters!(@fn routes Routes); };
    (@one clusters) => { $crate::capability_getters!(@fn clusters Clusters); };
    (@one pv_labeler) => { $crate::capability_getters!(@fn pv_labeler PvLabeler); };
    (@one volume_provisioner) => {
        $crate::capability_getters!(@fn volume_provisioner VolumeProvisioner);
    };
    (@one volume_attacher) => { $crate::capability_getters!(@fn volume_attacher VolumeAttacher); };
    (@one webhooks) => { $crate::capability_getters!(@fn webhooks Webhooks); };
    (@fn $getter:ident $trait:ident) => {
        fn $getter(&self) -> ::std::option::Option<&dyn $crate::$trait> {
            ::std::option::Option::Some(self)
        }
    };
}

/// Attaching block volumes to instances (see [`Interface::volume_attacher`]). Instance IDs are
/// the cloud's (a Node's provider ID without its `<provider>://` prefix and slashes, as the
/// in-tree plugins cut it from `InstanceID`).
#[async_trait]
pub trait VolumeAttacher: Send + Sync {
    /// The in-tree plugin these volumes belong to (`kubernetes.io/cinder`): the prefix of the
    /// unique volume names in `node.status.volumesAttached` (`kubernetes.io/cinder/<id>`).
    fn plugin_name(&self) -> &str;

    /// The cloud volume ID a PV's source names, or `None` when it is not this plugin's.
    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String>;

    /// The cloud volume ID an inline pod volume names, or `None` when it is not this plugin's.
    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String>;

    /// Attaches the volume to the instance and returns once the cloud reports it attached;
    /// succeeds at once when it already is. A volume attached to another instance (and not
    /// attachable to several) is an error naming that instance, as upstream's dangling-attach
    /// error.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()>;

    /// Detaches the volume from the instance and returns once the cloud reports it detached;
    /// succeeds when it is not attached there (or is gone).
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()>;

    /// Whether the volume is attached to the instance (a volume that does not exist is not).
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> Result<bool>;

    /// [`VolumeAttacher::disk_is_attached`] for several volumes of one instance, as upstream
    /// `DisksAreAttached`: a volume whose look-up failed counts as attached, so a cloud error
    /// never makes a caller forget an attachment. The default asks for each volume in turn; a
    /// cloud that lists an instance's attachments in one call overrides it.
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> Result<BTreeMap<String, bool>> {
        let mut out = BTreeMap::new();
        for id in volume_ids {
            let attached = match self.disk_is_attached(instance_id, id).await {
                Ok(a) => a,
                Err(error) => {
                    tracing::warn!(volume_id = %id, %error, "checking an attachment failed; assuming it is attached");
                    true
                }
            };
            out.insert(id.clone(), attached);
        }
        Ok(out)
    }

    /// The device path the cloud reports for the volume on the instance (`/dev/vdb`); an
    /// error when it is not attached there. Upstream warns that the guest may name the disk
    /// otherwise: the kubelet looks for `/dev/disk/by-id/virtio-<id>` first.
    async fn get_attachment_disk_path(&self, instance_id: &str, volume_id: &str) -> Result<String>;
}

/// What to create (upstream's `VolumeOptions` as the in-tree plugins read them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRequest {
    /// The cloud volume's name (`kubernetes-dynamic-pvc-<claim uid>` upstream).
    pub name: String,
    /// Size in GiB, already rounded up from the claim's request.
    pub size_gib: u64,
    /// The zone to create it in; empty: the cloud's default.
    pub zone: String,
    /// The StorageClass's `type` parameter; empty: the cloud's default type.
    pub volume_type: String,
    /// Where within the zone to create it (vSphere's `datastore`); empty: the cloud's default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pool: String,
    /// Tags recorded on the volume (`kubernetes.io/created-for/pvc/name`, ...).
    pub tags: BTreeMap<String, String>,
    /// The plugin's own settings from the class ([`ClassParameters::options`]), for
    /// [`VolumeProvisioner::create_volume`] to read; empty when the plugin has none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// A StorageClass's parameters as an in-tree plugin's provisioner reads them (upstream: the
/// `Parameters` loop of each plugin's `CreateVolume`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassParameters {
    /// The volume (disk) type; empty: the cloud's default.
    pub volume_type: String,
    /// The one zone to create volumes in (Cinder `availability`, GCE PD `zone`); empty: none.
    pub zone: String,
    /// Zones to choose one from by the claim's name (GCE PD `zones`); empty: none.
    pub zones: Vec<String>,
    /// `fsType`.
    pub fs_type: Option<String>,
    /// Settings only the plugin reads (AWS EBS `iopsPerGB`, `encrypted`, `kmsKeyId`), already
    /// validated by [`VolumeProvisioner::class_parameters`]; the provisioner hands them back
    /// unchanged in [`VolumeRequest::options`]. Empty for Cinder and GCE PD.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// Where within the zone volumes go (vSphere `datastore`); empty: the cloud's default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pool: String,
}

/// The keys of the in-tree Cinder plugin (`type`, `availability`, `fsType`; case-insensitive),
/// the default of [`VolumeProvisioner::class_parameters`]: any other key is refused by name,
/// as upstream.
pub fn cinder_class_parameters(
    plugin: &str,
    parameters: &BTreeMap<String, String>,
) -> std::result::Result<ClassParameters, String> {
    let mut p = ClassParameters::default();
    for (k, v) in parameters {
        match k.to_ascii_lowercase().as_str() {
            "type" => p.volume_type = v.clone(),
            "availability" => p.zone = v.clone(),
            "fstype" => p.fs_type = Some(v.clone()).filter(|f| !f.is_empty()),
            _ => return Err(format!("invalid option {k:?} for volume plugin {plugin}")),
        }
    }
    Ok(p)
}

/// A volume the cloud created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionedVolume {
    /// The cloud's ID (the PV's volume ID).
    pub id: String,
    /// Its size in GiB.
    pub size_gib: u64,
    /// The labels the PV gets (zone, region), as the PersistentVolumeLabel admission gives;
    /// empty when the provider is told to ignore volume zones.
    pub labels: BTreeMap<String, String>,
}

/// A volume as the cloud holds it, for a CSI driver's idempotent `CreateVolume` (found by
/// name), `ValidateVolumeCapabilities`/`ControllerPublishVolume` (found by ID) and
/// `ListVolumes` (all of them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudVolume {
    /// The cloud's ID.
    pub id: String,
    /// The cloud's name for it (the `name` of the [`VolumeRequest`] that created it).
    pub name: String,
    /// Size in GiB; 0 when the cloud does not say (vcsim reports no VMDK's capacity).
    pub size_gib: u64,
    /// Its zone; empty when the cloud has none.
    pub zone: String,
    /// The instances it is attached to (the IDs [`VolumeAttacher`] takes).
    pub attached_to: Vec<String>,
}

/// Which volumes [`VolumeProvisioner::find_volumes`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeFilter<'a> {
    /// Every volume (of this cluster's project, account or datacenter).
    All,
    /// The one with this ID (none when it does not exist).
    Id(&'a str),
    /// Those with this name.
    Name(&'a str),
}

/// Block volumes for one in-tree volume plugin (see [`Interface::volume_provisioner`]).
#[async_trait]
pub trait VolumeProvisioner: Send + Sync {
    /// The in-tree plugin (StorageClass `provisioner`) these volumes serve, e.g.
    /// `kubernetes.io/cinder`.
    fn plugin_name(&self) -> &str;

    /// The cloud volume ID of a PV of this plugin, or `None` when the PV is not one.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String>;

    /// The PV volume source for a created volume (e.g. `spec.cinder`), with the StorageClass's
    /// `fsType` when given.
    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec;

    /// Reads a StorageClass's `parameters` as the plugin's provisioner does; the error (shown
    /// in the claim's `ProvisioningFailed` event) names what is refused. The default reads the
    /// Cinder plugin's keys ([`cinder_class_parameters`]).
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        cinder_class_parameters(self.plugin_name(), parameters)
    }

    /// The longest volume name the cloud takes: the provisioner cuts the cluster's prefix of
    /// `<cluster>-dynamic-<pv name>` to fit, as upstream's `GenerateVolumeName` (GCE PD 63;
    /// the default 255 is the Cinder plugin's).
    fn max_volume_name_len(&self) -> usize {
        255
    }

    /// Creates a volume and returns once the cloud reports it usable.
    async fn create_volume(&self, request: &VolumeRequest) -> Result<ProvisionedVolume>;

    /// Deletes a volume; succeeds when it is already gone. A volume still attached somewhere
    /// is an error (the caller retries).
    async fn delete_volume(&self, volume_id: &str) -> Result<()>;

    /// Grows a volume to `new_size_gib` and returns its size once the cloud reports it done;
    /// a volume already that large is left alone.
    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> Result<u64>;

    /// The volumes `filter` selects, as the cloud holds them now. The in-tree plugins never ask
    /// (the PV records the ID); a CSI driver must, because the spec makes `CreateVolume`
    /// idempotent by name. The default: [`crate::Error::NotImplemented`].
    async fn find_volumes(&self, _filter: VolumeFilter<'_>) -> Result<Vec<CloudVolume>> {
        Err(crate::Error::NotImplemented)
    }
}

/// Labels for PersistentVolumes backed by the cloud's volumes (upstream `PVLabeler`).
#[async_trait]
pub trait PvLabeler: Send + Sync {
    /// The labels (zone, region) the PV should carry; empty when the PV is not one of this
    /// cloud's volumes; [`crate::Error::DiskNotFound`] when it names a volume the cloud lacks.
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>>;
}

/// Zone and region of an instance (upstream `cloudprovider.Zone`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Zone {
    /// The zone (`topology.kubernetes.io/zone`).
    pub failure_domain: String,
    /// The region (`topology.kubernetes.io/region`).
    pub region: String,
}

/// Everything the cloud-node controller needs about one instance, in one call
/// (upstream `cloudprovider.InstanceMetadata`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceMetadata {
    /// `spec.providerID`, e.g. `openstack:///<uuid>`.
    pub provider_id: String,
    /// Goes to `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// Goes to `status.addresses`.
    pub node_addresses: Vec<NodeAddress>,
    /// Empty when the cloud has no zones.
    pub zone: String,
    /// Empty when the cloud has no regions.
    pub region: String,
    /// Extra labels the provider wants on the Node.
    pub additional_labels: BTreeMap<String, String>,
}

/// One pod-network route (upstream `cloudprovider.Route`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// Provider-chosen name; set from `name_hint` on creation.
    #[serde(default)]
    pub name: String,
    /// The node whose pods the route reaches.
    pub target_node: String,
    /// The pod CIDR, e.g. `10.244.1.0/24`.
    #[serde(rename = "destinationCIDR")]
    pub destination_cidr: String,
    /// True when the route's target no longer exists; the route controller deletes those.
    #[serde(default)]
    pub blackhole: bool,
}

/// Per node-name instance look-ups (upstream `cloudprovider.Instances`).
#[async_trait]
pub trait Instances: Send + Sync {
    /// Addresses of the named node's instance.
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>>;
    /// Addresses of the instance with this provider ID.
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>>;
    /// The cloud's ID of the named node's instance (the part after `provider://`).
    async fn instance_id(&self, name: &str) -> Result<String>;
    /// Instance type (flavor) of the named node.
    async fn instance_type(&self, name: &str) -> Result<String>;
    /// Instance type (flavor) of the instance with this provider ID.
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String>;
    /// Adds an SSH key to every instance (the apiserver's old SSH tunnels).
    async fn add_ssh_key_to_all_instances(&self, user: &str, key: &[u8]) -> Result<()>;
    /// The node name the kubelet on `hostname` should register as.
    async fn current_node_name(&self, hostname: &str) -> Result<String>;
    /// Whether the instance still exists; `Ok(false)` only when the cloud says it is gone.
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool>;
    /// Whether the instance is shut down (exists but not running).
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool>;
}

/// Per Node instance look-ups (upstream `cloudprovider.InstancesV2`).
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// Whether the Node's instance exists.
    async fn instance_exists(&self, node: &Node) -> Result<bool>;
    /// Whether the Node's instance is shut down.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool>;
    /// Provider ID, type, addresses, zone, region and labels of the Node's instance.
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata>;
}

/// Load balancers for Services (upstream `cloudprovider.LoadBalancer`).
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The status of the Service's load balancer, or `None` when it does not exist.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>>;

    /// The cloud name of the Service's load balancer.
    fn get_load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        default_load_balancer_name(service)
    }

    /// Refuses a Service whose load balancer settings this provider cannot honour (a refused
    /// row of its [`crate::lb_settings`] table, or a value its parsers reject), before any
    /// cloud call; `ensure_load_balancer` runs it first and the `service-lb-annotations`
    /// webhook ([`crate::lb_webhook::review_service_lb`]) answers with it. Default: accept.
    fn check_service(&self, _service: &Service) -> Result<()> {
        Ok(())
    }

    /// Creates or updates the load balancer so that it forwards to `nodes`.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus>;

    /// Updates the backends of an existing load balancer to `nodes`.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()>;

    /// Deletes the load balancer; succeeds when it is already gone.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()>;
}

/// Zone look-ups (upstream `cloudprovider.Zones`).
#[async_trait]
pub trait Zones: Send + Sync {
    /// Zone of the machine this code runs on (kubelet use).
    async fn get_zone(&self) -> Result<Zone>;
    /// Zone of the instance with this provider ID.
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone>;
    /// Zone of the named node's instance.
    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone>;
}

/// Pod-network routes (upstream `cloudprovider.Routes`).
#[async_trait]
pub trait Routes: Send + Sync {
    /// Every route that belongs to the cluster.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>>;
    /// Creates `route`; `name_hint` (the node's UID upstream) helps providers name it.
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()>;
    /// Deletes `route`.
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()>;
}

/// Cluster listing (upstream `cloudprovider.Clusters`).
#[async_trait]
pub trait Clusters: Send + Sync {
    /// Names of all clusters.
    async fn list_clusters(&self) -> Result<Vec<String>>;
    /// Address of the named cluster's master.
    async fn master(&self, cluster_name: &str) -> Result<String>;
}

/// The upstream default load balancer name: `a` + the Service UID without dashes, cut to 32
/// characters (AWS's limit, kept by every provider for compatibility).
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}

/// Whether a provider supports one capability, for start-up reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// Capability name as printed (`instances`, `instances-v2`, `load-balancer`, ...).
    pub name: &'static str,
    /// Whether the provider returned it.
    pub supported: bool,
}

/// Capability names as printed and as accepted in configs, in upstream order (`volumes` and
/// `attach-detach`, the in-tree volume plugin's calls, last).
pub(crate) const CAPABILITY_NAMES: [&str; 9] = [
    "instances",
    "instances-v2",
    "load-balancer",
    "zones",
    "routes",
    "clusters",
    "pv-labeler",
    "volumes",
    "attach-detach",
];

/// Which capabilities `cloud` supports, in upstream order.
pub fn capabilities(cloud: &dyn Interface) -> Vec<Capability> {
    let supported = [
        cloud.instances().is_some(),
        cloud.instances_v2().is_some(),
        cloud.load_balancer().is_some(),
        cloud.zones().is_some(),
        cloud.routes().is_some(),
        cloud.clusters().is_some(),
        cloud.pv_labeler().is_some(),
        cloud.volume_provisioner().is_some(),
        cloud.volume_attacher().is_some(),
    ];
    CAPABILITY_NAMES
        .iter()
        .zip(supported)
        .map(|(name, supported)| Capability { name, supported })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn default_lb_name_is_a_plus_uid_without_dashes_cut_to_32() {
        let svc = Service {
            metadata: ObjectMeta {
                uid: Some("3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let name = default_load_balancer_name(&svc);
        assert_eq!(name, "a3f2a1b4c5d6e7f8091a2b3c4d5e6f70");
        assert_eq!(name.len(), 32);
    }

    #[test]
    fn default_lb_name_without_uid_is_just_a() {
        assert_eq!(default_load_balancer_name(&Service::default()), "a");
    }

    struct Bare;
    impl Interface for Bare {
        fn provider_name(&self) -> &str {
            "bare"
        }
    }

    #[test]
    fn capabilities_default_to_unsupported() {
        let caps = capabilities(&Bare);
        assert_eq!(caps.len(), 9);
        assert!(caps.iter().all(|c| !c.supported));
        assert!(Bare.has_cluster_id());
    }
}
