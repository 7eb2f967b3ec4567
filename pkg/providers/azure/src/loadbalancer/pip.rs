//! A public frontend's public IP, as upstream v1.20's `determinePublicIPName`,
//! `ensurePublicIPExists` and `reconcilePublicIP`: the one named by `azure-pip-name`, else the
//! one holding `spec.loadBalancerIP`, else the cluster's own `<cluster>-a<uid>` (Static, the
//! load balancer's SKU, IPv4), made when missing and tagged `service=<ns>/<name>` and
//! `kubernetes-cluster-name=<cluster>`. Only the cluster's own is ever deleted, and only when
//! no other Service is named in its `service` tag.

use std::collections::BTreeMap;

use crate::client::Arm;
use crate::config::LoadBalancerSku;
use crate::error::{Error, Result};
use crate::models::{DnsSettings, PublicIpAddress, Sku};
use crate::Azure;

use super::names::pip_name;
use super::spec::{Public, Spec};

/// The tag naming the Services that use a public IP (comma-separated).
pub(super) const TAG_SERVICE: &str = "service";
/// The tag naming the cluster that made a public IP.
pub(super) const TAG_CLUSTER: &str = "kubernetes-cluster-name";
/// The tag naming the Service that set the DNS label.
pub(super) const TAG_DNS: &str = "kubernetes-dns-label-service";

const PUBLIC_IPS: &str = "Microsoft.Network/publicIPAddresses";

