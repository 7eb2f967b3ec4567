//! The controllers' one error type; each variant names the operation that failed.

/// Errors of the controllers; each variant names the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A controller cannot start with this provider or these options.
    #[error("cannot start {controller}: {reason}")]
    StartController {
        /// Canonical controller name.
        controller: &'static str,
        /// Why.
        reason: String,
    },
    /// A controller name given to the runner is none of [`crate::names`].
    #[error("unknown controller {name:?}")]
    UnknownController {
        /// The name as given.
        name: String,
    },
    /// The controllers' metrics could not be registered.
    #[error("registering controller metrics")]
    RegisterMetrics(#[from] prometheus::Error),
    /// A controller's ServiceAccount could not be read or created.
    #[error("ensuring service account kube-system/{account}")]
    EnsureServiceAccount {
        /// ServiceAccount name.
        account: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A token for a controller's ServiceAccount could not be had.
    #[error("requesting a token for service account kube-system/{account}")]
    RequestToken {
        /// ServiceAccount name.
        account: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A client acting as a controller's ServiceAccount could not be built.
    #[error("building the client of service account kube-system/{account}: {message}")]
    ServiceAccountClient {
        /// ServiceAccount name.
        account: String,
        /// What failed.
        message: String,
    },
    /// A controller task ended unexpectedly.
    #[error("{controller} stopped unexpectedly: {reason}")]
    ControllerStopped {
        /// Canonical controller name.
        controller: &'static str,
        /// Why.
        reason: String,
    },
    /// Asking the cloud about a Node's instance failed.
    #[error("getting instance metadata of node {node}")]
    InstanceMetadata {
        /// Node name.
        node: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// Asking the cloud about the node by its name (the node's own view) failed.
    #[error("getting the cloud's facts about node {node}")]
    NodeFacts {
        /// Node name.
        node: String,
        /// What failed.
        source: hypercloud_cloudprovider::node::LookupError,
    },
    /// The cloud gave no provider ID for a Node that has none.
    #[error("cloud provider does not set node provider ID for node {node}")]
    MissingProviderId {
        /// Node name.
        node: String,
    },
    /// The kubelet's `alpha.kubernetes.io/provided-node-ip` matches no cloud address.
    #[error("provided node ip for node {node:?} is not valid: {message}")]
    ProvidedNodeIp {
        /// Node name.
        node: String,
        /// What is wrong.
        message: String,
    },
    /// Patching a Node's metadata or spec failed.
    #[error("patching node {node}")]
    PatchNode {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Patching a Node's status failed.
    #[error("patching status of node {node}")]
    PatchNodeStatus {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Deleting a Node failed.
    #[error("deleting node {node}")]
    DeleteNode {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Asking the cloud whether an instance exists or is shut down failed.
    #[error("checking instance of node {node}")]
    CheckInstance {
        /// Node name.
        node: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// A load balancer call failed.
    #[error("{operation} for service {service}")]
    LoadBalancer {
        /// `ensure load balancer`, `delete load balancer`, ...
        operation: &'static str,
        /// `namespace/name`.
        service: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// The cloud returned no status for a load balancer.
    #[error("service status returned by EnsureLoadBalancer is nil for service {service}")]
    NilLoadBalancerStatus {
        /// `namespace/name`.
        service: String,
    },
    /// Patching a Service's finalizers failed.
    #[error("patching finalizers of service {service}")]
    PatchServiceFinalizers {
        /// `namespace/name`.
        service: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Patching a Service's status failed.
    #[error("patching status of service {service}")]
    PatchServiceStatus {
        /// `namespace/name`.
        service: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A route call failed.
    #[error("{operation}")]
    Route {
        /// `list routes`, `create route 10.244.1.0/24 for node-1`, ...
        operation: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// Asking the cloud for a volume's labels failed.
    #[error("getting labels of the volume of persistent volume {pv}")]
    GetVolumeLabels {
        /// PV name.
        pv: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// Patching a PersistentVolume failed.
    #[error("patching persistent volume {pv}")]
    PatchPersistentVolume {
        /// PV name.
        pv: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A flag node IPAM reads is invalid on its own or with the others (upstream's checks
    /// when it starts the node-ipam-controller).
    #[error("{flag}: {message}")]
    InvalidFlag {
        /// The flag, with its dashes.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No node CIDR is left in a cluster CIDR.
    #[error("failed to allocate cidr from cluster cidr {cluster_cidr}: no remaining CIDRs left to allocate in the accepted range")]
    CidrExhausted {
        /// The exhausted cluster CIDR.
        cluster_cidr: String,
    },
    /// A CIDR does not fit the allocator's cluster CIDRs (a Node's podCIDR outside
    /// `--cluster-cidr`, or more podCIDRs than cluster CIDRs).
    #[error("node {node}: pod CIDR {cidr}: {message}")]
    ForeignPodCidr {
        /// Node name.
        node: String,
        /// The CIDR.
        cidr: String,
        /// Why it does not fit.
        message: String,
    },
    /// An apiserver call of the volume controllers failed.
    #[error("{operation}")]
    Kube {
        /// `getting StorageClass fast`, ...
        operation: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A volume call to the cloud failed.
    #[error("{operation}")]
    Cloud {
        /// `creating a volume for claim ns/data`, ...
        operation: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// A claim cannot be provisioned as it is.
    #[error("provisioning claim {claim}: {message}")]
    Provision {
        /// `namespace/name`.
        claim: String,
        /// Why.
        message: String,
    },
    /// `--cluster-cidr` or a node podCIDR is not a CIDR.
    #[error("invalid CIDR {cidr:?}")]
    ParseCidr {
        /// The text.
        cidr: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
