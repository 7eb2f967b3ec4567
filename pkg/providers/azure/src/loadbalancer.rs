//! LoadBalancer, as upstream v1.20's `azure_loadbalancer.go` for `vmType: standard` with one
//! load balancer per cluster: `<cluster>` for public Services and `<cluster>-internal` for
//! internal ones (config `loadBalancerName` replaces the cluster's name), in
//! `loadBalancerResourceGroup`, of `loadBalancerSku`, with one backend pool named after the
//! cluster whose members are the nodes' primary NICs (`members`). A Service owns the parts
//! named from its UID (`a<uid>`, cloudprovider's default load balancer name): a frontend IP
//! configuration (a public IP `<cluster>-a<uid>`, `pip`, or a private address on config
//! `subnetName`), a rule `<frontend>-<PROTOCOL>-<port>` and a probe of the same name per
//! port (`parts`), and its security rules (`security`). What the Service asks is read and
//! checked first (`spec`: every upstream annotation implemented or refused by name).
//!
//! Floating IP is on, as upstream v1.20 (the backend port is the Service port, which
//! kube-proxy catches on the node at the frontend's address), unless the Service has newer
//! upstream's `azure-disable-load-balancer-floating-ip: "true"`: then the backend port is the
//! NodePort. The local cloud's data plane is a proxy that connects to member-address:
//! backendPort, so there traffic reaches a node's NodePort only with floating IP off.
//!
//! Order, as upstream's `EnsureLoadBalancer`: the public IP, then the load balancer (one PUT,
//! only when something changed), then the NICs into the pool (and NICs of nodes no longer
//! given out), the security rules, the Service's parts off the other kind of load balancer,
//! and the cluster's own public IP when no longer used. Deleting: security rules, the
//! Service's parts (a load balancer left without frontends is deleted, its NICs taken out of
//! its pool first, as the local cloud refuses a pool a NIC still names), then the cluster's
//! own public IP. Without config `securityGroupName` the security rules are skipped with a
//! warning (upstream fails): the local cloud's members' groups decide its traffic, and a basic
//! load balancer without any admits everyone.

mod members;
mod names;
mod parts;
mod pip;
mod security;
mod settings;
mod spec;

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use hypercloud_cloudprovider::lb_webhook::{admit_service_lb, SERVICE_LB_ANNOTATIONS};
use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{default_load_balancer_name, LoadBalancer, WebhookSpec, Webhooks};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;

use crate::client::Arm;
use crate::config::LoadBalancerSku;
use crate::error::{Error, Result};
use crate::models::{
    FrontendIpConfiguration, LoadBalancer as ArmLoadBalancer, NetworkSecurityGroup,
    PublicIpAddress, Reference, SecurityRule, Sku,
};
use crate::Azure;

use names::lb_name;
use spec::{annotation, service_name, spec_of, Frontend, Spec};

const LOAD_BALANCERS: &str = "Microsoft.Network/loadBalancers";
const SECURITY_GROUPS: &str = "Microsoft.Network/networkSecurityGroups";

/// Whether the missing `securityGroupName` was warned about (once per process).
static NO_SECURITY_GROUP_WARNED: AtomicBool = AtomicBool::new(false);

