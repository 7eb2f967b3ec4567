//! EBS volumes for the in-tree `kubernetes.io/aws-ebs` plugin: creating, growing and deleting
//! them ([`VolumeProvisioner`]) and attaching them to instances ([`VolumeAttacher`]), as the
//! legacy provider's `CreateDisk`, `ResizeDisk`, `DeleteDisk`, `AttachDisk`, `DetachDisk`,
//! `DiskIsAttached`, `DisksAreAttached` and `GetDiskPath` (`legacy-cloud-providers/aws/aws.go`)
//! with the StorageClass parameters of `pkg/volume/awsebs` ([`ebs_parameters`]). Each change
//! is waited for as upstream does (the volume `available` after `CreateVolume`, the attachment
//! `attached`/`detached`, the modification `optimizing`), with upstream's initial delays and
//! exponential back-off, each bounded. A volume's ID in a PV is `aws://<zone>/vol-...`; its
//! device on an instance is one of `/dev/xvdba`..`/dev/xvdcz`, handed out per instance by
//! [`DeviceAllocator`] (upstream's `deviceAllocator`: the least recently used free name).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    Filter, Instance, ResourceType, Tag, TagSpecification, Volume, VolumeModificationState,
    VolumeType,
};
use hypercloud_cloudprovider::pager::Pager;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    ClassParameters, CloudVolume, Error, ProvisionedVolume, Result, VolumeAttacher, VolumeFilter,
    VolumeProvisioner, VolumeRequest, Zones,
};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, PersistentVolume, PersistentVolumeSpec,
};

use crate::config::zone_to_region;
use crate::error::{absent, cloud, code, paginate, sdk};
use crate::volumes::parse_volume_id;
use crate::{Aws, CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};

/// The in-tree plugin (StorageClass `provisioner`) these volumes serve.
pub const AWS_EBS_PLUGIN: &str = "kubernetes.io/aws-ebs";

/// The volume types upstream's `CreateDisk` accepts; none asked for is [`DEFAULT_VOLUME_TYPE`].
const VOLUME_TYPES: &[&str] = &["gp2", "io1", "sc1", "st1"];
/// Upstream `DefaultVolumeType`.
const DEFAULT_VOLUME_TYPE: &str = "gp2";
/// The bounds upstream clamps an io1 volume's total IOPS to (`MinTotalIOPS`, `MaxTotalIOPS`).
const MIN_TOTAL_IOPS: u64 = 100;
const MAX_TOTAL_IOPS: u64 = 64_000;
/// The largest `iopsPerGB` read: anything above gives [`MAX_TOTAL_IOPS`] for any size anyway.
const MAX_IOPS_PER_GB: u64 = MAX_TOTAL_IOPS;

/// The `Name` tag upstream's awsebs provisioner gives a volume (AWS volumes have no name).
const TAG_NAME: &str = "Name";

/// The StorageClass parameters of `kubernetes.io/aws-ebs`, as `pkg/volume/awsebs` reads them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EbsParameters {
    /// `type`: `gp2` (the default when empty), `io1`, `sc1` or `st1`.
    pub volume_type: String,
    /// `zone`: the one zone to create the volume in.
    pub zone: Option<String>,
    /// `zones`: the zones to choose from (by the claim's name).
    pub zones: BTreeSet<String>,
    /// `iopsPerGB`: for io1, the IOPS per GiB (the total is clamped to 100..64000).
    pub iops_per_gb: Option<u64>,
    /// `encrypted`.
    pub encrypted: bool,
    /// `kmsKeyId`: the key to encrypt with (implies `encrypted`).
    pub kms_key_id: Option<String>,
    /// `fsType`.
    pub fs_type: Option<String>,
}

/// Go's `strconv.ParseBool`, which upstream reads `encrypted` with.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Parses a `kubernetes.io/aws-ebs` StorageClass's parameters (keys case-insensitive): an
/// unknown key, a volume type the provider does not create, a malformed `iopsPerGB` or
/// `encrypted`, `zone` with `zones` and an empty zone in `zones` are refused by name.
pub fn ebs_parameters(
    parameters: &BTreeMap<String, String>,
) -> std::result::Result<EbsParameters, String> {
    let mut p = EbsParameters::default();
    for (k, v) in parameters {
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                volume_type(v)?;
                p.volume_type = v.clone();
            }
            "zone" => p.zone = Some(v.trim().to_owned()),
            "zones" => {
                for z in v.split(',').map(str::trim) {
                    if z.is_empty() {
                        return Err(format!(
                            "comma separated list of zones ({v:?}) must not contain an empty zone"
                        ));
                    }
                    p.zones.insert(z.to_owned());
                }
            }
            "iopspergb" => {
                let n = v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=MAX_IOPS_PER_GB).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "invalid iopsPerGB value {v:?}, must be an integer between 1 and {MAX_IOPS_PER_GB}"
                        )
                    })?;
                p.iops_per_gb = Some(n);
            }
            "encrypted" => {
                p.encrypted = parse_bool(v).ok_or_else(|| {
                    format!("invalid encrypted boolean value {v:?}, must be true or false")
                })?;
            }
            "kmskeyid" => p.kms_key_id = Some(v.clone()).filter(|k| !k.is_empty()),
            "fstype" => p.fs_type = Some(v.clone()).filter(|f| !f.is_empty()),
            _ => {
                return Err(format!(
                    "invalid option {k:?} for volume plugin {AWS_EBS_PLUGIN}"
                ))
            }
        }
    }
    if p.zone.is_some() && !p.zones.is_empty() {
        return Err(
            "both zone and zones StorageClass parameters must not be used at the same time".into(),
        );
    }
    Ok(p)
}

