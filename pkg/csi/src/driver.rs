//! The driver: CSI's Identity, Controller and Node calls answered from a provider's volume
//! capabilities (the same [`VolumeProvisioner`] and [`VolumeAttacher`] the in-tree
//! controllers use) and, on the node, from the machine's block devices ([`crate::node`]).
//!
//! Volume IDs are the cloud's; node IDs are the instance IDs the attacher takes. Every call
//! checks its arguments first (`InvalidArgument` naming the field), is idempotent as the spec
//! requires, and maps the cloud's answers to the spec's codes: a volume or instance the cloud
//! lacks is `NotFound`, a volume attached elsewhere `FailedPrecondition`, a size beyond the
//! driver's limit `OutOfRange`, a refused quota `ResourceExhausted`. Two calls on one volume
//! at once: the second is `Aborted`, as the upstream drivers answer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hypercloud_cloudprovider::{
    node::attach_instance_id, CloudVolume, Error as CloudError, Interface, VolumeAttacher,
    VolumeFilter, VolumeProvisioner, VolumeRequest,
};
use tokio::sync::OnceCell;
use tonic::Status;

use crate::node::{self, Device};
use crate::proto::*;
use hypercloud_cloudprovider::csi_drivers::DriverInfo;

const GIB: i64 = 1 << 30;

/// What the driver serves and as whom.
#[derive(Clone, Debug)]
pub struct DriverOptions {
    /// The CSI driver this plays (name, topology key, limits).
    pub info: DriverInfo,
    /// `GetPluginInfo.vendor_version`.
    pub vendor_version: String,
    /// Serve `csi.v1.Controller`.
    pub controller: bool,
    /// Serve `csi.v1.Node` for this node.
    pub node: Option<NodeOptions>,
}

/// The node side's settings.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The Kubernetes node (and cloud instance) name this node plugin runs on.
    pub node_name: String,
    /// Where the instance's attached disks appear by ID (`/dev/disk/by-id` on a real
    /// instance; the local cloud's per-instance devices directory here).
    pub device_dir: PathBuf,
    /// `NodeGetInfo.max_volumes_per_node`; `None`: the driver's default.
    pub max_volumes_per_node: Option<i64>,
}

/// The CSI driver of one provider.
pub struct Driver {
    cloud: Arc<dyn Interface>,
    opts: DriverOptions,
    /// (node ID, zone) of this node, asked of the cloud once.
    node_identity: OnceCell<(String, String)>,
    /// Volumes with a call under way.
    busy: Mutex<BTreeSet<String>>,
}

/// A call's hold on a volume: released when dropped.
struct Busy<'a>(&'a Driver, String);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Ok(mut b) = self.0.busy.lock() {
            b.remove(&self.1);
        }
    }
}

fn invalid(field: &str, why: &str) -> Status {
    Status::invalid_argument(format!("{field}: {why}"))
}

fn require<'a>(value: &'a str, field: &str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(invalid(field, "must not be empty"))
    } else {
        Ok(value)
    }
}

/// A cloud error as the spec's status.
fn status(operation: &str, e: CloudError) -> Status {
    let text = format!("{operation}: {}", hypercloud_cloudprovider::Chain(&e));
    match &e {
        CloudError::DiskNotFound | CloudError::InstanceNotFound => Status::not_found(text),
        CloudError::NotImplemented => Status::unimplemented(text),
        CloudError::Cloud {
            status: Some(s), ..
        } => match *s {
            404 => Status::not_found(text),
            409 => Status::failed_precondition(text),
            413 | 429 => Status::resource_exhausted(text),
            400 => Status::invalid_argument(text),
            _ => Status::internal(text),
        },
        _ if text.contains("quota") || text.contains("Quota") => Status::resource_exhausted(text),
        _ => Status::internal(text),
    }
}

/// Whether the driver can give a volume this capability: a block device or a file system
/// it can make (ext4, ext3, xfs), attached to one node at a time.
fn capability_problem(cap: &VolumeCapability) -> Option<String> {
    use volume_capability::{AccessType, Mode};
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| Mode::try_from(m.mode).unwrap_or(Mode::Unknown));
    match mode {
        None => return Some("access_mode is missing".into()),
        Some(Mode::SingleNodeWriter | Mode::SingleNodeReaderOnly) => {}
        Some(m) => {
            return Some(format!(
            "access mode {m:?} is not supported: a block volume is attached to one node at a time"
        ))
        }
    }
    match &cap.access_type {
        None => Some("access_type (block or mount) is missing".into()),
        Some(AccessType::Block(_)) => None,
        Some(AccessType::Mount(m)) => node::check_fs_type(&m.fs_type).err(),
    }
}

