//! The kubelet's cloud duties, for the `kubelet-helper` personality: upstream the kubelet's
//! `--cloud-provider` code paths (`pkg/kubelet/kubelet_node_status.go` and the node-address
//! status setter).
//!
//! In-tree, the kubelet asks the provider for its node name (`CurrentNodeName`), provider ID,
//! addresses, zone, region and instance type, and registers its Node with all of them; it then
//! keeps the addresses in sync. With `--cloud-provider=external` it makes no cloud call: it
//! registers the Node with the `node.cloudprovider.kubernetes.io/uninitialized` taint (and
//! `--provider-id`, and with `--node-ip` that address as an annotation and as its InternalIP
//! beside its Hostname; without `--node-ip` no address at all) and the cloud-node controller of
//! the cloud-controller-manager fills in the rest. [`registration`] builds and registers the
//! Node; [`volumes`] is the cloud part of mounting in-tree plugin volumes (in-tree only);
//! [`csi`] is the kubelet's half of a CSI driver (registration, stage and publish).
//!
//! Start here: [`registration::initial_node`] and [`registration::register`] (what a Node is
//! registered with), then [`volumes::sync`]. The loop around them (flags, periodic address sync)
//! is the `kubelet-helper` personality, `cmd/hypercloud/src/kubelet_helper.rs`.
//!
//! Not here: a kubelet. Nothing runs pods or mounts disks, and the rest of the Node's status
//! (conditions, heartbeats, Leases) is the real kubelet's (kwok's in the demo).

pub mod csi;
mod error;
pub mod registration;
pub mod volumes;

pub use error::{Error, Result};