/// The volume type to create: [`DEFAULT_VOLUME_TYPE`] when none is asked for.
fn volume_type(asked: &str) -> std::result::Result<&str, String> {
    if asked.is_empty() {
        return Ok(DEFAULT_VOLUME_TYPE);
    }
    VOLUME_TYPES
        .iter()
        .find(|t| **t == asked)
        .copied()
        .ok_or_else(|| format!("invalid AWS VolumeType {asked:?}"))
}

/// The provisioned IOPS of a volume (upstream `CreateDisk`): io1 only, size × `iopsPerGB`
/// clamped to [`MIN_TOTAL_IOPS`]..[`MAX_TOTAL_IOPS`].
fn iops(volume_type: &str, size_gib: u64, iops_per_gb: Option<u64>) -> Option<u64> {
    (volume_type == "io1").then(|| {
        size_gib
            .saturating_mul(iops_per_gb.unwrap_or(0))
            .clamp(MIN_TOTAL_IOPS, MAX_TOTAL_IOPS)
    })
}

/// The tags of a new volume: the request's, `Name`, and the cluster's as upstream's
/// `buildTags(ResourceLifecycleOwned)`: `kubernetes.io/cluster/<id>=owned`, plus
/// `KubernetesCluster=<id>` when the cluster uses the legacy tag.
fn volume_tags(request: &VolumeRequest, cluster: Option<(&str, bool)>) -> BTreeMap<String, String> {
    let mut tags = request.tags.clone();
    tags.insert(TAG_NAME.to_owned(), request.name.clone());
    if let Some((id, legacy)) = cluster.filter(|(id, _)| !id.is_empty()) {
        if legacy {
            tags.insert(LEGACY_CLUSTER_TAG.to_owned(), id.to_owned());
        }
        tags.insert(format!("{CLUSTER_TAG_PREFIX}{id}"), "owned".to_owned());
    }
    tags
}

/// Upstream's `wait.Backoff`: the check runs at once, then after each delay (`first`, then
/// ×`factor`), `steps` times in all.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    first: Duration,
    factor: f64,
    steps: u32,
}

impl Backoff {
    /// The delays between the checks (`steps - 1` of them).
    fn delays(self) -> impl Iterator<Item = Duration> {
        (0..self.steps.saturating_sub(1)).map(move |i| {
            self.first
                .mul_f64(self.factor.powi(i32::try_from(i).unwrap_or(i32::MAX)))
        })
    }

    /// All the waiting, for messages.
    fn total(self) -> Duration {
        self.delays().sum()
    }
}

/// Upstream `waitUntilVolumeAvailable`: 5s, then 5s ×1.2, 10 checks (about 2 minutes).
const CREATE_INITIAL_DELAY: Duration = Duration::from_secs(5);
const CREATE_BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(5),
    factor: 1.2,
    steps: 10,
};
/// Upstream `volumeAttachmentStatusInitialDelay` / `volumeDetachmentStatusInitialDelay`:
/// attaching takes 2-5 seconds, detaching 5-10; asking sooner wastes API quota.
const ATTACH_INITIAL_DELAY: Duration = Duration::from_secs(2);
const DETACH_INITIAL_DELAY: Duration = Duration::from_secs(5);
/// Upstream `volumeAttachmentStatus{PollDelay,Factor,Steps}`: 2s doubling, 11 checks (2046s).
const ATTACHMENT_BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(2),
    factor: 2.0,
    steps: 11,
};
/// Upstream `volumeAttachmentStatusConsecutiveErrorLimit`.
const ATTACHMENT_ERROR_LIMIT: u32 = 10;
/// Upstream `modifyVolume`'s wait: 1s doubling, 10 checks.
const MODIFY_BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(1),
    factor: 2.0,
    steps: 10,
};

/// The device names upstream hands out: two letters after `/dev/xvd`, `b`/`c` then `a`..`z`
/// (AWS's recommended range for EBS volumes on HVM instances).
fn candidate_devices() -> impl Iterator<Item = String> {
    ['b', 'c']
        .into_iter()
        .flat_map(|first| ('a'..='z').map(move |second| format!("{first}{second}")))
}

/// One instance's device names (upstream `deviceAllocator`): the free name used least
/// recently (then alphabetically), so a name just released is not reused at once while AWS
/// may still report the old volume on it.
#[derive(Debug, Default)]
pub(crate) struct DeviceAllocator {
    /// When each name was last handed out or released (a counter; 0: never).
    last_used: HashMap<String, u64>,
    counter: u64,
}

impl DeviceAllocator {
    /// The next name not in `in_use`; `None` when all 52 are taken.
    fn next(&self, in_use: &BTreeMap<String, String>) -> Option<String> {
        candidate_devices()
            .filter(|d| !in_use.contains_key(d))
            .min_by_key(|d| (self.last_used.get(d).copied().unwrap_or(0), d.clone()))
    }

    /// Moves `device` to the back of the queue.
    fn deprioritize(&mut self, device: &str) {
        self.counter += 1;
        self.last_used.insert(device.to_owned(), self.counter);
    }
}