fn check_capabilities(caps: &[VolumeCapability], field: &str) -> Result<(), Status> {
    if caps.is_empty() {
        return Err(invalid(field, "must name at least one capability"));
    }
    for c in caps {
        if let Some(p) = capability_problem(c) {
            return Err(invalid(field, &p));
        }
    }
    Ok(())
}

/// The one capability a call on an existing volume names: present and one the driver gives.
fn required_capability(cap: Option<&VolumeCapability>) -> Result<&VolumeCapability, Status> {
    let cap = cap.ok_or_else(|| invalid("volume_capability", "is missing"))?;
    check_capabilities(std::slice::from_ref(cap), "volume_capability")?;
    Ok(cap)
}

/// Whether a capability (when the call names one) is a raw block volume, which has no file
/// system to grow.
fn is_block(cap: Option<&VolumeCapability>) -> bool {
    matches!(
        cap.and_then(|c| c.access_type.as_ref()),
        Some(volume_capability::AccessType::Block(_))
    )
}

/// The size to create in GiB from a capacity range: the required bytes rounded up to whole
/// GiB (1 GiB when nothing is required), within the limit and the driver's largest volume.
pub fn size_gib(range: Option<&CapacityRange>, max_gib: u64) -> Result<u64, Status> {
    let Some(r) = range else { return Ok(1) };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(Status::out_of_range(format!(
            "capacity_range: sizes must not be negative (required {}, limit {})",
            r.required_bytes, r.limit_bytes
        )));
    }
    if r.limit_bytes > 0 && r.limit_bytes < r.required_bytes {
        return Err(Status::out_of_range(format!(
            "capacity_range: limit_bytes {} is below required_bytes {}",
            r.limit_bytes, r.required_bytes
        )));
    }
    let gib = (r.required_bytes as u64).div_ceil(GIB as u64).max(1);
    if gib > max_gib {
        return Err(Status::out_of_range(format!(
            "capacity_range: {gib} GiB is beyond the largest volume this driver creates ({max_gib} GiB)"
        )));
    }
    if r.limit_bytes > 0 && (gib as i64).saturating_mul(GIB) > r.limit_bytes {
        return Err(Status::out_of_range(format!(
            "capacity_range: the cloud allocates whole GiB; {gib} GiB exceeds limit_bytes {}",
            r.limit_bytes
        )));
    }
    Ok(gib)
}

fn gib_bytes(gib: u64) -> i64 {
    i64::try_from(gib)
        .unwrap_or(i64::MAX / GIB)
        .saturating_mul(GIB)
}

/// Parameters the external-provisioner adds (`--extra-create-metadata`) or reserves: they
/// become tags on the volume, never class parameters.
const RESERVED_PREFIX: &str = "csi.storage.k8s.io/";