/// One Service's reconcile at a time (upstream's `serviceReconcileLock`): the load balancer,
/// the security group and the NICs are shared by every Service and written whole (read,
/// change, PUT), so two at once would lose one's change.
static RECONCILE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn status(ip: Option<String>) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(
            ip.into_iter()
                .map(|ip| LoadBalancerIngress {
                    ip: Some(ip),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// `lb` without the read-only back-references ARM shows (rules of a frontend, members of a
/// pool), for a PUT.
fn for_put(mut lb: ArmLoadBalancer) -> ArmLoadBalancer {
    for f in &mut lb.properties.frontend_ip_configurations {
        f.properties.load_balancing_rules.clear();
    }
    for p in &mut lb.properties.backend_address_pools {
        p.properties.backend_ip_configurations.clear();
        p.properties.load_balancing_rules.clear();
    }
    lb
}

/// The members (IP configuration IDs) of `lb`'s pools named `pools` (all when `None`).
fn pool_members(lb: &ArmLoadBalancer, pool: Option<&str>) -> Vec<String> {
    lb.properties
        .backend_address_pools
        .iter()
        .filter(|p| {
            pool.is_none_or(|n| p.name.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(n)))
        })
        .flat_map(|p| p.properties.backend_ip_configurations.iter())
        .filter_map(|r| r.id.clone())
        .collect()
}

impl Azure {
    /// The load balancers of `loadBalancerResourceGroup` (none when the group is missing).
    async fn load_balancers(&self, arm: &Arm) -> Result<Vec<ArmLoadBalancer>> {
        let collection = arm.resource_id(
            &self.config.load_balancer_resource_group,
            LOAD_BALANCERS,
            "",
        );
        match arm.list(&collection).await {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }

    /// The cluster's two load balancers (public, internal) as listed, those that exist.
    async fn cluster_lbs(&self, arm: &Arm, cluster: &str) -> Result<[Option<ArmLoadBalancer>; 2]> {
        let all = self.load_balancers(arm).await?;
        let find = |internal| {
            let name = lb_name(&self.config, cluster, internal);
            all.iter()
                .find(|lb| {
                    lb.name
                        .as_deref()
                        .is_some_and(|n| n.eq_ignore_ascii_case(&name))
                })
                .cloned()
        };
        Ok([find(false), find(true)])
    }

    /// The address of a frontend: its private one, or its public IP's.
    async fn frontend_address(
        &self,
        arm: &Arm,
        frontend: &FrontendIpConfiguration,
    ) -> Result<Option<String>> {
        if let Some(ip) = &frontend.properties.private_ip_address {
            if frontend.properties.public_ip_address.is_none() {
                return Ok(Some(ip.clone()));
            }
        }
        let Some(id) = frontend
            .properties
            .public_ip_address
            .as_ref()
            .and_then(|r| r.id.as_deref())
        else {
            return Ok(None);
        };
        match arm.get::<PublicIpAddress>(id).await {
            Ok(pip) => Ok(pip.properties.ip_address),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Brings the Service's rules in the cluster's security group to `want`; `ensuring`
    /// also requires the group and puts config `tags` on it.
    async fn security_rules(
        &self,
        arm: &Arm,
        prefix: &str,
        service: &str,
        ip: Option<&str>,
        want: &[SecurityRule],
        ensuring: bool,
    ) -> Result<()> {
        let Some(name) = self.config.security_group_name.as_deref() else {
            if !NO_SECURITY_GROUP_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!("azure.json has no securityGroupName: load balancer security rules are not managed (upstream fails); a standard load balancer's backends then need a group of their own that admits the traffic");
            }
            return Ok(());
        };
        let id = arm.resource_id(
            &self.config.security_group_resource_group,
            SECURITY_GROUPS,
            name,
        );
        let mut nsg: NetworkSecurityGroup = match arm.get(&id).await {
            Ok(nsg) => nsg,
            Err(e) if e.is_not_found() && !ensuring => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut dirty = security::reconcile(&mut nsg, prefix, service, ip, want)?;
        if ensuring {
            for (k, v) in &self.config.tags {
                if nsg.tags.get(k) != Some(v) {
                    nsg.tags.insert(k.clone(), v.clone());
                    dirty = true;
                }
            }
        }
        if dirty {
            nsg.properties.network_interfaces.clear();
            nsg.properties.subnets.clear();
            let _: NetworkSecurityGroup = arm.put(&id, &nsg).await?;
        }
        Ok(())
    }

    /// Takes the Service's parts off `lb`; a load balancer left without frontends is deleted,
    /// its NICs taken out of its pools first.
    async fn remove_from(&self, arm: &Arm, mut lb: ArmLoadBalancer, prefix: &str) -> Result<()> {
        if !parts::remove_parts(&mut lb, prefix) {
            return Ok(());
        }
        let id = lb.id.clone().unwrap_or_default();
        if !lb.properties.frontend_ip_configurations.is_empty() {
            let _: ArmLoadBalancer = arm.put(&id, &for_put(lb)).await?;
            return Ok(());
        }
        let pools: Vec<String> = lb
            .properties
            .backend_address_pools
            .iter()
            .filter_map(|p| p.name.as_deref())
            .map(|n| parts::child_id(&id, "backendAddressPools", n))
            .collect();
        let mut nics: Vec<String> = pool_members(&lb, None)
            .iter()
            .map(|c| members::nic_of(c).to_owned())
            .collect();
        nics.sort_by_key(|n| n.to_lowercase());
        nics.dedup_by_key(|n| n.to_lowercase());
        futures::future::try_join_all(nics.iter().map(|nic| self.leave_pools(arm, nic, &pools)))
            .await?;
        match arm.delete(&id).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Ensures the Service's load balancer; with `create` false (an update), only when the
    /// Service already has one (`None` otherwise), as upstream's `UpdateLoadBalancer`.
    async fn ensure(
        &self,
        cluster: &str,
        spec: &Spec,
        nodes: &[Node],
        create: bool,
    ) -> Result<Option<LoadBalancerStatus>> {
        let arm = self.arm().await?;
        let internal = spec.internal();
        let name = lb_name(&self.config, cluster, internal);
        let [public_lb, internal_lb] = self.cluster_lbs(arm, cluster).await?;
        let (existing, flipped) = if internal {
            (internal_lb, public_lb)
        } else {
            (public_lb, internal_lb)
        };
        let has = |lb: &Option<ArmLoadBalancer>| {
            lb.as_ref()
                .is_some_and(|lb| parts::has_parts(lb, &spec.prefix))
        };
        if !create && !has(&existing) && !has(&flipped) {
            return Ok(None);
        }
        let lb_id = arm.resource_id(
            &self.config.load_balancer_resource_group,
            LOAD_BALANCERS,
            &name,
        );
        let mut frontend = FrontendIpConfiguration {
            name: Some(spec.frontend_name.clone()),
            ..Default::default()
        };
        let mut address = None;
        match &spec.frontend {
            Frontend::Public(public) => {
                let pip = self.ensure_public_ip(arm, cluster, spec, public).await?;
                frontend.properties.public_ip_address =
                    Some(Reference::to(pip.id.clone().unwrap_or_default()));
                address = pip.properties.ip_address;
            }
            Frontend::Internal { subnet } => {
                let vnet = arm.resource_id(
                    &self.config.vnet_resource_group,
                    "Microsoft.Network/virtualNetworks",
                    self.config.vnet_name.as_deref().unwrap_or_default(),
                );
                let f = &mut frontend.properties;
                f.subnet = Some(Reference::to(format!("{vnet}/subnets/{subnet}")));
                f.private_ip_allocation_method = Some(
                    if spec.ip.is_some() {
                        "Static"
                    } else {
                        "Dynamic"
                    }
                    .into(),
                );
                f.private_ip_address.clone_from(&spec.ip);
            }
        }
        let want = parts::wanted(spec, &lb_id, cluster, frontend);
        let mut lb = existing.unwrap_or_else(|| ArmLoadBalancer {
            location: Some(self.config.location.clone()),
            sku: (self.config.load_balancer_sku == LoadBalancerSku::Standard).then(|| Sku {
                name: Some("Standard".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let mut dirty = parts::put_parts(&mut lb, &spec.prefix, &want);
        for (k, v) in &self.config.tags {
            if lb.tags.get(k) != Some(v) {
                lb.tags.insert(k.clone(), v.clone());
                dirty = true;
            }
        }
        let rules = lb.properties.load_balancing_rules.len();
        let limit = self.config.maximum_load_balancer_rule_count;
        if u32::try_from(rules).unwrap_or(u32::MAX) > limit {
            return Err(Error::LoadBalancer {
                service: spec.service.clone(),
                message: format!("load balancer {name} would have {rules} rules, over maximumLoadBalancerRuleCount {limit}"),
            });
        }
        if dirty {
            lb = arm.put(&lb_id, &for_put(lb)).await?;
        }
        if internal {
            address = parts::own_frontend(&lb, &spec.prefix)
                .and_then(|f| f.properties.private_ip_address.clone());
        }
        let ip = address.ok_or_else(|| Error::Missing {
            what: format!("load balancer {name} frontend {}", spec.frontend_name),
            message: "ARM answered no address for it".into(),
        })?;
        let pool_id = parts::child_id(&lb_id, "backendAddressPools", cluster);
        let current = pool_members(&lb, Some(cluster));
        let members = self
            .ensure_members(arm, &name, &pool_id, nodes, &current)
            .await?;
        let mut addresses: Vec<String> = members.into_iter().filter_map(|m| m.address).collect();
        addresses.sort();
        let want = security::wanted_rules(spec, &ip, &addresses);
        self.security_rules(arm, &spec.prefix, &spec.service, Some(&ip), &want, true)
            .await?;
        if let Some(other) = flipped {
            self.remove_from(arm, other, &spec.prefix).await?;
        }
        // The cluster's own public IP, when the Service no longer uses it.
        let own_pip_used = matches!(&spec.frontend, Frontend::Public(p) if p.pip_name.is_none() && spec.ip.is_none());
        if !own_pip_used {
            let group = match &spec.frontend {
                Frontend::Public(p) => p.resource_group.clone(),
                Frontend::Internal { .. } => self.config.resource_group.clone(),
            };
            self.release_own_public_ip(arm, &group, cluster, &spec.prefix, &spec.service)
                .await?;
        }
        Ok(Some(status(Some(ip))))
    }

    /// Removes the Service's load balancer parts, security rules and own public IP.
    async fn delete(&self, cluster: &str, svc: &Service) -> Result<()> {
        let arm = self.arm().await?;
        let prefix = default_load_balancer_name(svc);
        let service = service_name(svc);
        let lbs: Vec<ArmLoadBalancer> = self
            .cluster_lbs(arm, cluster)
            .await?
            .into_iter()
            .flatten()
            .filter(|lb| parts::has_parts(lb, &prefix))
            .collect();
        // The address in shared security rules: the status's, else the frontend's.
        let mut ip = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref())
            .and_then(|i| i.first())
            .and_then(|i| i.ip.clone());
        if ip.is_none() && annotation(svc, settings::SHARED_RULE) == Some("true") {
            if let Some(f) = lbs.iter().find_map(|lb| parts::own_frontend(lb, &prefix)) {
                ip = self.frontend_address(arm, f).await?;
            }
        }
        self.security_rules(arm, &prefix, &service, ip.as_deref(), &[], false)
            .await?;
        for lb in lbs {
            self.remove_from(arm, lb, &prefix).await?;
        }
        let group = annotation(svc, settings::PIP_RESOURCE_GROUP)
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .unwrap_or(&self.config.resource_group)
            .to_owned();
        self.release_own_public_ip(arm, &group, cluster, &prefix, &service)
            .await
    }

    /// The Service's load balancer status: its frontend's address; an empty status when only
    /// the cluster's own public IP is left (upstream's `existsPip`), so that it is deleted.
    async fn status_of(&self, cluster: &str, svc: &Service) -> Result<Option<LoadBalancerStatus>> {
        let arm = self.arm().await?;
        let prefix = default_load_balancer_name(svc);
        for lb in self.cluster_lbs(arm, cluster).await?.into_iter().flatten() {
            if let Some(f) = parts::own_frontend(&lb, &prefix) {
                return Ok(Some(status(self.frontend_address(arm, f).await?)));
            }
        }
        let group = annotation(svc, settings::PIP_RESOURCE_GROUP)
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .unwrap_or(&self.config.resource_group);
        let id = arm.resource_id(
            group,
            "Microsoft.Network/publicIPAddresses",
            &names::pip_name(cluster, &prefix),
        );
        match arm.get::<PublicIpAddress>(&id).await {
            Ok(p) if p.tags.get(pip::TAG_CLUSTER).map(String::as_str) == Some(cluster) => {
                Ok(Some(LoadBalancerStatus::default()))
            }
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl LoadBalancer for Azure {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> hypercloud_cloudprovider::Result<Option<LoadBalancerStatus>> {
        self.status_of(cluster_name, service)
            .await
            .map_err(Error::into_provider_error)
    }

    /// The refused rows of `SERVICE_SETTINGS`, then every value: what ensuring runs first,
    /// so the webhook and the controller cannot disagree.
    fn check_service(&self, service: &Service) -> hypercloud_cloudprovider::Result<()> {
        spec_of(&self.config, service).map(drop)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> hypercloud_cloudprovider::Result<LoadBalancerStatus> {
        let spec = spec_of(&self.config, service)?;
        let _one_at_a_time = RECONCILE.lock().await;
        self.ensure(cluster_name, &spec, nodes, true)
            .await
            .map(Option::unwrap_or_default)
            .map_err(Error::into_provider_error)
    }

    /// The same convergence as ensuring, for a Service that has a load balancer.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> hypercloud_cloudprovider::Result<()> {
        let spec = spec_of(&self.config, service)?;
        let _one_at_a_time = RECONCILE.lock().await;
        self.ensure(cluster_name, &spec, nodes, false)
            .await
            .map(drop)
            .map_err(Error::into_provider_error)
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> hypercloud_cloudprovider::Result<()> {
        let _one_at_a_time = RECONCILE.lock().await;
        self.delete(cluster_name, service)
            .await
            .map_err(Error::into_provider_error)
    }
}

/// hypercloud's own `service-lb-annotations` webhook (the kit's, the same on every provider
/// with load balancers), deciding with [`LoadBalancer::check_service`].
#[async_trait]
impl Webhooks for Azure {
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![SERVICE_LB_ANNOTATIONS]
    }

    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> hypercloud_cloudprovider::Result<AdmissionResponse> {
        admit_service_lb(self, webhook, request)
    }
}