/// The devices of each instance being attached now and their allocators (upstream's
/// `attaching` map and `deviceAllocators`), so two attaches to one instance at once do not
/// pick one name.
#[derive(Debug, Default)]
pub(crate) struct Devices {
    allocators: HashMap<String, DeviceAllocator>,
    /// instance → device → volume.
    attaching: HashMap<String, BTreeMap<String, String>>,
}

/// A block device mapping's short name: `/dev/xvdba` or `/dev/sdba` → `ba`.
fn short_device(name: &str) -> &str {
    name.strip_prefix("/dev/sd")
        .or_else(|| name.strip_prefix("/dev/xvd"))
        .unwrap_or(name)
}

/// An instance's EBS devices: short device name → (volume ID, attachment status).
fn instance_devices(i: &Instance) -> BTreeMap<String, (String, String)> {
    i.block_device_mappings()
        .iter()
        .filter_map(|m| {
            let ebs = m.ebs()?;
            Some((
                short_device(m.device_name()?).to_owned(),
                (
                    ebs.volume_id()?.to_owned(),
                    ebs.status()
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                ),
            ))
        })
        .collect()
}

/// A volume's attachments: (instance, device, state).
fn attachments(v: &Volume) -> Vec<(String, String, String)> {
    v.attachments()
        .iter()
        .map(|a| {
            (
                a.instance_id().unwrap_or_default().to_owned(),
                a.device().unwrap_or_default().to_owned(),
                a.state().map(|s| s.as_str().to_owned()).unwrap_or_default(),
            )
        })
        .collect()
}

/// A volume's state (`available`, `in-use`, `creating`...).
fn state(v: &Volume) -> &str {
    v.state().map(|s| s.as_str()).unwrap_or_default()
}

/// A volume as [`CloudVolume`]: its ID in the form [`VolumeProvisioner::create_volume`]
/// gives (`aws://<zone>/vol-...`), its `Name` tag, and the instances of its attachments
/// (the IDs the attacher takes) that are not on their way off.
fn cloud_volume(v: &Volume) -> CloudVolume {
    let zone = v.availability_zone().unwrap_or_default().to_owned();
    CloudVolume {
        id: format!("aws://{zone}/{}", v.volume_id().unwrap_or_default()),
        name: v
            .tags()
            .iter()
            .find(|t| t.key() == Some(TAG_NAME))
            .and_then(|t| t.value())
            .unwrap_or_default()
            .to_owned(),
        size_gib: v
            .size()
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or_default(),
        zone,
        attached_to: attachments(v)
            .into_iter()
            .filter(|(i, _, st)| !i.is_empty() && st != "detached")
            .map(|(i, _, _)| i)
            .collect(),
    }
}

/// What [`Aws::attachment_state`] saw.
enum Seen {
    /// The volume's attachment has the state asked for (its device, when attached).
    Done(String),
    /// Not yet.
    Waiting(String),
    /// A describe failed, or AWS reports another instance or device (eventual consistency).
    Odd(String),
}

impl Aws {
    /// The instance `id` as EC2 describes it (not filtered by cluster, as upstream's
    /// `describeInstance`); `None` when EC2 does not know it.
    async fn describe_instance(&self, id: &str) -> Result<Option<Instance>> {
        let s = self.session().await?;
        let reply = s
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .map_err(|e| sdk("DescribeInstances", e));
        let Some(reply) = absent(
            reply,
            &["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"],
        )?
        else {
            return Ok(None);
        };
        Ok(reply
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .find(|i| i.instance_id() == Some(id))
            .cloned())
    }

    /// The zone for a volume no zone was chosen for: `[Global] Zone`, else this machine's.
    async fn default_zone(&self) -> Result<String> {
        if let Some(z) = self.config.global.zone.as_ref().filter(|z| !z.is_empty()) {
            return Ok(z.clone());
        }
        Ok(self.get_zone().await?.failure_domain)
    }

