//! Errors of node registration and the volume manager, each named after the failed operation.

/// Why registration or an address update failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider could not name this node.
    #[error("asking the cloud for the node name of host {hostname:?}")]
    CurrentNodeName {
        /// The hostname asked about.
        hostname: String,
        /// The provider's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// The provider supports neither Instances nor InstancesV2.
    #[error("cloud provider {0:?} does not support instances, which the kubelet needs")]
    NoInstances(String),
    /// A provider call about this node failed.
    #[error("asking the cloud for {what} of node {node}")]
    CloudLookup {
        /// What was asked (addresses, instance ID, zone, ...).
        what: &'static str,
        /// The node.
        node: String,
        /// The provider's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// `--node-ip` does not match the cloud's addresses.
    #[error("node {node}: {mismatch}")]
    NodeIp {
        /// The node.
        node: String,
        /// What does not match: the message itself, so it is part of this one rather than a
        /// separate cause.
        mismatch: hypercloud_cloudprovider::node::NodeIpError,
    },
    /// Creating the Node failed.
    #[error("registering node {node} with the API server")]
    CreateNode {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the existing Node failed.
    #[error("reading existing node {node}")]
    GetNode {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Updating the existing Node's labels failed.
    #[error("updating labels of existing node {node}")]
    PatchNode {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// A call to the node's CSI driver failed.
    #[error("CSI {what} for node {node}: {message}")]
    Csi {
        /// The call (NodeGetInfo, NodeStageVolume, ...) or step.
        what: &'static str,
        /// The node.
        node: String,
        /// The gRPC status, as code and message.
        message: String,
    },
    /// Writing the node's CSINode or its CSI labels failed.
    #[error("registering the CSI driver of node {node}")]
    Register {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Updating the Node's addresses failed.
    #[error("updating addresses of node {node}")]
    PatchNodeStatus {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading what the volume manager needs failed.
    #[error("reading {what} for the volumes of node {node}")]
    VolumeLookup {
        /// What was read.
        what: &'static str,
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the Node's `volumesInUse` failed.
    #[error("updating volumesInUse of node {node}")]
    PatchVolumesInUse {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
