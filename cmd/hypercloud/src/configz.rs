//! What `/configz` serves (upstream component-base `configz`, set by the cloud-controller-manager
//! to its `CloudControllerManagerConfiguration` under `cloudcontrollermanager.config.k8s.io`, and
//! by kube-controller-manager to its `KubeControllerManagerConfiguration` under
//! `kubecontrollermanager.config.k8s.io`): the effective configuration from the flags, with
//! upstream's internal field names (those types have no JSON tags, so Go marshals the field
//! names) and Go durations. The controller-manager serves the sections of the controllers it
//! has (`Generic`, `KubeCloudShared`, `NodeIPAMController`, `ServiceController`), not those of
//! the kube-controller-manager controllers hypercloud does not have.

use hypercloud_metrics::Configz;
use hypercloud_options::{CloudWebhookOptions, ControllerOptions};
use serde_json::{json, Value};

use crate::cloud::Common;
use crate::leader_migration;

/// Upstream's `ConfigzName` of the cloud-controller-manager.
pub const CLOUD_CONTROLLER_MANAGER: &str = "cloudcontrollermanager.config.k8s.io";
/// kube-controller-manager's.
pub const KUBE_CONTROLLER_MANAGER: &str = "kubecontrollermanager.config.k8s.io";

fn text(p: Option<&std::path::Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

/// The configuration of a controller manager: the cloud-controller-manager's when `webhooks`
/// is given (only it has those flags), the controller-manager's otherwise.
pub fn configz(
    component: &str,
    common: &Common,
    o: &ControllerOptions,
    webhooks: Option<&CloudWebhookOptions>,
    migration: Option<&leader_migration::Plan>,
) -> Configz {
    let le = &o.leader_election;
    let shared = &o.kube_cloud_shared;
    let generic = json!({
        // The insecure port was removed upstream; its fields stay at their defaults.
        "Port": 0,
        "Address": "0.0.0.0",
        "MinResyncPeriod": o.generic.min_resync_period.to_string(),
        "ClientConnection": {
            "Kubeconfig": text(common.kube.kubeconfig.as_deref()),
            "AcceptContentTypes": "",
            // What the client speaks (protobuf is not implemented).
            "ContentType": "application/json",
            "QPS": common.kube.kube_api_qps,
            "Burst": common.kube.kube_api_burst,
        },
        "ControllerStartInterval": "0s",
        "LeaderElection": {
            "LeaderElect": le.leader_elect,
            "LeaseDuration": le.lease_duration.to_string(),
            "RenewDeadline": le.renew_deadline.to_string(),
            "RetryPeriod": le.retry_period.to_string(),
            "ResourceLock": le.resource_lock,
            "ResourceName": le.resource_name,
            "ResourceNamespace": le.resource_namespace,
        },
        "Controllers": o.generic.controllers,
        "Debugging": {"EnableProfiling": false, "EnableContentionProfiling": false},
        "LeaderMigrationEnabled": o.generic.leader_migration.enable_leader_migration,
        "LeaderMigration": match migration {
            Some(m) => json!({
                "LeaderName": m.lease,
                "ResourceLock": "leases",
                "ControllerLeaders": m.migration.iter()
                    .map(|c| json!({"Name": c, "Component": component}))
                    .collect::<Vec<_>>(),
            }),
            None => json!({"LeaderName": "", "ResourceLock": "", "ControllerLeaders": null}),
        },
    });
    let kube_cloud_shared = json!({
        "CloudProvider": {
            "Name": common.cloud.cloud_provider,
            "CloudConfigFile": text(common.cloud.cloud_config_path()),
        },
        "ExternalCloudVolumePlugin": "",
        "UseServiceAccountCredentials": shared.use_service_account_credentials,
        "AllowUntaggedCloud": false,
        "RouteReconciliationPeriod": shared.route_reconciliation_period.to_string(),
        "NodeMonitorPeriod": shared.node_monitor_period.to_string(),
        "ClusterName": shared.cluster_name,
        "ClusterCIDR": shared.cluster_cidr.clone().unwrap_or_default(),
        "AllocateNodeCIDRs": shared.allocate_node_cidrs,
        "CIDRAllocatorType": shared.cidr_allocator_type,
        "ConfigureCloudRoutes": shared.configure_cloud_routes,
        "NodeSyncPeriod": "0s",
    });
    let service = json!({"ConcurrentServiceSyncs": o.service_controller.concurrent_service_syncs});
    match webhooks {
        Some(w) => Configz {
            name: CLOUD_CONTROLLER_MANAGER.into(),
            config: json!({
                "Generic": generic,
                "KubeCloudShared": kube_cloud_shared,
                "NodeController": {"ConcurrentNodeSyncs": o.node_controller.concurrent_node_syncs},
                "ServiceController": service,
                "NodeStatusUpdateFrequency": o.node_controller.node_status_update_frequency.to_string(),
                "Webhook": {
                    "Webhooks": if w.webhook.webhooks.is_empty() {
                        Value::Null
                    } else {
                        json!(w.webhook.webhooks)
                    },
                },
            }),
        },
        None => {
            let service_cidrs = o.node_ipam.service_cidrs().unwrap_or_default();
            Configz {
                name: KUBE_CONTROLLER_MANAGER.into(),
                config: json!({
                    "Generic": generic,
                    "KubeCloudShared": kube_cloud_shared,
                    "NodeIPAMController": {
                        "ServiceCIDR": service_cidrs.first().copied().unwrap_or_default(),
                        "SecondaryServiceCIDR": service_cidrs.get(1).copied().unwrap_or_default(),
                        "NodeCIDRMaskSize": o.node_ipam.node_cidr_mask_size,
                        "NodeCIDRMaskSizeIPv4": o.node_ipam.node_cidr_mask_size_ipv4,
                        "NodeCIDRMaskSizeIPv6": o.node_ipam.node_cidr_mask_size_ipv6,
                    },
                    "ServiceController": service,
                }),
            }
        }
    }
}