    /// One of the EBS waits' pauses (or their sum), scaled by `[Hypercloud] volume-wait-scale`.
    fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.config.tuning.volume_wait_scale)
    }

    /// Sleeps one of the EBS waits' pauses, [`Self::scaled`].
    async fn pause(&self, d: Duration) {
        tokio::time::sleep(self.scaled(d)).await;
    }

    /// Upstream `waitUntilVolumeAvailable`: the new volume `available`; one that disappears
    /// was most likely refused its KMS key.
    async fn wait_until_available(&self, id: &str) -> Result<()> {
        self.pause(CREATE_INITIAL_DELAY).await;
        let mut delays = CREATE_BACKOFF.delays();
        loop {
            let Some(v) = self.describe_volume(id).await? else {
                return Err(cloud(
                    "CreateVolume",
                    format!("failed to create encrypted volume {id}: the volume disappeared after creation, most likely due to inaccessible KMS encryption key"),
                ));
            };
            match state(&v) {
                "available" => return Ok(()),
                "creating" => {}
                other => {
                    return Err(cloud(
                        "CreateVolume",
                        format!("unexpected state of newly created AWS EBS volume {id}: {other:?}"),
                    ))
                }
            }
            match delays.next() {
                Some(d) => self.pause(d).await,
                None => {
                    return Err(cloud(
                        "CreateVolume",
                        format!(
                            "volume {id} still creating after {:?}",
                            self.scaled(CREATE_INITIAL_DELAY + CREATE_BACKOFF.total())
                        ),
                    ))
                }
            }
        }
    }

    /// One look at a volume's attachment while waiting for `want` (`attached`/`detached`)
    /// on `instance` (at `device`, when given).
    async fn attachment_state(
        &self,
        id: &str,
        want: &str,
        instance: &str,
        device: &str,
    ) -> Result<Seen> {
        let v = match self.describe_volume(id).await {
            Ok(Some(v)) => v,
            Ok(None) if want == "detached" => {
                tracing::warn!(
                    volume = id,
                    "waiting for the volume to be detached but it does not exist"
                );
                return Ok(Seen::Done(String::new()));
            }
            Ok(None) => return Err(Error::DiskNotFound),
            Err(e) => return Ok(Seen::Odd(e.to_string())),
        };
        let found = attachments(&v);
        if found.len() > 1 {
            tracing::warn!(
                volume = id,
                ?found,
                "found several attachments for the volume"
            );
        }
        let Some((on, dev, st)) = found.into_iter().last() else {
            return Ok(if want == "detached" {
                Seen::Done(String::new())
            } else {
                Seen::Waiting("detached".into())
            });
        };
        if !device.is_empty() && !dev.is_empty() && dev != device {
            return Ok(Seen::Odd(format!(
                "requested device {device:?} but found {dev:?}"
            )));
        }
        if !instance.is_empty() && !on.is_empty() && on != instance {
            return Ok(Seen::Odd(format!(
                "requested instance {instance:?} but found {on:?}"
            )));
        }
        Ok(if st == want {
            Seen::Done(dev)
        } else {
            Seen::Waiting(st)
        })
    }

    /// Upstream `waitForAttachmentStatus`: after the initial delay, the volume's attachment
    /// is read with [`ATTACHMENT_BACKOFF`] until it is `want`; up to [`ATTACHMENT_ERROR_LIMIT`]
    /// failed or inconsistent reads in a row are tolerated. The device when attached.
    async fn wait_for_attachment(
        &self,
        id: &str,
        want: &str,
        instance: &str,
        device: &str,
    ) -> Result<String> {
        let operation = if want == "attached" {
            "AttachVolume"
        } else {
            "DetachVolume"
        };
        self.pause(if want == "attached" {
            ATTACH_INITIAL_DELAY
        } else {
            DETACH_INITIAL_DELAY
        })
        .await;
        let mut delays = ATTACHMENT_BACKOFF.delays();
        let mut errors = 0;
        loop {
            let last = match self.attachment_state(id, want, instance, device).await? {
                Seen::Done(dev) => return Ok(dev),
                Seen::Waiting(st) => {
                    errors = 0;
                    tracing::debug!(volume = id, actual = %st, desired = want, "waiting for the volume's attachment");
                    st
                }
                Seen::Odd(why) => {
                    errors += 1;
                    if errors > ATTACHMENT_ERROR_LIMIT {
                        return Err(cloud(
                            operation,
                            format!("waiting for volume {id} to be {want} on instance {instance}: {why}"),
                        ));
                    }
                    tracing::warn!(volume = id, %why, "ignoring an unexpected answer while waiting for the volume's attachment; will retry");
                    why
                }
            };
            match delays.next() {
                Some(d) => self.pause(d).await,
                None => {
                    return Err(cloud(
                        operation,
                        format!("volume {id} not {want} on instance {instance} after {:?} (last seen: {last})", self.scaled(ATTACHMENT_BACKOFF.total())),
                    ))
                }
            }
        }
    }

    /// Upstream `checkIfAvailable`: only an `available` volume is attached or deleted; one
    /// attached elsewhere is refused naming that instance.
    fn check_available(v: &Volume, id: &str, what: &str) -> Result<()> {
        let st = state(v);
        if st == "available" {
            return Ok(());
        }
        let operation = if what.starts_with("attach") {
            "AttachVolume"
        } else {
            "DeleteVolume"
        };
        match attachments(v).first() {
            Some((other, _, _)) => Err(cloud(
                operation,
                format!(
                    "error {what} EBS volume {id} since volume is currently attached to {other:?}"
                ),
            )),
            None => Err(cloud(
                operation,
                format!("error {what} EBS volume {id} since volume is in {st:?} state"),
            )),
        }
    }

    /// The device for `volume` on `instance` (upstream `getMountDevice` with assign): the
    /// one it is attached at already (`true`), or a free one now marked as attaching.
    fn assign_device(
        &self,
        instance: &str,
        mapped: &BTreeMap<String, (String, String)>,
        volume: &str,
    ) -> Result<(String, bool)> {
        let mut d = self
            .devices
            .lock()
            .map_err(|_| cloud("AttachVolume", "device allocation state poisoned"))?;
        let mut in_use: BTreeMap<String, String> = mapped
            .iter()
            .map(|(dev, (vol, _))| (dev.clone(), vol.clone()))
            .collect();
        if let Some(a) = d.attaching.get(instance) {
            in_use.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some((dev, _)) = in_use.iter().find(|(_, v)| *v == volume) {
            let status = mapped
                .get(dev)
                .map(|(_, s)| s.as_str())
                .unwrap_or("attaching");
            if status == "attached" {
                return Ok((dev.clone(), true));
            }
            // AWS still lists it (detaching), or another attach of it is under way.
            return Err(cloud(
                "AttachVolume",
                format!("volume {volume} is {status} on instance {instance} as /dev/xvd{dev} (not attached yet, or still being detached); retry later"),
            ));
        }
        let allocator = d.allocators.entry(instance.to_owned()).or_default();
        let chosen = allocator.next(&in_use).ok_or_else(|| {
            cloud(
                "AttachVolume",
                format!("too many EBS volumes attached to instance {instance}"),
            )
        })?;
        d.attaching
            .entry(instance.to_owned())
            .or_default()
            .insert(chosen.clone(), volume.to_owned());
        Ok((chosen, false))
    }

    /// Upstream `endAttaching`; `release` also deprioritizes the name (after an attach
    /// request was sent, or a detach done).
    fn end_attaching(&self, instance: &str, volume: &str, device: &str, release: bool) {
        let Ok(mut d) = self.devices.lock() else {
            return;
        };
        if let Some(a) = d.attaching.get_mut(instance) {
            if a.get(device).is_some_and(|v| v == volume) {
                a.remove(device);
            }
        }
        if release {
            d.allocators
                .entry(instance.to_owned())
                .or_default()
                .deprioritize(device);
        }
    }

    /// Upstream `wrapAttachError`: `VolumeInUse` names the instance the volume is attached to.
    async fn attach_error(&self, e: Error, volume: &str, instance: &str) -> Error {
        if code(&e) != Some("VolumeInUse") {
            return e;
        }
        if let Ok(Some(v)) = self.describe_volume(volume).await {
            if let Some((other, _, _)) = attachments(&v).into_iter().find(|a| a.2 == "attached") {
                return cloud(
                    "AttachVolume",
                    format!("error attaching EBS volume {volume} to instance {instance}: the volume is currently attached to instance {other:?}"),
                );
            }
        }
        e
    }
}

