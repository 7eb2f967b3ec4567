//! Well-known names shared by the components and the cloud-node controllers (upstream
//! `k8s.io/cloud-provider/api` and `k8s.io/api/core/v1` constants).

/// Taint set by the kubelet with `--cloud-provider=external`, removed by the cloud-node
/// controller once the Node is initialised from the cloud.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Taint set by the cloud-node-lifecycle controller on Nodes whose instance is shut down.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Zone label.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Region label.
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// Deprecated zone label, still set for old clients.
pub const LABEL_FAILURE_DOMAIN_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// Deprecated region label, still set for old clients.
pub const LABEL_FAILURE_DOMAIN_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// Instance type label.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Deprecated instance type label.
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// Nodes with this label get no load balancer traffic, unless its value is false as Go's
/// `strconv.ParseBool` reads it (upstream v1.34; an unparsable value excludes).
pub const LABEL_EXCLUDE_FROM_EXTERNAL_LB: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// Go's `strconv.ParseBool`, which upstream reads boolean labels and annotations with.
pub fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}
/// Control-plane role label.
pub const LABEL_CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

/// The kubelet's `--node-ip` in external mode; the cloud-node controller keeps only cloud
/// addresses matching it.
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// Finalizer the service controller puts on LoadBalancer Services.
pub const FINALIZER_LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Lease of kube-controller-manager.
pub const LEASE_KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// Lease of cloud-controller-manager.
pub const LEASE_CLOUD_CONTROLLER_MANAGER: &str = "cloud-controller-manager";
/// Leader migration lease (KEP-2436).
pub const LEASE_LEADER_MIGRATION: &str = "cloud-provider-extraction-migration";
