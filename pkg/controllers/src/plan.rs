//! Which of the enabled controllers run with a given provider and flags, and why the others do
//! not: decided here once, read by the runner ([`crate::run_plan`]) and by the personalities'
//! start-up report (upstream decides this inside each controller's start function and logs it;
//! the report and the runner here cannot disagree because they read the same [`Plan`]).

use hypercloud_cloudprovider::Interface;
use hypercloud_options::ControllerOptions;

use crate::names::Controller;
use crate::{node_ipam, route, Error};

/// Why an enabled controller does not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Upstream skips it with a log line and the process goes on.
    Skipped(&'static str),
    /// Upstream fails start-up (cloud-node without instances): starting the plan fails with
    /// this reason.
    Refused(Refusal),
}

/// A reason that fails start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The provider has neither Instances nor InstancesV2.
    NoInstances,
    /// `--cluster-cidr` does not parse.
    InvalidClusterCidr(String),
    /// Node IPAM's flags are inconsistent: the flag and what is wrong.
    InvalidNodeIpam(&'static str, String),
}

impl Blocked {
    /// The reason, as the start-up report prints it.
    pub fn reason(&self) -> String {
        match self {
            Blocked::Skipped(why) => (*why).to_string(),
            Blocked::Refused(Refusal::NoInstances) => {
                "cloud provider does not support instances".into()
            }
            Blocked::Refused(Refusal::InvalidClusterCidr(cidr)) => {
                format!("invalid --cluster-cidr {cidr:?}")
            }
            Blocked::Refused(Refusal::InvalidNodeIpam(flag, message)) => {
                format!("{flag}: {message}")
            }
        }
    }
}

/// One enabled controller and whether it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The controller.
    pub controller: Controller,
    /// `None`: it runs.
    pub blocked: Option<Blocked>,
}

/// The enabled controllers in start order, each with whether it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    entries: Vec<Entry>,
}

/// Decides, for each of `enabled`, whether it can run with `cloud` and `options` (upstream's
/// checks in each controller's start function).
pub fn plan(cloud: &dyn Interface, options: &ControllerOptions, enabled: &[Controller]) -> Plan {
    let has_instances = cloud.instances().is_some() || cloud.instances_v2().is_some();
    let shared = &options.kube_cloud_shared;
    let entries = enabled
        .iter()
        .map(|&controller| {
            let blocked = match controller {
                // Both look instances up.
                Controller::CloudNode | Controller::CloudNodeLifecycle => {
                    (!has_instances).then_some(Blocked::Refused(Refusal::NoInstances))
                }
                Controller::ServiceLb => cloud.load_balancer().is_none().then_some(
                    Blocked::Skipped("cloud provider does not support load balancers"),
                ),
                Controller::NodeIpam => match node_ipam::IpamConfig::from_options(options) {
                    Ok(Some(_)) => None,
                    Ok(None) => Some(Blocked::Skipped("needs --allocate-node-cidrs=true")),
                    Err(Error::InvalidFlag { flag, message }) => {
                        Some(Blocked::Refused(Refusal::InvalidNodeIpam(flag, message)))
                    }
                    Err(e) => Some(Blocked::Refused(Refusal::InvalidNodeIpam(
                        "--cluster-cidr",
                        e.to_string(),
                    ))),
                },
                Controller::NodeRoute => {
                    let cidr = shared.cluster_cidr.as_deref().unwrap_or("");
                    if !shared.allocate_node_cidrs || !shared.configure_cloud_routes {
                        Some(Blocked::Skipped(
                            "needs --allocate-node-cidrs=true and --configure-cloud-routes=true",
                        ))
                    } else if cloud.routes().is_none() {
                        Some(Blocked::Skipped("cloud provider does not support routes"))
                    } else if route::cluster_cidrs(cidr).is_err() {
                        Some(Blocked::Refused(Refusal::InvalidClusterCidr(cidr.into())))
                    } else {
                        None
                    }
                }
                Controller::PvLabel => cloud
                    .pv_labeler()
                    .is_none()
                    .then_some(Blocked::Skipped("cloud provider does not label volumes")),
                Controller::PvProvisioner | Controller::PvExpander => cloud
                    .volume_provisioner()
                    .is_none()
                    .then_some(Blocked::Skipped(
                        "cloud provider has no in-tree volume plugin",
                    )),
                Controller::AttachDetach => {
                    cloud
                        .volume_attacher()
                        .is_none()
                        .then_some(Blocked::Skipped(
                            "cloud provider has no in-tree volume plugin",
                        ))
                }
            };
            Entry {
                controller,
                blocked,
            }
        })
        .collect();
    Plan { entries }
}

impl Plan {
    /// Every enabled controller, in start order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The same decisions for only `controllers` (leader migration runs the plan in two
    /// parts, one per Lease).
    pub fn only(&self, controllers: &[Controller]) -> Plan {
        Plan {
            entries: self
                .entries
                .iter()
                .filter(|e| controllers.contains(&e.controller))
                .cloned()
                .collect(),
        }
    }

    /// This plan and then `other`'s entries (without leader election both sets run at once).
    pub fn with(mut self, other: &Plan) -> Plan {
        self.entries.extend(other.entries.iter().cloned());
        self
    }

    /// The controllers that run.
    pub fn running(&self) -> Vec<Controller> {
        self.entries
            .iter()
            .filter(|e| e.blocked.is_none())
            .map(|e| e.controller)
            .collect()
    }