#[async_trait]
impl VolumeProvisioner for Aws {
    fn plugin_name(&self) -> &str {
        AWS_EBS_PLUGIN
    }

    /// Only the in-tree `awsElasticBlockStore` source: CSI volumes are the EBS CSI driver's.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .aws_elastic_block_store
            .as_ref()
            .map(|e| e.volume_id.clone())
    }

    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: volume_id.to_owned(),
                fs_type: fs_type.map(str::to_owned),
                partition: None,
                read_only: None,
            }),
            ..Default::default()
        }
    }

    /// [`ebs_parameters`]; the class's parameters go back to [`Self::create_volume`] as the
    /// request's options (`iopsPerGB`, `encrypted`, `kmsKeyId` are read there).
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        let p = ebs_parameters(parameters)?;
        Ok(ClassParameters {
            volume_type: p.volume_type,
            zone: p.zone.unwrap_or_default(),
            zones: p.zones.into_iter().collect(),
            fs_type: p.fs_type,
            options: parameters.clone(),
            ..Default::default()
        })
    }

    /// As upstream `CreateDisk`: `CreateVolume` with the type (gp2 by default; io1 with its
    /// IOPS), encryption and the tags (`Name`, the claim's, the cluster's), in the request's
    /// zone (else `[Global] Zone`, else this machine's); then the volume is waited for until
    /// `available`. The ID is `aws://<zone>/vol-...`; the labels its zone and region.
    async fn create_volume(&self, request: &VolumeRequest) -> Result<ProvisionedVolume> {
        let refused = |m: String| cloud("CreateVolume", m);
        let options = ebs_parameters(&request.options).map_err(refused)?;
        let create_type = volume_type(&request.volume_type).map_err(refused)?;
        let size = i32::try_from(request.size_gib)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                cloud(
                    "CreateVolume",
                    format!("invalid size {} GiB", request.size_gib),
                )
            })?;
        let zone = if request.zone.is_empty() {
            self.default_zone().await?
        } else {
            request.zone.clone()
        };
        let s = self.session().await?;
        let tags = volume_tags(
            request,
            s.cluster.as_ref().map(|c| (c.id.as_str(), c.legacy)),
        );
        let mut create = s
            .ec2
            .create_volume()
            .availability_zone(&zone)
            .size(size)
            .volume_type(VolumeType::from(create_type))
            .encrypted(options.encrypted || options.kms_key_id.is_some())
            .set_kms_key_id(options.kms_key_id.clone())
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Volume)
                    .set_tags(Some(
                        tags.iter()
                            .map(|(k, v)| Tag::builder().key(k).value(v).build())
                            .collect(),
                    ))
                    .build(),
            );
        if let Some(n) = iops(create_type, request.size_gib, options.iops_per_gb) {
            create = create.iops(i32::try_from(n).unwrap_or(i32::MAX));
        }
        let created = create.send().await.map_err(|e| sdk("CreateVolume", e))?;
        let id = created
            .volume_id()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| cloud("CreateVolume", "VolumeID was not returned by CreateVolume"))?
            .to_owned();
        let zone = created
            .availability_zone()
            .filter(|z| !z.is_empty())
            .unwrap_or(&zone)
            .to_owned();
        tracing::info!(volume = %id, %zone, size_gib = request.size_gib, r#type = create_type, "created EBS volume");
        self.wait_until_available(&id).await?;
        let size_gib = created
            .size()
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(request.size_gib);
        let region = zone_to_region(&zone).unwrap_or_else(|| s.region.clone());
        Ok(ProvisionedVolume {
            id: format!("aws://{zone}/{id}"),
            size_gib,
            labels: BTreeMap::from([
                (LABEL_TOPOLOGY_ZONE.to_owned(), zone),
                (LABEL_TOPOLOGY_REGION.to_owned(), region),
            ]),
        })
    }

    /// As upstream `DeleteDisk`: a volume EC2 lacks is deleted already; one not `available`
    /// (attached: the error names the instance) is refused, and the caller retries.
    async fn delete_volume(&self, volume_id: &str) -> Result<()> {
        let id = parse_volume_id(volume_id)?;
        let Some(v) = self.describe_volume(id).await? else {
            tracing::info!(
                volume = id,
                "volume not found when deleting it, assuming it's deleted"
            );
            return Ok(());
        };
        Self::check_available(&v, id, "deleting")?;
        let s = self.session().await?;
        let r = s
            .ec2
            .delete_volume()
            .volume_id(id)
            .send()
            .await
            .map_err(|e| sdk("DeleteVolume", e));
        absent(r, &["InvalidVolume.NotFound"])?;
        Ok(())
    }

    /// As upstream `ResizeDisk`: a volume already that large is left alone; else
    /// `ModifyVolume` to the new size, and unless that completed at once, its modification
    /// is read with back-off (1s doubling, 10 reads) until `optimizing` (the size is usable then) or
    /// `completed`; `failed` is an error.
    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> Result<u64> {
        let id = parse_volume_id(volume_id)?;
        let v = self.describe_volume(id).await?.ok_or(Error::DiskNotFound)?;
        let size = v.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0);
        if size >= new_size_gib {
            return Ok(size);
        }
        let target = i32::try_from(new_size_gib)
            .map_err(|_| cloud("ModifyVolume", format!("invalid size {new_size_gib} GiB")))?;
        let s = self.session().await?;
        let out = s
            .ec2
            .modify_volume()
            .volume_id(id)
            .size(target)
            .send()
            .await
            .map_err(|e| sdk("ModifyVolume", e))?;
        let done = |st: Option<&VolumeModificationState>| {
            matches!(
                st,
                Some(VolumeModificationState::Optimizing | VolumeModificationState::Completed)
            )
        };
        let first = out
            .volume_modification()
            .and_then(|m| m.modification_state());
        if first == Some(&VolumeModificationState::Completed) {
            return Ok(new_size_gib);
        }
        let mut delays = MODIFY_BACKOFF.delays();
        loop {
            let mods = s
                .ec2
                .describe_volumes_modifications()
                .volume_ids(id)
                .send()
                .await
                .map_err(|e| sdk("DescribeVolumesModifications", e))?;
            let last = mods.volumes_modifications().last();
            let st = last.and_then(|m| m.modification_state());
            if done(st) {
                return Ok(new_size_gib);
            }
            if st == Some(&VolumeModificationState::Failed) {
                return Err(cloud(
                    "ModifyVolume",
                    format!(
                        "modifying volume {id} to {new_size_gib} GiB failed: {}",
                        last.and_then(|m| m.status_message()).unwrap_or_default()
                    ),
                ));
            }
            match delays.next() {
                Some(d) => self.pause(d).await,
                None => {
                    return Err(cloud(
                        "ModifyVolume",
                        format!(
                            "volume {id} modification not optimizing after {:?} (state {:?})",
                            self.scaled(MODIFY_BACKOFF.total()),
                            st.map(|s| s.as_str())
                        ),
                    ))
                }
            }
        }
    }
    /// One `DescribeVolumes` for an ID (a reference that is no EBS volume ID, or one EC2
    /// does not know, finds none without a request or with its `NotFound`); one per page of
    /// 500 for a name (the `Name` tag, within the cluster's volumes) and for every volume of
    /// the cluster (its tag, as the instance listings filter).
    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> Result<Vec<CloudVolume>> {
        let s = self.session().await?;
        let mut filters = Self::cluster_filters(s.cluster.as_ref());
        let mut req = s.ec2.describe_volumes();
        match filter {
            VolumeFilter::Id(reference) => {
                let Ok(id) = parse_volume_id(reference) else {
                    return Ok(Vec::new());
                };
                return Ok(self
                    .describe_volume(id)
                    .await?
                    .iter()
                    .map(cloud_volume)
                    .collect());
            }
            VolumeFilter::Name(name) => filters.push(
                Filter::builder()
                    .name(format!("tag:{TAG_NAME}"))
                    .values(name)
                    .build(),
            ),
            VolumeFilter::All => {}
        }
        req = req
            .set_filters(Some(filters).filter(|f| !f.is_empty()))
            .max_results(500);
        let mut pages = req.into_paginator().send();
        let mut pager = Pager::new("ec2", "DescribeVolumes");
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk("DescribeVolumes", e))?;
            out.extend(page.volumes().iter().map(cloud_volume));
            if pager.next(page.next_token()).map_err(paginate)?.is_none() {
                break;
            }
        }
        if let VolumeFilter::Name(name) = filter {
            // EC2's tag filter is exact; a cloud that ignored it must not make another volume
            // this one.
            out.retain(|v| v.name == name);
        }
        Ok(out)
    }
}

