//! The CSI v1 messages this driver speaks (package `csi.v1` of the Container Storage
//! Interface spec, v1.12), written with prost's derives: the field numbers and types are the
//! spec's wire format. Snapshot, group-snapshot and snapshot-metadata messages are left out:
//! the driver does not advertise those capabilities, and their calls answer `Unimplemented`
//! before any body is read.

#![allow(missing_docs)]

use std::collections::BTreeMap;

type Map = BTreeMap<String, String>;

// ---- Identity ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginInfoRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginInfoResponse {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub vendor_version: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub manifest: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<PluginCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginCapability {
    #[prost(oneof = "plugin_capability::Type", tags = "1, 2")]
    pub r#type: Option<plugin_capability::Type>,
}

pub mod plugin_capability {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Service {
        #[prost(enumeration = "ServiceType", tag = "1")]
        pub r#type: i32,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ServiceType {
        Unknown = 0,
        ControllerService = 1,
        VolumeAccessibilityConstraints = 2,
        GroupControllerService = 3,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct VolumeExpansion {
        #[prost(enumeration = "ExpansionType", tag = "1")]
        pub r#type: i32,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ExpansionType {
        Unknown = 0,
        Online = 1,
        Offline = 2,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Type {
        #[prost(message, tag = "1")]
        Service(Service),
        #[prost(message, tag = "2")]
        VolumeExpansion(VolumeExpansion),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeResponse {
    /// `google.protobuf.BoolValue`.
    #[prost(message, optional, tag = "1")]
    pub ready: Option<bool>,
}

// ---- Volumes, capabilities, topology ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeCapability {
    #[prost(oneof = "volume_capability::AccessType", tags = "1, 2")]
    pub access_type: Option<volume_capability::AccessType>,
    #[prost(message, optional, tag = "3")]
    pub access_mode: Option<volume_capability::AccessMode>,
}

pub mod volume_capability {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BlockVolume {}
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MountVolume {
        #[prost(string, tag = "1")]
        pub fs_type: String,
        #[prost(string, repeated, tag = "2")]
        pub mount_flags: Vec<String>,
        #[prost(string, tag = "3")]
        pub volume_mount_group: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AccessMode {
        #[prost(enumeration = "Mode", tag = "1")]
        pub mode: i32,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Mode {
        Unknown = 0,
        SingleNodeWriter = 1,
        SingleNodeReaderOnly = 2,
        MultiNodeReaderOnly = 3,
        MultiNodeSingleWriter = 4,
        MultiNodeMultiWriter = 5,
        SingleNodeSingleWriter = 6,
        SingleNodeMultiWriter = 7,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum AccessType {
        #[prost(message, tag = "1")]
        Block(BlockVolume),
        #[prost(message, tag = "2")]
        Mount(MountVolume),
    }
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct CapacityRange {
    #[prost(int64, tag = "1")]
    pub required_bytes: i64,
    #[prost(int64, tag = "2")]
    pub limit_bytes: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeContentSource {
    #[prost(oneof = "volume_content_source::Type", tags = "1, 2")]
    pub r#type: Option<volume_content_source::Type>,
}

pub mod volume_content_source {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SnapshotSource {
        #[prost(string, tag = "1")]
        pub snapshot_id: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct VolumeSource {
        #[prost(string, tag = "1")]
        pub volume_id: String,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Type {
        #[prost(message, tag = "1")]
        Snapshot(SnapshotSource),
        #[prost(message, tag = "2")]
        Volume(VolumeSource),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Volume {
    #[prost(int64, tag = "1")]
    pub capacity_bytes: i64,
    #[prost(string, tag = "2")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub volume_context: Map,
    #[prost(message, optional, tag = "4")]
    pub content_source: Option<VolumeContentSource>,
    #[prost(message, repeated, tag = "5")]
    pub accessible_topology: Vec<Topology>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TopologyRequirement {
    #[prost(message, repeated, tag = "1")]
    pub requisite: Vec<Topology>,
    #[prost(message, repeated, tag = "2")]
    pub preferred: Vec<Topology>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Topology {
    #[prost(btree_map = "string, string", tag = "1")]
    pub segments: Map,
}

// ---- Controller ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateVolumeRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub capacity_range: Option<CapacityRange>,
    #[prost(message, repeated, tag = "3")]
    pub volume_capabilities: Vec<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub parameters: Map,
    #[prost(btree_map = "string, string", tag = "5")]
    pub secrets: Map,
    #[prost(message, optional, tag = "6")]
    pub volume_content_source: Option<VolumeContentSource>,
    #[prost(message, optional, tag = "7")]
    pub accessibility_requirements: Option<TopologyRequirement>,
    #[prost(btree_map = "string, string", tag = "8")]
    pub mutable_parameters: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateVolumeResponse {
    #[prost(message, optional, tag = "1")]
    pub volume: Option<Volume>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub secrets: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerPublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub node_id: String,
    #[prost(message, optional, tag = "3")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(bool, tag = "4")]
    pub readonly: bool,
    #[prost(btree_map = "string, string", tag = "5")]
    pub secrets: Map,
    #[prost(btree_map = "string, string", tag = "6")]
    pub volume_context: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerPublishVolumeResponse {
    #[prost(btree_map = "string, string", tag = "1")]
    pub publish_context: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerUnpublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub node_id: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub secrets: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerUnpublishVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateVolumeCapabilitiesRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub volume_context: Map,
    #[prost(message, repeated, tag = "3")]
    pub volume_capabilities: Vec<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub parameters: Map,
    #[prost(btree_map = "string, string", tag = "5")]
    pub secrets: Map,
    #[prost(btree_map = "string, string", tag = "6")]
    pub mutable_parameters: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateVolumeCapabilitiesResponse {
    #[prost(message, optional, tag = "1")]
    pub confirmed: Option<validate_volume_capabilities_response::Confirmed>,
    #[prost(string, tag = "2")]
    pub message: String,
}

pub mod validate_volume_capabilities_response {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Confirmed {
        #[prost(btree_map = "string, string", tag = "1")]
        pub volume_context: super::Map,
        #[prost(message, repeated, tag = "2")]
        pub volume_capabilities: Vec<super::VolumeCapability>,
        #[prost(btree_map = "string, string", tag = "3")]
        pub parameters: super::Map,
        #[prost(btree_map = "string, string", tag = "4")]
        pub mutable_parameters: super::Map,
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListVolumesRequest {
    #[prost(int32, tag = "1")]
    pub max_entries: i32,
    #[prost(string, tag = "2")]
    pub starting_token: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListVolumesResponse {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<list_volumes_response::Entry>,
    #[prost(string, tag = "2")]
    pub next_token: String,
}

pub mod list_volumes_response {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct VolumeStatus {
        #[prost(string, repeated, tag = "1")]
        pub published_node_ids: Vec<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Entry {
        #[prost(message, optional, tag = "1")]
        pub volume: Option<super::Volume>,
        #[prost(message, optional, tag = "2")]
        pub status: Option<VolumeStatus>,
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerGetCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerGetCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<ControllerServiceCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerServiceCapability {
    #[prost(oneof = "controller_service_capability::Type", tags = "1")]
    pub r#type: Option<controller_service_capability::Type>,
}

pub mod controller_service_capability {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Rpc {
        #[prost(enumeration = "RpcType", tag = "1")]
        pub r#type: i32,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum RpcType {
        Unknown = 0,
        CreateDeleteVolume = 1,
        PublishUnpublishVolume = 2,
        ListVolumes = 3,
        GetCapacity = 4,
        CreateDeleteSnapshot = 5,
        ListSnapshots = 6,
        CloneVolume = 7,
        PublishReadonly = 8,
        ExpandVolume = 9,
        ListVolumesPublishedNodes = 10,
        VolumeCondition = 11,
        GetVolume = 12,
        SingleNodeMultiWriter = 13,
        ModifyVolume = 14,
        GetSnapshot = 15,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Type {
        #[prost(message, tag = "1")]
        Rpc(Rpc),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerExpandVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(message, optional, tag = "2")]
    pub capacity_range: Option<CapacityRange>,
    #[prost(btree_map = "string, string", tag = "3")]
    pub secrets: Map,
    #[prost(message, optional, tag = "4")]
    pub volume_capability: Option<VolumeCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerExpandVolumeResponse {
    #[prost(int64, tag = "1")]
    pub capacity_bytes: i64,
    #[prost(bool, tag = "2")]
    pub node_expansion_required: bool,
}

// ---- Node ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeStageVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub publish_context: Map,
    #[prost(string, tag = "3")]
    pub staging_target_path: String,
    #[prost(message, optional, tag = "4")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "5")]
    pub secrets: Map,
    #[prost(btree_map = "string, string", tag = "6")]
    pub volume_context: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeStageVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnstageVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub staging_target_path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnstageVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub publish_context: Map,
    #[prost(string, tag = "3")]
    pub staging_target_path: String,
    #[prost(string, tag = "4")]
    pub target_path: String,
    #[prost(message, optional, tag = "5")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(bool, tag = "6")]
    pub readonly: bool,
    #[prost(btree_map = "string, string", tag = "7")]
    pub secrets: Map,
    #[prost(btree_map = "string, string", tag = "8")]
    pub volume_context: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub target_path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetVolumeStatsRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub volume_path: String,
    #[prost(string, tag = "3")]
    pub staging_target_path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetVolumeStatsResponse {
    #[prost(message, repeated, tag = "1")]
    pub usage: Vec<VolumeUsage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeUsage {
    #[prost(int64, tag = "1")]
    pub available: i64,
    #[prost(int64, tag = "2")]
    pub total: i64,
    #[prost(int64, tag = "3")]
    pub used: i64,
    #[prost(enumeration = "volume_usage::Unit", tag = "4")]
    pub unit: i32,
}

pub mod volume_usage {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Unit {
        Unknown = 0,
        Bytes = 1,
        Inodes = 2,
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<NodeServiceCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeServiceCapability {
    #[prost(oneof = "node_service_capability::Type", tags = "1")]
    pub r#type: Option<node_service_capability::Type>,
}

pub mod node_service_capability {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Rpc {
        #[prost(enumeration = "RpcType", tag = "1")]
        pub r#type: i32,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum RpcType {
        Unknown = 0,
        StageUnstageVolume = 1,
        GetVolumeStats = 2,
        ExpandVolume = 3,
        VolumeCondition = 4,
        SingleNodeMultiWriter = 5,
        VolumeMountGroup = 6,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Type {
        #[prost(message, tag = "1")]
        Rpc(Rpc),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoResponse {
    #[prost(string, tag = "1")]
    pub node_id: String,
    #[prost(int64, tag = "2")]
    pub max_volumes_per_node: i64,
    #[prost(message, optional, tag = "3")]
    pub accessible_topology: Option<Topology>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeExpandVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub volume_path: String,
    #[prost(message, optional, tag = "3")]
    pub capacity_range: Option<CapacityRange>,
    #[prost(string, tag = "4")]
    pub staging_target_path: String,
    #[prost(message, optional, tag = "5")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "6")]
    pub secrets: Map,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeExpandVolumeResponse {
    #[prost(int64, tag = "1")]
    pub capacity_bytes: i64,
}