    /// The first controller that fails start-up, as the error the runner returns.
    pub fn refusal(&self) -> Option<Error> {
        self.entries.iter().find_map(|e| match &e.blocked {
            Some(Blocked::Refused(Refusal::NoInstances)) => Some(Error::StartController {
                controller: e.controller.name(),
                reason: Blocked::Refused(Refusal::NoInstances).reason(),
            }),
            Some(Blocked::Refused(Refusal::InvalidClusterCidr(cidr))) => {
                Some(Error::ParseCidr { cidr: cidr.clone() })
            }
            Some(Blocked::Refused(Refusal::InvalidNodeIpam(flag, message))) => {
                Some(Error::InvalidFlag {
                    flag,
                    message: message.clone(),
                })
            }
            _ => None,
        })
    }

    /// Logs why each blocked controller does not run, as upstream's start functions do.
    pub(crate) fn log_skipped(&self) {
        for e in &self.entries {
            if let Some(Blocked::Skipped(why)) = &e.blocked {
                tracing::warn!(controller = %e.controller, reason = why, "not starting it");
            }
        }
    }
}

/// The controllers that run, by their stable names (for logs).
impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.running().iter().map(|c| c.name()).collect();
        write!(f, "[{}]", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::options;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig};

    fn cloud(disabled: &[&str]) -> FakeCloud {
        FakeCloud::new(FakeConfig {
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
    }

    const ALL: [Controller; 6] = [
        Controller::CloudNode,
        Controller::CloudNodeLifecycle,
        Controller::ServiceLb,
        Controller::NodeIpam,
        Controller::NodeRoute,
        Controller::PvLabel,
    ];

    #[test]
    fn a_full_provider_with_routes_on_runs_everything() {
        let o = options(&[
            "--allocate-node-cidrs=true",
            "--configure-cloud-routes=true",
            "--cluster-cidr=10.244.0.0/16",
        ]);
        let p = plan(&cloud(&[]), &o, &ALL);
        assert_eq!(p.running(), ALL);
        assert!(p.refusal().is_none());
    }

    #[test]
    fn missing_capabilities_block_with_their_reason() {
        let p = plan(
            &cloud(&["load-balancer", "pv-labeler"]),
            &options(&[]),
            &ALL,
        );
        assert_eq!(
            p.running(),
            [Controller::CloudNode, Controller::CloudNodeLifecycle]
        );
        let reason = |c| {
            p.entries()
                .iter()
                .find(|e| e.controller == c)
                .and_then(|e| e.blocked.as_ref())
                .map(Blocked::reason)
        };
        assert_eq!(
            reason(Controller::PvLabel).as_deref(),
            Some("cloud provider does not label volumes")
        );
        assert_eq!(
            reason(Controller::ServiceLb).as_deref(),
            Some("cloud provider does not support load balancers")
        );
        assert_eq!(
            reason(Controller::NodeRoute).as_deref(),
            Some("needs --allocate-node-cidrs=true and --configure-cloud-routes=true")
        );
        assert_eq!(
            reason(Controller::NodeIpam).as_deref(),
            Some("needs --allocate-node-cidrs=true")
        );
        // Skipped controllers do not fail start-up.
        assert!(p.refusal().is_none());
    }

    #[test]
    fn volume_controllers_need_an_in_tree_volume_plugin() {
        // The fake provider has none: both are skipped, start-up goes on.
        let volumes = [
            Controller::PvProvisioner,
            Controller::PvExpander,
            Controller::AttachDetach,
        ];
        let p = plan(&cloud(&[]), &options(&[]), &volumes);
        assert!(p.running().is_empty());
        assert!(p.refusal().is_none());
        assert!(p.entries().iter().all(|e| e.blocked
            == Some(Blocked::Skipped(
                "cloud provider has no in-tree volume plugin"
            ))));
    }

    #[test]
    fn no_instances_and_a_bad_cluster_cidr_fail_start_up() {
        let p = plan(
            &cloud(&["instances", "instances-v2"]),
            &options(&[]),
            &[Controller::CloudNodeLifecycle],
        );
        let err = p.refusal().expect("refused");
        assert!(
            err.to_string().contains(
                "cloud-node-lifecycle-controller: cloud provider does not support instances"
            ),
            "{err}"
        );
        let p = plan(
            &cloud(&[]),
            &options(&[
                "--allocate-node-cidrs=true",
                "--configure-cloud-routes=true",
                "--cluster-cidr=10.244.0.0",
            ]),
            &ALL,
        );
        // Node IPAM, first in start order, says it naming the flag.
        assert_eq!(
            p.refusal().expect("refused").to_string(),
            "--cluster-cidr: invalid CIDR \"10.244.0.0\""
        );
        assert!(matches!(
            p.only(&[Controller::NodeRoute]).refusal(),
            Some(Error::ParseCidr { .. })
        ));
        // Only the part leader migration hands to one Lease.
        assert!(p.only(&[Controller::ServiceLb]).refusal().is_none());
        let p = plan(
            &cloud(&[]),
            &options(&[
                "--allocate-node-cidrs=true",
                "--cluster-cidr=10.244.0.0/16,10.245.0.0/16",
            ]),
            &[Controller::NodeIpam],
        );
        assert_eq!(
            p.refusal().expect("refused").to_string(),
            "--cluster-cidr: two CIDRs must be dual-stack: one IPv4 and one IPv6"
        );
    }

    #[test]
    fn node_ipam_runs_without_routes_and_with_routes_off() {
        // Node IPAM needs no cloud capability and not --configure-cloud-routes.
        let p = plan(
            &cloud(&["routes"]),
            &options(&[
                "--allocate-node-cidrs=true",
                "--configure-cloud-routes=false",
                "--cluster-cidr=10.244.0.0/16",
            ]),
            &ALL,
        );
        assert!(p.running().contains(&Controller::NodeIpam));
        assert!(!p.running().contains(&Controller::NodeRoute));
    }
}