#[async_trait]
impl VolumeAttacher for Aws {
    fn plugin_name(&self) -> &str {
        AWS_EBS_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.aws_elastic_block_store
            .as_ref()
            .map(|e| e.volume_id.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume
            .aws_elastic_block_store
            .as_ref()
            .map(|e| e.volume_id.clone())
    }

    /// As upstream `AttachDisk`: the instance's block devices are read; a volume already
    /// `attached` there is done; else a device is chosen (upstream's allocator), the volume
    /// must be `available` (one attached to another instance is refused naming it), then
    /// `AttachVolume` at `/dev/xvd<dev>` and the attachment waited for.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let id = parse_volume_id(volume_id)?;
        let instance = self
            .describe_instance(instance_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        let mapped = instance_devices(&instance);
        let (device, already) = self.assign_device(instance_id, &mapped, id)?;
        if already {
            tracing::debug!(
                volume = id,
                instance_id,
                device,
                "volume is already attached"
            );
            return Ok(());
        }
        let ec2_device = format!("/dev/xvd{device}");
        let sent: Result<()> = async {
            let v = self.describe_volume(id).await?.ok_or(Error::DiskNotFound)?;
            Self::check_available(&v, id, &format!("attaching to instance {instance_id}"))?;
            let s = self.session().await?;
            match s
                .ec2
                .attach_volume()
                .device(&ec2_device)
                .instance_id(instance_id)
                .volume_id(id)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => Err(self
                    .attach_error(sdk("AttachVolume", e), id, instance_id)
                    .await),
            }
        }
        .await;
        if let Err(e) = sent {
            self.end_attaching(instance_id, id, &device, false);
            return Err(e);
        }
        tracing::info!(volume = id, instance_id, device = %ec2_device, "AttachVolume sent");
        let waited = self
            .wait_for_attachment(id, "attached", instance_id, &ec2_device)
            .await;
        self.end_attaching(instance_id, id, &device, true);
        let dev = waited?;
        if dev != ec2_device {
            return Err(cloud(
                "AttachVolume",
                format!("disk attachment of {id} to {instance_id} failed: requested device {ec2_device:?} but found {dev:?}"),
            ));
        }
        Ok(())
    }