impl Driver {
    /// A driver for `cloud`, which must have a volume capability (checked by the caller with
    /// [`crate::driver_for`]).
    pub fn new(cloud: Arc<dyn Interface>, opts: DriverOptions) -> Self {
        Self {
            cloud,
            opts,
            node_identity: OnceCell::new(),
            busy: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether `csi.v1.Controller` is served.
    pub fn serves_controller(&self) -> bool {
        self.opts.controller
    }

    /// Whether `csi.v1.Node` is served.
    pub fn serves_node(&self) -> bool {
        self.opts.node.is_some()
    }

    /// The driver's name.
    pub fn name(&self) -> &str {
        self.opts.info.driver
    }

    fn hold(&self, volume_id: &str) -> Result<Busy<'_>, Status> {
        let mut b = self
            .busy
            .lock()
            .map_err(|_| Status::internal("the volume lock is poisoned"))?;
        if !b.insert(volume_id.to_owned()) {
            return Err(Status::aborted(format!(
                "an operation on volume {volume_id} is already in progress"
            )));
        }
        Ok(Busy(self, volume_id.to_owned()))
    }

    fn provisioner(&self) -> Result<&dyn VolumeProvisioner, Status> {
        self.cloud.volume_provisioner().ok_or_else(|| {
            Status::unimplemented(format!(
                "the {} provider cannot create volumes",
                self.cloud.provider_name()
            ))
        })
    }

    fn attacher(&self) -> Result<&dyn VolumeAttacher, Status> {
        self.cloud.volume_attacher().ok_or_else(|| {
            Status::unimplemented(format!(
                "the {} provider cannot attach volumes",
                self.cloud.provider_name()
            ))
        })
    }

    async fn volume(&self, id: &str) -> Result<CloudVolume, Status> {
        self.provisioner()?
            .find_volumes(VolumeFilter::Id(id))
            .await
            .map_err(|e| status("looking up the volume", e))?
            .into_iter()
            .find(|v| v.id == id)
            .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))
    }

    fn topology(&self, zone: &str) -> Vec<Topology> {
        if zone.is_empty() {
            return Vec::new();
        }
        vec![Topology {
            segments: BTreeMap::from([(self.opts.info.topology_key.to_owned(), zone.to_owned())]),
        }]
    }

    fn csi_volume(&self, v: &CloudVolume) -> Volume {
        Volume {
            capacity_bytes: gib_bytes(v.size_gib),
            volume_id: v.id.clone(),
            accessible_topology: self.topology(&v.zone),
            ..Default::default()
        }
    }

    /// The zone a topology requirement asks for: the first preferred, else the first
    /// requisite, that names the driver's key (or the well-known zone label).
    fn requested_zone(&self, req: Option<&TopologyRequirement>) -> Option<String> {
        let req = req?;
        req.preferred
            .iter()
            .chain(req.requisite.iter())
            .find_map(|t| {
                t.segments
                    .get(self.opts.info.topology_key)
                    .or_else(|| t.segments.get("topology.kubernetes.io/zone"))
                    .cloned()
            })
    }

    // ---- Identity ----

    pub async fn get_plugin_info(
        &self,
        _r: GetPluginInfoRequest,
    ) -> Result<GetPluginInfoResponse, Status> {
        Ok(GetPluginInfoResponse {
            name: self.opts.info.driver.to_owned(),
            vendor_version: self.opts.vendor_version.clone(),
            manifest: BTreeMap::from([
                ("provider".to_owned(), self.cloud.provider_name().to_owned()),
                (
                    "in-tree-plugin".to_owned(),
                    self.opts.info.in_tree_plugin.to_owned(),
                ),
            ]),
        })
    }

    pub async fn get_plugin_capabilities(
        &self,
        _r: GetPluginCapabilitiesRequest,
    ) -> Result<GetPluginCapabilitiesResponse, Status> {
        use plugin_capability::{ExpansionType, Service, ServiceType, Type, VolumeExpansion};
        let service = |t: ServiceType| PluginCapability {
            r#type: Some(Type::Service(Service { r#type: t as i32 })),
        };
        let mut caps = Vec::new();
        if self.opts.controller {
            caps.push(service(ServiceType::ControllerService));
        }
        if self.cloud.zones().is_some() {
            caps.push(service(ServiceType::VolumeAccessibilityConstraints));
        }
        if self.opts.info.expands {
            caps.push(PluginCapability {
                r#type: Some(Type::VolumeExpansion(VolumeExpansion {
                    r#type: ExpansionType::Offline as i32,
                })),
            });
        }
        Ok(GetPluginCapabilitiesResponse { capabilities: caps })
    }

    pub async fn probe(&self, _r: ProbeRequest) -> Result<ProbeResponse, Status> {
        Ok(ProbeResponse { ready: Some(true) })
    }

    // ---- Controller ----

    pub async fn controller_get_capabilities(
        &self,
        _r: ControllerGetCapabilitiesRequest,
    ) -> Result<ControllerGetCapabilitiesResponse, Status> {
        use controller_service_capability::{Rpc, RpcType, Type};
        // Not LIST_VOLUMES_PUBLISHED_NODES: with it the external-attacher lists every volume
        // each minute to reconcile VolumeAttachments, a cloud-wide listing per minute that the
        // in-tree attach/detach controller never made (ListVolumes still names the nodes).
        let rpcs = [
            RpcType::CreateDeleteVolume,
            RpcType::PublishUnpublishVolume,
            RpcType::ListVolumes,
            RpcType::ExpandVolume,
        ];
        Ok(ControllerGetCapabilitiesResponse {
            capabilities: rpcs
                .into_iter()
                .filter(|t| self.opts.info.expands || *t != RpcType::ExpandVolume)
                .map(|t| ControllerServiceCapability {
                    r#type: Some(Type::Rpc(Rpc { r#type: t as i32 })),
                })
                .collect(),
        })
    }

    pub async fn create_volume(
        &self,
        r: CreateVolumeRequest,
    ) -> Result<CreateVolumeResponse, Status> {
        let name = require(&r.name, "name")?;
        check_capabilities(&r.volume_capabilities, "volume_capabilities")?;
        if r.volume_content_source.is_some() {
            return Err(invalid(
                "volume_content_source",
                "this driver does not create volumes from snapshots or other volumes (CLONE_VOLUME and CREATE_DELETE_SNAPSHOT are not advertised)",
            ));
        }
        if let Some(key) = r.mutable_parameters.keys().next() {
            return Err(invalid(
                "mutable_parameters",
                &format!("{key:?}: this driver does not modify volumes (MODIFY_VOLUME is not advertised)"),
            ));
        }
        let gib = size_gib(r.capacity_range.as_ref(), self.opts.info.max_volume_gib)?;
        let provisioner = self.provisioner()?;
        let (class, tags): (BTreeMap<_, _>, BTreeMap<_, _>) = r
            .parameters
            .clone()
            .into_iter()
            .partition(|(k, _)| !k.starts_with(RESERVED_PREFIX));
        let params = provisioner
            .class_parameters(&class)
            .map_err(|why| invalid("parameters", &why))?;
        let _busy = self.hold(name)?;
        let existing = provisioner
            .find_volumes(VolumeFilter::Name(name))
            .await
            .map_err(|e| status("looking up volumes by name", e))?;
        if let Some(v) = existing.first() {
            // A size the cloud does not report (0) cannot tell; the name decides.
            if v.size_gib != 0 && v.size_gib != gib {
                return Err(Status::already_exists(format!(
                    "volume {name} exists ({}) with {} GiB, not the {gib} GiB asked for",
                    v.id, v.size_gib
                )));
            }
            return Ok(CreateVolumeResponse {
                volume: Some(self.csi_volume(v)),
            });
        }
        let zone = match (
            params.zone.clone(),
            self.requested_zone(r.accessibility_requirements.as_ref()),
        ) {
            (z, _) if !z.is_empty() => z,
            (_, Some(z)) => z,
            _ => String::new(),
        };
        let tags = tags
            .into_iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(RESERVED_PREFIX)
                    .map(|rest| (format!("kubernetes.io/created-for/{rest}"), v))
            })
            .collect();
        let request = VolumeRequest {
            name: name.to_owned(),
            size_gib: gib,
            zone,
            volume_type: params.volume_type.clone(),
            pool: params.pool.clone(),
            tags,
            options: params.options.clone(),
        };
        let created = provisioner
            .create_volume(&request)
            .await
            .map_err(|e| status("creating the volume", e))?;
        let zone = created
            .labels
            .get("topology.kubernetes.io/zone")
            .cloned()
            .unwrap_or(request.zone);
        let mut volume = self.csi_volume(&CloudVolume {
            id: created.id,
            name: name.to_owned(),
            size_gib: created.size_gib,
            zone,
            attached_to: Vec::new(),
        });
        if let Some(fs) = params.fs_type {
            volume
                .volume_context
                .insert("fsType".to_owned(), fs.clone());
        }
        Ok(CreateVolumeResponse {
            volume: Some(volume),
        })
    }

    pub async fn delete_volume(
        &self,
        r: DeleteVolumeRequest,
    ) -> Result<DeleteVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let _busy = self.hold(id)?;
        let provisioner = self.provisioner()?;
        if let Some(v) = provisioner
            .find_volumes(VolumeFilter::Id(id))
            .await
            .map_err(|e| status("looking up the volume", e))?
            .into_iter()
            .find(|v| v.id == id)
        {
            if !v.attached_to.is_empty() {
                return Err(Status::failed_precondition(format!(
                    "volume {id} is still attached to {}",
                    v.attached_to.join(", ")
                )));
            }
        } else {
            return Ok(DeleteVolumeResponse {});
        }
        provisioner
            .delete_volume(id)
            .await
            .map_err(|e| status("deleting the volume", e))?;
        Ok(DeleteVolumeResponse {})
    }

    pub async fn controller_publish_volume(
        &self,
        r: ControllerPublishVolumeRequest,
    ) -> Result<ControllerPublishVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let node = require(&r.node_id, "node_id")?;
        required_capability(r.volume_capability.as_ref())?;
        let instance =
            attach_instance_id(node).ok_or_else(|| invalid("node_id", "names no instance"))?;
        let _busy = self.hold(id)?;
        let v = self.volume(id).await?;
        self.check_instance(&instance).await?;
        if let Some(other) = v.attached_to.iter().find(|i| **i != instance) {
            return Err(Status::failed_precondition(format!(
                "volume {id} is attached to another node ({other}); it is attached to one node at a time"
            )));
        }
        let attacher = self.attacher()?;
        attacher
            .attach_disk(&instance, id)
            .await
            .map_err(|e| status("attaching the volume", e))?;
        let path = attacher
            .get_attachment_disk_path(&instance, id)
            .await
            .map_err(|e| status("reading the attachment's device", e))?;
        Ok(ControllerPublishVolumeResponse {
            publish_context: BTreeMap::from([("DevicePath".to_owned(), path)]),
        })
    }

    /// `NotFound` when the cloud has no such instance. The node ID is the instance ID the
    /// attacher takes; how the cloud is asked about it is decided here, per provider: GCE's
    /// attacher takes the instance's name, which is the node's name, and its provider IDs
    /// (`gce://<project>/<zone>/<name>`) need a zone the ID lacks, so it is looked up by
    /// name; AWS (`aws:///<instance>`, the zone optional) and vSphere (`vsphere://<uuid>`)
    /// take a provider ID without the rest, as every other provider.
    async fn check_instance(&self, instance: &str) -> Result<(), Status> {
        let Some(instances) = self.cloud.instances() else {
            return Ok(());
        };
        let found = match self.cloud.provider_name() {
            "gce" => instances.instance_id(instance).await.map(|_| true),
            provider => {
                let provider_id = hypercloud_cloudprovider::node::instance_provider_id(
                    provider,
                    &format!("/{instance}"),
                );
                instances.instance_exists_by_provider_id(&provider_id).await
            }
        };
        match found {
            Ok(true) => Ok(()),
            Ok(false) | Err(CloudError::InstanceNotFound) => Err(Status::not_found(format!(
                "node {instance} does not exist in the cloud"
            ))),
            // A node ID the cloud's provider IDs cannot hold (not `i-...` on AWS) names no
            // instance of it: every provider names that failure so.
            Err(CloudError::Cloud { operation, .. }) if operation == "parse provider ID" => {
                Err(Status::not_found(format!(
                    "node {instance} is not an instance ID of the {} cloud",
                    self.cloud.provider_name()
                )))
            }
            Err(CloudError::NotImplemented) => Ok(()),
            Err(e) => Err(status("looking up the node's instance", e)),
        }
    }

    pub async fn controller_unpublish_volume(
        &self,
        r: ControllerUnpublishVolumeRequest,
    ) -> Result<ControllerUnpublishVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let node = require(&r.node_id, "node_id")?;
        let instance =
            attach_instance_id(node).ok_or_else(|| invalid("node_id", "names no instance"))?;
        let _busy = self.hold(id)?;
        self.attacher()?
            .detach_disk(&instance, id)
            .await
            .map_err(|e| status("detaching the volume", e))?;
        Ok(ControllerUnpublishVolumeResponse {})
    }

    pub async fn validate_volume_capabilities(
        &self,
        r: ValidateVolumeCapabilitiesRequest,
    ) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        if r.volume_capabilities.is_empty() {
            return Err(invalid(
                "volume_capabilities",
                "must name at least one capability",
            ));
        }
        self.volume(id).await?;
        if let Some(problem) = r.volume_capabilities.iter().find_map(capability_problem) {
            return Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: problem,
            });
        }
        Ok(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(validate_volume_capabilities_response::Confirmed {
                volume_context: r.volume_context,
                volume_capabilities: r.volume_capabilities,
                parameters: r.parameters,
                mutable_parameters: r.mutable_parameters,
            }),
            message: String::new(),
        })
    }

    pub async fn list_volumes(&self, r: ListVolumesRequest) -> Result<ListVolumesResponse, Status> {
        if r.max_entries < 0 {
            return Err(invalid("max_entries", "must not be negative"));
        }
        let start: usize = if r.starting_token.is_empty() {
            0
        } else {
            r.starting_token.parse().map_err(|_| {
                Status::aborted(format!(
                    "starting_token {:?} is not one this driver gave",
                    r.starting_token
                ))
            })?
        };
        let mut all = self
            .provisioner()?
            .find_volumes(VolumeFilter::All)
            .await
            .map_err(|e| status("listing volumes", e))?;
        all.sort_by(|a, b| a.id.cmp(&b.id));
        if start > all.len() {
            return Err(Status::aborted(format!(
                "starting_token {start} is past the {} volumes",
                all.len()
            )));
        }
        let take = if r.max_entries == 0 {
            all.len()
        } else {
            usize::try_from(r.max_entries).unwrap_or(usize::MAX)
        };
        let end = start.saturating_add(take).min(all.len());
        let entries = all[start..end]
            .iter()
            .map(|v| list_volumes_response::Entry {
                volume: Some(self.csi_volume(v)),
                status: Some(list_volumes_response::VolumeStatus {
                    published_node_ids: v.attached_to.clone(),
                }),
            })
            .collect();
        Ok(ListVolumesResponse {
            entries,
            next_token: if end < all.len() {
                end.to_string()
            } else {
                String::new()
            },
        })
    }

    pub async fn controller_expand_volume(
        &self,
        r: ControllerExpandVolumeRequest,
    ) -> Result<ControllerExpandVolumeResponse, Status> {
        self.check_expands()?;
        let id = require(&r.volume_id, "volume_id")?;
        let range = r
            .capacity_range
            .as_ref()
            .ok_or_else(|| invalid("capacity_range", "is missing"))?;
        // CreateVolume may leave the size to the driver (0: its default), growing may not.
        if range.required_bytes <= 0 {
            return Err(Status::out_of_range(format!(
                "capacity_range: required_bytes {} asks for no size to grow to",
                range.required_bytes
            )));
        }
        let gib = size_gib(Some(range), self.opts.info.max_volume_gib)?;
        let _busy = self.hold(id)?;
        let v = self.volume(id).await?;
        if v.size_gib < gib && !v.attached_to.is_empty() {
            return Err(Status::failed_precondition(format!(
                "volume {id} is attached to {}: this driver grows volumes offline (VolumeExpansion OFFLINE), as the in-tree plugin did",
                v.attached_to.join(", ")
            )));
        }
        let size = if v.size_gib >= gib {
            v.size_gib
        } else {
            self.provisioner()?
                .expand_volume(id, gib)
                .await
                .map_err(|e| status("expanding the volume", e))?
        };
        let block = is_block(r.volume_capability.as_ref());
        Ok(ControllerExpandVolumeResponse {
            capacity_bytes: gib_bytes(size),
            node_expansion_required: !block,
        })
    }

    /// `Unimplemented` for a driver that does not grow volumes ([`DriverInfo::expands`]).
    fn check_expands(&self) -> Result<(), Status> {
        if self.opts.info.expands {
            Ok(())
        } else {
            Err(Status::unimplemented(format!(
                "{} does not grow volumes ({} had no expansion)",
                self.opts.info.driver, self.opts.info.in_tree_plugin
            )))
        }
    }

    // ---- Node ----

    fn node_opts(&self) -> Result<&NodeOptions, Status> {
        self.opts
            .node
            .as_ref()
            .ok_or_else(|| Status::unimplemented("this driver does not serve the node service"))
    }

    /// This node's (instance ID, zone), asked of the cloud once.
    async fn identity(&self) -> Result<&(String, String), Status> {
        let opts = self.node_opts()?;
        self.node_identity
            .get_or_try_init(|| async {
                let instances = self.cloud.instances().ok_or_else(|| {
                    Status::failed_precondition(format!(
                        "the {} provider cannot name this node's instance",
                        self.cloud.provider_name()
                    ))
                })?;
                let id = instances.instance_id(&opts.node_name).await.map_err(|e| {
                    status(&format!("finding node {}'s instance", opts.node_name), e)
                })?;
                let id = attach_instance_id(&id).ok_or_else(|| {
                    Status::internal(format!(
                        "the cloud gave node {} no instance ID",
                        opts.node_name
                    ))
                })?;
                let zone = match self.cloud.zones() {
                    Some(z) => {
                        z.get_zone_by_node_name(&opts.node_name)
                            .await
                            .map_err(|e| status("finding the node's zone", e))?
                            .failure_domain
                    }
                    None => String::new(),
                };
                Ok((id, zone))
            })
            .await
    }

    pub async fn node_get_info(
        &self,
        _r: NodeGetInfoRequest,
    ) -> Result<NodeGetInfoResponse, Status> {
        let opts = self.node_opts()?;
        let (id, zone) = self.identity().await?;
        Ok(NodeGetInfoResponse {
            node_id: id.clone(),
            max_volumes_per_node: opts
                .max_volumes_per_node
                .unwrap_or(self.opts.info.max_volumes_per_node),
            accessible_topology: self.topology(zone).into_iter().next(),
        })
    }

    pub async fn node_get_capabilities(
        &self,
        _r: NodeGetCapabilitiesRequest,
    ) -> Result<NodeGetCapabilitiesResponse, Status> {
        use node_service_capability::{Rpc, RpcType, Type};
        Ok(NodeGetCapabilitiesResponse {
            capabilities: [
                RpcType::StageUnstageVolume,
                RpcType::GetVolumeStats,
                RpcType::ExpandVolume,
            ]
            .into_iter()
            .filter(|t| self.opts.info.expands || *t != RpcType::ExpandVolume)
            .map(|t| NodeServiceCapability {
                r#type: Some(Type::Rpc(Rpc { r#type: t as i32 })),
            })
            .collect(),
        })
    }

    /// The device an attached volume is on this node, or what a real node would use when the
    /// cloud gives this machine none.
    fn device(
        &self,
        volume_id: &str,
        publish_context: &BTreeMap<String, String>,
    ) -> Result<Device, Status> {
        let opts = self.node_opts()?;
        Ok(node::find_device(
            &self.opts.info,
            &opts.device_dir,
            volume_id,
            publish_context.get("DevicePath").map(String::as_str),
        ))
    }

    pub async fn node_stage_volume(
        &self,
        r: NodeStageVolumeRequest,
    ) -> Result<NodeStageVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let staging = require(&r.staging_target_path, "staging_target_path")?;
        let cap = required_capability(r.volume_capability.as_ref())?;
        let _busy = self.hold(id)?;
        let device = self.device(id, &r.publish_context)?;
        let fs = match &cap.access_type {
            Some(volume_capability::AccessType::Mount(m)) => Some(
                r.volume_context
                    .get("fsType")
                    .filter(|_| m.fs_type.is_empty())
                    .cloned()
                    .unwrap_or_else(|| m.fs_type.clone()),
            ),
            _ => None,
        };
        let flags = match &cap.access_type {
            Some(volume_capability::AccessType::Mount(m)) => m.mount_flags.clone(),
            _ => Vec::new(),
        };
        node::stage(&device, staging.as_ref(), fs.as_deref(), &flags).await?;
        Ok(NodeStageVolumeResponse {})
    }

    pub async fn node_unstage_volume(
        &self,
        r: NodeUnstageVolumeRequest,
    ) -> Result<NodeUnstageVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let staging = require(&r.staging_target_path, "staging_target_path")?;
        let _busy = self.hold(id)?;
        node::unmount(staging.as_ref()).await?;
        Ok(NodeUnstageVolumeResponse {})
    }

    pub async fn node_publish_volume(
        &self,
        r: NodePublishVolumeRequest,
    ) -> Result<NodePublishVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let target = require(&r.target_path, "target_path")?;
        let cap = required_capability(r.volume_capability.as_ref())?;
        let _busy = self.hold(id)?;
        match &cap.access_type {
            Some(volume_capability::AccessType::Block(_)) => {
                let device = self.device(id, &r.publish_context)?;
                node::publish_block(&device, target.as_ref(), r.readonly).await?;
            }
            _ => {
                let staging = require(&r.staging_target_path, "staging_target_path")?;
                node::publish_mount(staging.as_ref(), target.as_ref(), r.readonly).await?;
            }
        }
        Ok(NodePublishVolumeResponse {})
    }

    pub async fn node_unpublish_volume(
        &self,
        r: NodeUnpublishVolumeRequest,
    ) -> Result<NodeUnpublishVolumeResponse, Status> {
        let id = require(&r.volume_id, "volume_id")?;
        let target = require(&r.target_path, "target_path")?;
        let _busy = self.hold(id)?;
        node::unpublish(target.as_ref()).await?;
        Ok(NodeUnpublishVolumeResponse {})
    }

    pub async fn node_get_volume_stats(
        &self,
        r: NodeGetVolumeStatsRequest,
    ) -> Result<NodeGetVolumeStatsResponse, Status> {
        require(&r.volume_id, "volume_id")?;
        let path = require(&r.volume_path, "volume_path")?;
        let usage = node::stats(path.as_ref())?;
        Ok(NodeGetVolumeStatsResponse { usage })
    }

    pub async fn node_expand_volume(
        &self,
        r: NodeExpandVolumeRequest,
    ) -> Result<NodeExpandVolumeResponse, Status> {
        self.check_expands()?;
        let id = require(&r.volume_id, "volume_id")?;
        let path = require(&r.volume_path, "volume_path")?;
        let _busy = self.hold(id)?;
        let device = self.device(id, &BTreeMap::new())?;
        let block = is_block(r.volume_capability.as_ref());
        let bytes = node::expand(&device, path.as_ref(), block).await?;
        Ok(NodeExpandVolumeResponse {
            capacity_bytes: bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_whole_gib_within_limits() {
        let r = |req, lim| CapacityRange {
            required_bytes: req,
            limit_bytes: lim,
        };
        assert_eq!(size_gib(None, 10).expect("default"), 1);
        assert_eq!(size_gib(Some(&r(0, 0)), 10).expect("zero"), 1);
        assert_eq!(size_gib(Some(&r(1, 0)), 10).expect("one byte"), 1);
        assert_eq!(size_gib(Some(&r(GIB + 1, 0)), 10).expect("just over"), 2);
        assert_eq!(
            size_gib(Some(&r(11 * GIB, 0)), 10)
                .expect_err("too big")
                .code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            size_gib(Some(&r(GIB + 1, GIB + 2)), 10)
                .expect_err("limit")
                .code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            size_gib(Some(&r(-1, 0)), 10).expect_err("negative").code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            size_gib(Some(&r(2 * GIB, GIB)), 10)
                .expect_err("limit below")
                .code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            size_gib(Some(&r(i64::MAX, 0)), u64::MAX).expect("huge"),
            (i64::MAX as u64).div_ceil(GIB as u64)
        );
    }

    #[test]
    fn capabilities_are_checked_by_mode_and_file_system() {
        use volume_capability::{AccessMode, AccessType, BlockVolume, Mode, MountVolume};
        let cap = |mode: Mode, t: Option<AccessType>| VolumeCapability {
            access_type: t,
            access_mode: Some(AccessMode { mode: mode as i32 }),
        };
        let mount = |fs: &str| {
            Some(AccessType::Mount(MountVolume {
                fs_type: fs.into(),
                ..Default::default()
            }))
        };
        assert!(capability_problem(&cap(Mode::SingleNodeWriter, mount(""))).is_none());
        assert!(capability_problem(&cap(Mode::SingleNodeWriter, mount("ext4"))).is_none());
        assert!(capability_problem(&cap(
            Mode::SingleNodeReaderOnly,
            Some(AccessType::Block(BlockVolume {}))
        ))
        .is_none());
        assert!(
            capability_problem(&cap(Mode::MultiNodeMultiWriter, mount("")))
                .expect("multi")
                .contains("MultiNodeMultiWriter")
        );
        assert!(
            capability_problem(&cap(Mode::SingleNodeWriter, mount("ntfs")))
                .expect("ntfs")
                .contains("ntfs")
        );
        assert!(capability_problem(&cap(Mode::SingleNodeWriter, None)).is_some());
        let no_mode = VolumeCapability {
            access_type: mount(""),
            access_mode: None,
        };
        assert!(capability_problem(&no_mode).is_some());
    }
}