/// The Services of a `service` tag.
fn services_of(tags: &BTreeMap<String, String>) -> Vec<String> {
    tags.get(TAG_SERVICE)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Sets (or with `""` removes) the DNS label, refusing a label another Service set; whether
/// anything changed.
fn set_dns(pip: &mut PublicIpAddress, label: Option<&str>, service: &str) -> Result<bool> {
    let Some(label) = label else {
        return Ok(false);
    };
    let current = pip
        .properties
        .dns_settings
        .as_ref()
        .and_then(|d| d.domain_name_label.clone());
    if let Some(owner) = pip.tags.get(TAG_DNS).filter(|o| *o != service) {
        if current.is_some() {
            return Err(Error::LoadBalancer {
                service: service.into(),
                message: format!(
                    "the DNS label of public IP {} was set by service {owner}",
                    pip.name.as_deref().unwrap_or_default()
                ),
            });
        }
    }
    if label.is_empty() {
        let had = current.is_some() || pip.tags.contains_key(TAG_DNS);
        pip.properties.dns_settings = None;
        pip.tags.remove(TAG_DNS);
        return Ok(had);
    }
    let mut changed = false;
    if current.as_deref() != Some(label) {
        pip.properties
            .dns_settings
            .get_or_insert_with(DnsSettings::default)
            .domain_name_label = Some(label.to_owned());
        changed = true;
    }
    if pip.tags.get(TAG_DNS).map(String::as_str) != Some(service) {
        pip.tags.insert(TAG_DNS.into(), service.into());
        changed = true;
    }
    Ok(changed)
}

impl Azure {
    /// The public IP of the Service's frontend, made or brought in line with what it asks.
    pub(super) async fn ensure_public_ip(
        &self,
        arm: &Arm,
        cluster: &str,
        spec: &Spec,
        public: &Public,
    ) -> Result<PublicIpAddress> {
        let group = &public.resource_group;
        let service = &spec.service;
        let missing = |message: String| Error::LoadBalancer {
            service: service.clone(),
            message,
        };
        // A public IP of the user's: its DNS label only.
        let chosen = if let Some(name) = &public.pip_name {
            match arm
                .get::<PublicIpAddress>(&arm.resource_id(group, PUBLIC_IPS, name))
                .await
            {
                Ok(pip) => Some(pip),
                Err(e) if e.is_not_found() => {
                    return Err(missing(format!(
                        "public IP {name} of annotation azure-pip-name does not exist in resource group {group}"
                    )))
                }
                Err(e) => return Err(e),
            }
        } else if let Some(ip) = &spec.ip {
            let all: Vec<PublicIpAddress> =
                arm.list(&arm.resource_id(group, PUBLIC_IPS, "")).await?;
            let found = all
                .into_iter()
                .find(|p| p.properties.ip_address.as_deref() == Some(ip.as_str()));
            Some(found.ok_or_else(|| {
                missing(format!(
                    "no public IP of resource group {group} has the address {ip} the Service asks for"
                ))
            })?)
        } else {
            None
        };
        if let Some(mut pip) = chosen {
            if set_dns(&mut pip, public.dns_label.as_deref(), service)? {
                let id = pip.id.clone().unwrap_or_default();
                pip = arm.put(&id, &pip).await?;
            }
            return Ok(pip);
        }
        let name = pip_name(cluster, &spec.prefix);
        let id = arm.resource_id(group, PUBLIC_IPS, &name);
        let (mut pip, mut changed) = match arm.get::<PublicIpAddress>(&id).await {
            Ok(pip) => (pip, false),
            Err(e) if e.is_not_found() => {
                let mut pip = PublicIpAddress {
                    location: Some(self.config.location.clone()),
                    sku: (self.config.load_balancer_sku == LoadBalancerSku::Standard).then(|| {
                        Sku {
                            name: Some("Standard".into()),
                            ..Default::default()
                        }
                    }),
                    tags: self.config.tags.clone(),
                    ..Default::default()
                };
                pip.properties.public_ip_allocation_method = Some("Static".into());
                pip.properties.public_ip_address_version = Some("IPv4".into());
                pip.tags.insert(TAG_CLUSTER.into(), cluster.into());
                (pip, true)
            }
            Err(e) => return Err(e),
        };
        let mut services = services_of(&pip.tags);
        if !services.contains(service) {
            services.push(service.clone());
            pip.tags.insert(TAG_SERVICE.into(), services.join(","));
            changed = true;
        }
        for (k, v) in &public.tags {
            if pip.tags.get(k) != Some(v) {
                pip.tags.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed |= set_dns(&mut pip, public.dns_label.as_deref(), service)?;
        if changed {
            pip = arm.put(&id, &pip).await?;
        }
        Ok(pip)
    }

    /// Takes the Service off the cluster's own public IP `<cluster>-<prefix>` in `group`:
    /// deleted when no other Service is tagged on it; a public IP the cluster did not make is
    /// left alone.
    pub(super) async fn release_own_public_ip(
        &self,
        arm: &Arm,
        group: &str,
        cluster: &str,
        prefix: &str,
        service: &str,
    ) -> Result<()> {
        let id = arm.resource_id(group, PUBLIC_IPS, &pip_name(cluster, prefix));
        let mut pip: PublicIpAddress = match arm.get(&id).await {
            Ok(pip) => pip,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut services = services_of(&pip.tags);
        let ours = pip.tags.get(TAG_CLUSTER).map(String::as_str) == Some(cluster)
            && services.iter().any(|s| s == service);
        if !ours {
            return Ok(());
        }
        services.retain(|s| s != service);
        if services.is_empty() {
            return match arm.delete(&id).await {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            };
        }
        pip.tags.insert(TAG_SERVICE.into(), services.join(","));
        if pip.tags.get(TAG_DNS).map(String::as_str) == Some(service) {
            pip.tags.remove(TAG_DNS);
            pip.properties.dns_settings = None;
        }
        let _: PublicIpAddress = arm.put(&id, &pip).await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_belong_to_one_service() {
        let mut pip = PublicIpAddress {
            name: Some("pip".into()),
            ..Default::default()
        };
        assert!(!set_dns(&mut pip, None, "ns/a").unwrap());
        assert!(set_dns(&mut pip, Some("web"), "ns/a").unwrap());
        assert!(!set_dns(&mut pip, Some("web"), "ns/a").unwrap());
        assert_eq!(pip.tags.get(TAG_DNS).map(String::as_str), Some("ns/a"));
        let e = set_dns(&mut pip, Some("other"), "ns/b").unwrap_err();
        assert!(e.to_string().contains("set by service ns/a"), "{e}");
        assert!(set_dns(&mut pip, Some(""), "ns/a").unwrap());
        assert!(pip.properties.dns_settings.is_none() && pip.tags.is_empty());
        pip.tags.insert(TAG_SERVICE.into(), "ns/a, ns/b".into());
        assert_eq!(services_of(&pip.tags), ["ns/a", "ns/b"]);
    }
}