    /// As upstream `DetachDisk`: a volume EC2 lacks, or not attached to this instance, has
    /// nothing to detach; else `DetachVolume` and the attachment waited for until `detached`.
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let id = parse_volume_id(volume_id)?;
        let Some(v) = self.describe_volume(id).await? else {
            tracing::warn!(
                volume = id,
                instance_id,
                "detaching a volume that does not exist; assuming it is detached"
            );
            return Ok(());
        };
        let found = attachments(&v);
        let Some((_, dev, _)) = found.iter().find(|a| a.0 == instance_id) else {
            if let Some((other, _, _)) = found.first() {
                tracing::warn!(
                    volume = id,
                    instance_id,
                    other,
                    "detaching a volume that is attached to another instance; leaving it"
                );
            }
            return Ok(());
        };
        let device = short_device(dev).to_owned();
        let s = self.session().await?;
        let r = s
            .ec2
            .detach_volume()
            .instance_id(instance_id)
            .volume_id(id)
            .send()
            .await
            .map_err(|e| sdk("DetachVolume", e));
        if absent(r, &["InvalidVolume.NotFound", "IncorrectState"])?.is_none() {
            tracing::info!(volume = id, instance_id, "volume already detached or gone");
        }
        self.wait_for_attachment(id, "detached", instance_id, "")
            .await?;
        self.end_attaching(instance_id, id, &device, true);
        Ok(())
    }

    /// As upstream `DiskIsAttached`: whether EC2 lists an attachment of the volume to the
    /// instance (any state but detached); a volume EC2 lacks is not attached.
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> Result<bool> {
        let id = parse_volume_id(volume_id)?;
        Ok(self.describe_volume(id).await?.is_some_and(|v| {
            attachments(&v)
                .iter()
                .any(|(on, _, st)| on == instance_id && st != "detached")
        }))
    }

    /// As upstream `DisksAreAttached`, from one `DescribeInstances` of the instance: its
    /// block devices; a gone or terminated instance has none; when the read fails every
    /// volume counts as attached (the trait's rule).
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> Result<BTreeMap<String, bool>> {
        // `None`: the instance could not be read, and every volume counts as attached.
        let on: Option<BTreeSet<String>> = match self.describe_instance(instance_id).await {
            Ok(Some(i)) => {
                let terminated = i
                    .state()
                    .and_then(|s| s.name())
                    .is_some_and(|n| n.as_str() == "terminated");
                Some(if terminated {
                    BTreeSet::new()
                } else {
                    instance_devices(&i).into_values().map(|(v, _)| v).collect()
                })
            }
            Ok(None) => Some(BTreeSet::new()),
            Err(error) => {
                tracing::warn!(instance_id, %error, "reading the instance failed; assuming its volumes are attached");
                None
            }
        };
        Ok(volume_ids
            .iter()
            .map(|v| {
                let attached = match (&on, parse_volume_id(v)) {
                    (None, _) => true,
                    (Some(set), Ok(id)) => set.contains(id),
                    (Some(_), Err(_)) => false,
                };
                (v.clone(), attached)
            })
            .collect())
    }

    /// As upstream `GetDiskPath`: the device EC2 reports for the volume's attachment to the
    /// instance (`/dev/xvdba`); an error when it is not attached there.
    async fn get_attachment_disk_path(&self, instance_id: &str, volume_id: &str) -> Result<String> {
        let id = parse_volume_id(volume_id)?;
        let v = self.describe_volume(id).await?.ok_or(Error::DiskNotFound)?;
        attachments(&v)
            .into_iter()
            .find(|(on, dev, _)| on == instance_id && !dev.is_empty())
            .map(|(_, dev, _)| dev)
            .ok_or_else(|| {
                cloud(
                    "DescribeVolumes",
                    format!("no attachment of volume {id} to instance {instance_id}"),
                )
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_as_the_awsebs_plugin_reads_them() {
        let p = ebs_parameters(&params(&[
            ("Type", "io1"),
            ("zones", "us-east-1a, us-east-1b"),
            ("iopsPerGB", "10"),
            ("encrypted", "True"),
            ("kmsKeyId", "arn:aws:kms:us-east-1:123:key/k"),
            ("fsType", "xfs"),
        ]))
        .unwrap();
        assert_eq!(p.volume_type, "io1");
        assert_eq!(
            p.zones,
            BTreeSet::from(["us-east-1a".into(), "us-east-1b".into()])
        );
        assert_eq!(p.iops_per_gb, Some(10));
        assert!(p.encrypted);
        assert_eq!(
            p.kms_key_id.as_deref(),
            Some("arn:aws:kms:us-east-1:123:key/k")
        );
        assert_eq!(p.fs_type.as_deref(), Some("xfs"));
        assert_eq!(
            ebs_parameters(&params(&[("zone", "us-east-1c")]))
                .unwrap()
                .zone,
            Some("us-east-1c".into())
        );
        assert_eq!(
            ebs_parameters(&BTreeMap::new()).unwrap(),
            EbsParameters::default()
        );
    }

    #[test]
    fn parameters_refused_by_name() {
        for (kv, words) in [
            (
                vec![("replication-type", "none")],
                "invalid option \"replication-type\" for volume plugin kubernetes.io/aws-ebs",
            ),
            (vec![("type", "gp9")], "invalid AWS VolumeType \"gp9\""),
            (
                vec![("iopsPerGB", "ten")],
                "invalid iopsPerGB value \"ten\"",
            ),
            (vec![("iopsPerGB", "0")], "invalid iopsPerGB value \"0\""),
            (vec![("iopsPerGB", "64001")], "between 1 and 64000"),
            (
                vec![("encrypted", "yes")],
                "invalid encrypted boolean value",
            ),
            (vec![("zone", "a"), ("zones", "b")], "at the same time"),
            (vec![("zones", "a,,b")], "must not contain an empty zone"),
        ] {
            let e = ebs_parameters(&params(&kv)).unwrap_err();
            assert!(e.contains(words), "{kv:?}: {e}");
        }
    }

    #[test]
    fn io1_iops_are_clamped_as_upstream() {
        assert_eq!(iops("gp2", 10, Some(10)), None);
        assert_eq!(iops("io1", 10, Some(10)), Some(100));
        assert_eq!(iops("io1", 4, Some(10)), Some(100));
        assert_eq!(iops("io1", 100, Some(50)), Some(5000));
        assert_eq!(iops("io1", 16_000, Some(50)), Some(64_000));
        assert_eq!(iops("io1", 10, None), Some(100));
        assert_eq!(volume_type("").unwrap(), "gp2");
        assert_eq!(volume_type("st1").unwrap(), "st1");
    }

    #[test]
    fn tags_carry_name_and_cluster_as_upstream() {
        let request = VolumeRequest {
            name: "kubernetes-dynamic-pvc-1".into(),
            tags: params(&[("kubernetes.io/created-for/pvc/name", "c")]),
            ..Default::default()
        };
        let t = volume_tags(&request, Some(("demo", false)));
        assert_eq!(
            t,
            params(&[
                ("kubernetes.io/created-for/pvc/name", "c"),
                ("Name", "kubernetes-dynamic-pvc-1"),
                ("kubernetes.io/cluster/demo", "owned"),
            ])
        );
        let t = volume_tags(&request, Some(("old", true)));
        assert_eq!(t.get("KubernetesCluster").map(String::as_str), Some("old"));
        assert_eq!(
            t.get("kubernetes.io/cluster/old").map(String::as_str),
            Some("owned")
        );
        assert_eq!(volume_tags(&request, None).len(), 2);
    }

    #[test]
    fn devices_allocated_as_upstream() {
        let mut a = DeviceAllocator::default();
        let mut in_use = BTreeMap::new();
        assert_eq!(a.next(&in_use).as_deref(), Some("ba"));
        in_use.insert("ba".to_owned(), "vol-1".to_owned());
        assert_eq!(a.next(&in_use).as_deref(), Some("bb"));
        // A name used and released goes to the back of the queue.
        a.deprioritize("ba");
        in_use.clear();
        assert_eq!(a.next(&in_use).as_deref(), Some("bb"));
        a.deprioritize("bb");
        assert_eq!(a.next(&in_use).as_deref(), Some("bc"));
        // All 52 taken.
        let all: BTreeMap<String, String> =
            candidate_devices().map(|d| (d, "v".to_owned())).collect();
        assert_eq!(all.len(), 52);
        assert!(all.contains_key("cz"));
        assert_eq!(a.next(&all), None);
        assert_eq!(short_device("/dev/xvdba"), "ba");
        assert_eq!(short_device("/dev/sdf"), "f");
    }

    #[test]
    fn backoffs_are_bounded_as_upstream() {
        assert_eq!(ATTACHMENT_BACKOFF.total(), Duration::from_secs(2046));
        assert_eq!(ATTACHMENT_BACKOFF.delays().count(), 10);
        assert_eq!(MODIFY_BACKOFF.total(), Duration::from_secs(511));
        assert!(CREATE_BACKOFF.total() < Duration::from_secs(120));
    }
}
